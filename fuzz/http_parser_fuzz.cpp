// libFuzzer target for uring::http::request_parser (see fuzz/README.md).
//
// The first input byte picks a piece size (1..255, from the byte) and a few limits; the rest is fed in
// pieces of that size, draining next() after each, alternately through feed() and prepare()/commit().
// Checked besides the sanitizers: every split gives the same requests (or the same refusal) as feeding
// the input at once; every view of a request lies inside the parser's buffer bytes; a refusal carries a
// 4xx/5xx status and a reason, and leaves nothing buffered; buffered() never exceeds what was fed.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <uring/http/parser.hpp>

#include "feed_in_pieces.hpp"

namespace {

namespace http = uring::http;

void check(bool ok) {
  if (!ok) std::abort();
}

// What a parse produced, flattened for comparison.
std::vector<std::string> run(std::string_view input, std::size_t piece, const http::limits& lim,
                             bool direct) {
  http::request_parser p(lim);
  std::vector<std::string> out;
  uring::test::feed_in_pieces(p, input, piece, direct, [&](http::request_parser&) {
    for (;;) {
      auto st = p.next();
      if (st == http::parse_status::need_more) break;
      if (st == http::parse_status::error) {
        check(p.error().status >= 400 && p.error().status < 600 && !p.error().reason.empty());
        check(p.buffered() == 0);
        out.push_back("error " + std::to_string(p.error().status) + " " + std::string(p.error().reason));
        return true;
      }
      const http::request& r = p.get();
      std::string flat = std::string(r.method) + ' ' + std::string(r.target) + ' ' +
                         std::to_string(static_cast<int>(r.version)) + (r.keep_alive ? " ka" : " close");
      for (const auto& h : r.headers) flat += '\n' + std::string(h.name) + ':' + std::string(h.value);
      flat += "\n\n" + std::string(r.body);
      check(!r.method.empty() && !r.target.empty());
      check(r.headers.size() <= lim.max_headers && r.body.size() <= lim.max_body);
      out.push_back(std::move(flat));
    }
    check(p.buffered() <= input.size());
    return false;
  });
  return out;
}

// path_is_safe on any bytes: no out-of-bounds read, and what it accepts has none of the escapes its rules
// refuse, checked here by plain substring search.
void check_path(std::string_view path) {
  if (!http::path_is_safe(path)) return;
  if (path == "/") return;
  std::string lower(path);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string ended = lower + "/";
  check(lower.front() == '/' && lower.back() != '/');
  for (std::string_view bad : {"//", "/./", "/../", "\\", "%2e", "%2f", "%5c", "%25", "%00", "?", "#"}) {
    check(ended.find(bad) == std::string::npos);
  }
  for (unsigned char c : lower) check(c >= 0x20 && c < 0x7F);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint8_t knob = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  http::limits lim;
  if (knob & 0x80) {  // small limits, so the fuzzer reaches them
    lim.max_head = 64 + (knob & 0x3F);
    lim.max_headers = 4;
    lim.max_body = 32;
    lim.require_host = knob & 0x40;
  }
  std::size_t piece = 1 + (knob & 0x7F) * 2;
  auto whole = run(input, input.size() + 1, lim, false);
  check(run(input, piece, lim, knob & 1) == whole);

  check_path(input);
  check_path(http::target_path(input));
  return 0;
}
