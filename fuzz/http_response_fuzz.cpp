// libFuzzer target for uring::http::response_parser (see fuzz/README.md).
//
// The first input byte picks a piece size (1..127 pieces of up to 255 bytes), feed() or prepare()/commit(),
// whether the first response answers a HEAD request, and (top bit) small limits; the rest is fed in pieces
// of that size, draining next() after each and starting the next response after each one done (up to 8),
// then the end of the stream is reported with finish(). Checked besides the sanitizers: every split gives
// the same heads, bodies, ends and refusal as feeding the input at once; a body piece is never empty and
// lies inside the parser's buffer; a Content-Length body delivers exactly that many bytes, a response
// without a body none; a refusal is a 502 with a reason and leaves nothing buffered; headers stay within
// the limit; buffered() never exceeds what was fed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <uring/http/response.hpp>

#include "feed_in_pieces.hpp"

namespace {

namespace http = uring::http;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::size_t max_responses = 8;

// What a parse produced, flattened for comparison.
std::vector<std::string> run(std::string_view input, std::size_t piece, const http::response_limits& lim,
                             bool head_request, bool direct) {
  http::response_parser p(lim);
  p.start(head_request);
  std::vector<std::string> out;
  std::size_t responses = 0;
  std::uint64_t body_bytes = 0;
  bool refused = false;
  auto drain = [&](http::response_parser&) {
    while (responses < max_responses) {
      switch (p.next()) {
        case http::response_status::need_more:
          check(p.buffered() <= input.size());
          return false;
        case http::response_status::head: {
          const http::response& r = p.get();
          check(r.status >= 200 && r.status <= 999 && r.headers.size() <= lim.max_headers);
          std::string flat = "head " + std::to_string(r.status) + ' ' + std::string(r.reason) + ' ' +
                             std::to_string(static_cast<int>(r.framing)) + (r.keep_alive ? " ka" : " close");
          for (const auto& h : r.headers) flat += '\n' + std::string(h.name) + ':' + std::string(h.value);
          out.push_back(std::move(flat));
          out.emplace_back();  // the body, gathered here
          body_bytes = 0;
          break;
        }
        case http::response_status::body:
          check(!p.body().empty() && p.body().size() <= input.size());
          check(p.get().framing != http::body_kind::none);
          out.back() += p.body();
          body_bytes += p.body().size();
          break;
        case http::response_status::done:
          if (p.get().framing == http::body_kind::length) check(body_bytes == p.get().content_length.value());
          if (p.get().framing == http::body_kind::none) check(body_bytes == 0);
          out.push_back(p.get().keep_alive ? "done ka" : "done close");
          // The next response on the connection alternates GET and HEAD.
          p.start(++responses % 2 == 1);
          break;
        case http::response_status::error:
          check(p.error().status == 502 && !p.error().reason.empty());
          check(p.buffered() == 0);
          out.push_back("error " + std::string(p.error().reason));
          refused = true;
          return true;
      }
    }
    return false;
  };
  uring::test::feed_in_pieces(p, input, piece, direct, drain);
  if (!refused) {
    p.finish();
    drain(p);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint8_t knob = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  http::response_limits lim;
  if (knob & 0x80) {  // small limits, so the fuzzer reaches them
    lim.max_head = 64 + (knob & 0x3F);
    lim.max_headers = 4;
    lim.max_chunk_line = 12;
    lim.max_trailers = 24;
    lim.max_interim = 2;
  }
  const bool head_request = knob & 0x40;
  std::size_t piece = 1 + (knob & 0x3F) * 4;
  auto whole = run(input, input.size() + 1, lim, head_request, false);
  check(run(input, piece, lim, head_request, knob & 1) == whole);
  check(run(input, 1, lim, head_request, !(knob & 1)) == whole);
  return 0;
}
