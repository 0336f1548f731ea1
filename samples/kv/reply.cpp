// samples/kv/reply.cpp — a connection's pending output (reply.hpp).
#include "reply.hpp"

#include <uring/resp/parser.hpp>
#include <uring/task_adapters.hpp>

#include <algorithm>

namespace kv {

namespace {
// The most bytes one write hands the stream: the stall timeout applies to each, so a client that reads
// slowly but steadily is not cut off in the middle of a long value.
constexpr std::size_t write_piece = 256 * 1024;
// Bytes written and not acknowledged that a socket takes without waiting on its peer (its initial send
// buffer, tcp_wmem's default).
constexpr std::size_t surely_taken = 16 * 1024;
}  // namespace

void reply::bulk(value_ptr v) {
  if (!v) return null();
  if (v->size() < by_reference) return uring::resp::append_bulk_string(text_, *v);
  text_.push_back('$');
  text_.append(std::to_string(v->size())).append("\r\n");
  referenced_ += v->size();
  refs_.push_back({text_.size(), std::move(v)});
  text_.append("\r\n");
}

void reply::map_header(std::size_t pairs) {
  text_.push_back(resp3_ ? '%' : '*');
  text_.append(std::to_string(resp3_ ? pairs : 2 * pairs)).append("\r\n");
}

void reply::verbatim(std::string_view txt) {
  if (!resp3_) return uring::resp::append_bulk_string(text_, txt);
  text_.push_back('=');
  text_.append(std::to_string(txt.size() + 4)).append("\r\ntxt:").append(txt).append("\r\n");
}

bool reply::must_flush() {
  if (text_.size() > limits_->hard) {
    throw output_overflow("output buffer of " + std::to_string(text_.size()) +
                          " bytes passed --max-output-buffer");
  }
  return pending() >= limits_->soft && !held_;
}

// Whether writing `n` more bytes may wait on the client.
bool reply::may_wait(std::size_t n) {
  if (*unacknowledged_ + n <= surely_taken) return false;
  *unacknowledged_ = stream_->unacknowledged();
  return *unacknowledged_ + n > surely_taken;
}

uring::task<void> reply::flush() {
  const std::size_t n = pending();
  const bool waits = wait_hook_ != nullptr && may_wait(n);
  if (wait_hook_ != nullptr) *unacknowledged_ += n;
  if (!waits && refs_.empty() && text_.size() <= write_piece) {
    // Most flushes: one copied piece the socket takes at once. The write is the task, with no frame of
    // this function's; the text moves aside (keeping both buffers) so that it outlives the return.
    sending_.swap(text_);
    text_.clear();
    return uring::with_timeout(stream_->write_all(std::span(sending_.data(), sending_.size())),
                               limits_->stall);
  }
  return flush_all(waits);
}

uring::task<void> reply::flush_all(bool waits) {
  if (waits) co_await wait_hook_(wait_ctx_);
  std::string_view text = text_;
  std::size_t from = 0;
  for (const ref& r : refs_) {
    co_await write(text.substr(from, r.at - from));
    co_await write(*r.value);
    from = r.at;
  }
  co_await write(text.substr(from));
  text_.clear();
  refs_.clear();
  referenced_ = 0;
}

uring::task<void> reply::write(std::string_view bytes) {
  for (std::size_t at = 0; at < bytes.size(); at += write_piece) {
    std::string_view piece = bytes.substr(at, std::min(write_piece, bytes.size() - at));
    co_await uring::with_timeout(stream_->write_all(std::span(piece.data(), piece.size())), limits_->stall);
  }
}

}  // namespace kv
