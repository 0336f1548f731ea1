/// @file
/// uring/protocol/input_buffer.hpp — the bytes an incremental protocol parser owns.
///
/// Provides: uring::detail::input_buffer, the private base of the parsers (uring/http/parser.hpp,
/// uring/resp/parser.hpp): feed() / prepare()+commit() / buffered() for their users, and for the parser
/// itself the unread bytes, the bytes of the message last handed out, and closing after a refusal.
/// Threads: a plain value; one thread at a time.
///
/// The parsers hand out std::string_views into this buffer, so it only moves its bytes at two moments:
/// when bytes are added (feed/prepare may grow the storage or slide the unread bytes to the front). A
/// consumed prefix is not removed on every message: a buffer holding many pipelined requests would
/// otherwise be copied once per request; it slides once it is at least as large as what follows it.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace uring::detail {

class input_buffer {
 public:
  /// Adds bytes read from the connection (copied). Dropped once the parser has refused the input.
  /// Invalidates the views the parser handed out.
  void feed(std::string_view bytes) {
    if (closed_) return;
    commit(0);
    compact();
    data_.append(bytes);
  }

  /// Or read straight into the parser: room for `n` bytes, of which commit(k) keeps the first k <= n.
  /// Both invalidate the views the parser handed out.
  [[nodiscard]] std::span<char> prepare(std::size_t n) {
    commit(0);  // an earlier prepare() that was never committed gives its room back
    compact();
    std::size_t old = data_.size();
    data_.resize(old + n);
    prepared_ = n;
    return {data_.data() + old, n};
  }
  void commit(std::size_t n) noexcept {
    if (n > prepared_) n = prepared_;
    data_.resize(data_.size() - (prepared_ - n));
    prepared_ = 0;
    if (closed_) release_storage();
  }

  /// Bytes fed and not yet handed out as part of a message.
  [[nodiscard]] std::size_t buffered() const noexcept { return unread().size() - handed_out_; }

 protected:
  /// The bytes fed and not consumed, starting with those of the message last handed out (if any).
  [[nodiscard]] std::string_view unread() const noexcept {
    return std::string_view(data_).substr(begin_, data_.size() - begin_ - prepared_);
  }
  /// The first `n` unread bytes make the message just handed out: dropped by the next drop_handed_out().
  void hand_out(std::size_t n) noexcept { handed_out_ = n; }
  void drop_handed_out() noexcept {
    consume(handed_out_);
    handed_out_ = 0;
  }
  /// Drops the first `n` unread bytes (n <= unread().size()). Nothing moves: views stay valid.
  void consume(std::size_t n) noexcept {
    begin_ += n;
    if (begin_ == data_.size()) {
      data_.clear();
      begin_ = 0;
    }
  }
  /// Removes the unread bytes [at, at + n) (the parser moved them elsewhere); those after them slide down.
  void erase(std::size_t at, std::size_t n) noexcept { data_.erase(begin_ + at, n); }
  /// After a refusal: forgets everything, returns the storage, and drops what is fed from now on (the
  /// connection is closing; a peer that keeps sending must not make it grow).
  void close() noexcept {
    closed_ = true;
    release_storage();
  }
  [[nodiscard]] bool closed() const noexcept { return closed_; }

 private:
  /// Slides the unread bytes to the front once the consumed prefix is at least as large as them, so each
  /// byte is moved O(1) times on average.
  void compact() {
    if (begin_ == 0 || begin_ < data_.size() - begin_) return;
    std::memmove(data_.data(), data_.data() + begin_, data_.size() - begin_);
    data_.resize(data_.size() - begin_);
    begin_ = 0;
  }
  void release_storage() noexcept {
    std::string().swap(data_);
    begin_ = 0;
    prepared_ = 0;
    handed_out_ = 0;
  }

  std::string data_;
  std::size_t begin_ = 0;       ///< data_[0, begin_) was consumed
  std::size_t prepared_ = 0;    ///< data_'s last prepared_ bytes are handed out by prepare(), not committed
  std::size_t handed_out_ = 0;  ///< unread()'s first handed_out_ bytes belong to the message last returned
  bool closed_ = false;
};

}  // namespace uring::detail
