// libFuzzer target for uring::resp::command_parser (see fuzz/README.md).
//
// The first input byte picks a piece size (1..255, from the byte) and a few limits; the rest is fed in
// pieces of that size, draining next() after each, alternately through feed() and prepare()/commit().
// Checked besides the sanitizers: every split gives the same commands (or the same refusal) as feeding
// the input at once; a command is never empty and stays within the limits; a long argument is taken
// once (take()); a refusal is a
// "-ERR Protocol error: ...\r\n" line and leaves nothing buffered; re-encoding a command with
// append_bulk_array and parsing that gives the command back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uring/resp/parser.hpp>

#include "feed_in_pieces.hpp"

namespace {

namespace resp = uring::resp;
using command = std::vector<std::string>;

void check(bool ok) {
  if (!ok) std::abort();
}

std::vector<command> run(std::string_view input, std::size_t piece, const resp::limits& lim, bool direct) {
  resp::command_parser p(lim);
  std::vector<command> out;
  uring::test::feed_in_pieces(p, input, piece, direct, [&](resp::command_parser&) {
    for (;;) {
      auto st = p.next();
      if (st == resp::parse_status::need_more) break;
      if (st == resp::parse_status::error) {
        std::string_view e = p.error();
        check(e.starts_with("-ERR Protocol error: ") && e.ends_with("\r\n"));
        check(e.find_first_of("\r\n") == e.size() - 2);
        check(p.buffered() == 0);
        out.push_back({std::string(e)});
        return true;
      }
      check(!p.args().empty() && p.args().size() <= lim.max_args);
      for (auto a : p.args()) check(a.size() <= std::max(lim.max_bulk, lim.max_inline));
      out.emplace_back(p.args().begin(), p.args().end());
      // A long argument has a string of its own, handed over whole, once.
      for (std::size_t i = 0; i < p.args().size(); ++i) {
        std::string_view a = p.args()[i];
        std::optional<std::string> own = p.take(a);
        if (!own) continue;
        check(a.size() >= lim.own_bulk && own->data() == a.data() && *own == out.back()[i]);
        check(!p.take(a));
      }
    }
    return false;
  });
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::uint8_t knob = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  resp::limits lim;
  if (knob & 0x80) {  // small limits, so the fuzzer reaches them
    lim.max_args = 4;
    lim.max_bulk = 16;
    lim.max_inline = 32;
    lim.max_command = 64 + (knob & 0x3F);
    lim.own_bulk = 1 + (knob & 0x0F);  // and the strings of their own that long bulk strings get
  }
  std::size_t piece = 1 + (knob & 0x7F) * 2;
  auto whole = run(input, input.size() + 1, lim, false);
  check(run(input, piece, lim, knob & 1) == whole);

  // A command re-encoded as a multibulk array parses back to itself (default limits: it was accepted
  // under limits at least as tight, except max_inline words may exceed a small max_bulk; skip those).
  for (const auto& cmd : whole) {
    if (cmd.size() == 1 && cmd[0].starts_with("-ERR")) break;
    std::vector<std::string_view> items(cmd.begin(), cmd.end());
    std::string encoded;
    resp::append_bulk_array(encoded, items);
    resp::command_parser back;
    back.feed(encoded);
    check(back.next() == resp::parse_status::command);
    check(std::vector<std::string>(back.args().begin(), back.args().end()) == cmd);
    check(back.next() == resp::parse_status::need_more && back.buffered() == 0);
  }
  return 0;
}
