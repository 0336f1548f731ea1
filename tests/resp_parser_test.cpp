// The RESP2 command parser (uring::resp): multibulk and inline commands, pipelining, the limits and every
// refusal, any split of the input (down to one byte at a time) giving the same result, the corpus in
// corpus/resp/, and the reply encoders.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <uring/resp/parser.hpp>

#include "parser_feed.hpp"

namespace {

namespace resp = uring::resp;
using resp::parse_status;
using namespace std::literals;
using command = std::vector<std::string>;

struct outcome {
  std::vector<command> commands;
  std::string error;     // the error reply, empty without a refusal
  std::size_t left = 0;  // bytes buffered at the end, not part of a command
  bool operator==(const outcome&) const = default;
};

using uring::test::all_at_once;

// Drains the parser until it wants more bytes or refuses; true once it has refused.
bool drain(resp::command_parser& p, outcome& out) {
  for (;;) {
    switch (p.next()) {
      case parse_status::need_more:
        return false;
      case parse_status::command:
        EXPECT_FALSE(p.args().empty()) << "a command always has a name";
        out.commands.emplace_back(p.args().begin(), p.args().end());
        break;
      case parse_status::error:
        out.error = std::string(p.error());
        return true;
    }
  }
}

outcome parse(std::string_view input, std::size_t chunk = all_at_once, resp::limits lim = {},
              bool direct = false) {
  return uring::test::parse_in_pieces<resp::command_parser, outcome>(input, chunk, lim, direct);
}

void expect_split_invariant(std::string_view input, resp::limits lim = {}) {
  uring::test::expect_split_invariant(input, [&](std::string_view in, std::size_t chunk, bool direct) {
    return parse(in, chunk, lim, direct);
  });
}

void expect_commands(std::string_view input, const std::vector<command>& expected, resp::limits lim = {}) {
  outcome o = parse(input, all_at_once, lim);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, expected) << input;
  EXPECT_EQ(o.left, 0u);
  expect_split_invariant(input, lim);
}

void expect_refused(std::string_view input, std::string_view why, resp::limits lim = {}) {
  outcome o = parse(input, all_at_once, lim);
  EXPECT_EQ(o.error, "-ERR Protocol error: " + std::string(why) + "\r\n") << input;
  EXPECT_EQ(o.left, 0u) << "a refusing parser keeps no bytes";
  expect_split_invariant(input, lim);
}

TEST(RespParser, Multibulk) {
  expect_commands("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n", {{"GET", "key"}});
  expect_commands("*1\r\n$4\r\nPING\r\n", {{"PING"}});
  expect_commands("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", {{"SET", "k", ""}});
}

TEST(RespParser, BulkStringsAreBinarySafe) {
  expect_commands("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\r\n\0\xff*\r\n"sv, {{"SET", "k", "a\r\n\0\xff*"s}});
}

TEST(RespParser, Inline) {
  expect_commands("PING\r\n", {{"PING"}});
  expect_commands("PING\n", {{"PING"}});
  expect_commands("  SET\tkey   value  \r\n", {{"SET", "key", "value"}});
  expect_commands("SET k \"a b\"\r\n", {{"SET", "k", "\"a", "b\""}});  // quotes are not interpreted
}

TEST(RespParser, EmptyCommandsAreSkipped) {
  expect_commands("*0\r\n*-1\r\n\r\n\n   \r\nPING\r\n", {{"PING"}});
  outcome o = parse("*0\r\n\r\n");
  EXPECT_TRUE(o.commands.empty());
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.left, 0u);
}

TEST(RespParser, Pipelined) {
  std::string input =
      "*1\r\n$4\r\nPING\r\n"
      "PING\r\n"
      "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n"
      "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n"
      "*2\r\n$3\r\nGET\r\n$1";  // incomplete
  outcome o = parse(input);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, (std::vector<command>{{"PING"}, {"PING"}, {"ECHO", "hello"}, {"SET", "a", "b"}}));
  EXPECT_EQ(o.left, std::string_view("*2\r\n$3\r\nGET\r\n$1").size());
  expect_split_invariant(input);
}

TEST(RespParser, ManyPipelinedCommandsInOrder) {
  std::string input;
  std::vector<command> expected;
  for (int i = 0; i < 1000; ++i) {
    std::string key = "key" + std::to_string(i);
    input += "*2\r\n$3\r\nGET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n";
    expected.push_back({"GET", key});
  }
  EXPECT_EQ(parse(input).commands, expected);
  EXPECT_EQ(parse(input, 1).commands, expected);
  EXPECT_EQ(parse(input, 4096).commands, expected);
}

TEST(RespParser, ArgsPointIntoTheParserUntilTheNextCall) {
  resp::command_parser p;
  std::string input = "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n";
  p.feed(input);
  input.assign(input.size(), 'x');  // the parser copied what it was fed
  ASSERT_EQ(p.next(), parse_status::command);
  ASSERT_EQ(p.args().size(), 1u);
  EXPECT_EQ(p.args()[0], "PING");
  EXPECT_EQ(p.buffered(), 14u);
  ASSERT_EQ(p.next(), parse_status::command);
  EXPECT_EQ(p.args()[0], "QUIT");
  EXPECT_EQ(p.next(), parse_status::need_more);
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(RespParser, MalformedMultibulk) {
  expect_refused("*x\r\n", "invalid multibulk length");
  expect_refused("*\r\n", "invalid multibulk length");
  expect_refused("*1x\r\n", "invalid multibulk length");
  expect_refused("*+1\r\n", "invalid multibulk length");
  expect_refused("*1\r\n+GET\r\n", "expected '$', got '+'");
  expect_refused("*2\r\n$3\r\nGET\r\n:1\r\n", "expected '$', got ':'");
  // A byte that would break the error line is written as \xHH (found by resp_parser_fuzz).
  expect_refused("*2\r\n\n$1\r\na\r\n", "expected '$', got '\\x0a'");
  expect_refused("*1\r\n\xff", "expected '$', got '\\xff'");
  expect_refused("*1\r\n$abc\r\n", "invalid bulk length");
  expect_refused("*1\r\n$\r\n", "invalid bulk length");
  expect_refused("*1\r\n$-1\r\n", "invalid bulk length");
  expect_refused("*1\r\n$3\r\nGETXX", "expected CRLF after bulk string");
  expect_refused("*1\r\n$3\r\nGET\n\r", "expected CRLF after bulk string");
  // (string(...).append: g++ 12 warns falsely, -Wrestrict, about "literal" + std::string.)
  expect_refused(std::string("*").append(40, '1').append("\r\n"), "too big mbulk count string");
  expect_refused(std::string("*1\r\n$").append(40, '1').append("\r\n"), "too big bulk count string");
  expect_refused("*1\n$4\r\nPING\r\n", "invalid multibulk length");
}

// A line ending that cannot become CRLF is refused as soon as it arrives, not after the next bytes (which a
// client may never send): the connection gets its error instead of waiting.
TEST(RespParser, BareLineFeedRefusedAtOnce) {
  for (std::string_view in : {"*1\n"sv, "*1\n$4\nPING\n"sv, "*1\rx"sv}) {
    outcome o = parse(in);
    EXPECT_EQ(o.error, "-ERR Protocol error: invalid multibulk length\r\n") << in;
  }
  for (std::string_view in : {"*1\r\n$4\nPING\n"sv, "*1\r\n$4\rPING"sv}) {
    EXPECT_EQ(parse(in).error, "-ERR Protocol error: invalid bulk length\r\n") << in;
  }
  for (std::string_view in : {"*1\r\n$4\r\nPING\n"sv, "*1\r\n$4\r\nPINGx"sv, "*1\r\n$4\r\nPING\rx"sv}) {
    EXPECT_EQ(parse(in).error, "-ERR Protocol error: expected CRLF after bulk string\r\n") << in;
  }
  expect_refused("*1\n$4\nPING\n", "invalid multibulk length");
  expect_refused("*1\r\n$4\nPING\n", "invalid bulk length");
  expect_refused("*1\r\n$4\r\nPING\n", "expected CRLF after bulk string");
}

TEST(RespParser, Limits) {
  resp::limits lim;
  lim.max_args = 3;
  lim.max_bulk = 5;
  lim.max_inline = 10;
  lim.max_command = 64;
  expect_commands("*3\r\n$1\r\na\r\n$1\r\nb\r\n$5\r\nccccc\r\n", {{"a", "b", "ccccc"}}, lim);
  expect_refused("*4\r\n", "invalid multibulk length", lim);
  expect_refused("*1\r\n$6\r\n", "invalid bulk length", lim);
  expect_refused("*1\r\n$99999999999999999999\r\n", "invalid bulk length", lim);
  expect_commands("a b c d e\r\n", {{"a", "b", "c", "d", "e"}}, resp::limits{});
  expect_refused("a b c d\r\n", "too big inline request", lim);
  // max_inline counts the bytes before the '\n', a '\r' among them.
  expect_commands("0123456789\n", {{"0123456789"}}, lim);
  expect_commands("012345678\r\n", {{"012345678"}}, lim);
  expect_refused("0123456789\r\n", "too big inline request", lim);
  expect_refused("0123456789a", "too big inline request", lim);  // refused before the line ends
  lim.max_bulk = 100;
  expect_refused("*1\r\n$60\r\n", "command too large", lim);  // refused before the bytes arrive
}

// Bulk strings of limits.own_bulk bytes or more get a string of their own: the same commands and refusals
// come out whatever the split, by feed() or prepare()/commit().
TEST(RespParser, LargeBulkStringsParseAsTheRest) {
  resp::limits lim;
  lim.own_bulk = 4;
  expect_commands("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n*1\r\n$4\r\nPING\r\n",
                  {{"SET", "k", "0123456789"}, {"PING"}}, lim);
  // Two large ones, one at the threshold, one just under it, and an empty one.
  expect_commands("*4\r\n$4\r\nMSET\r\n$3\r\nabc\r\n$6\r\nv\r\n\r\nx\r\n$0\r\n\r\n",
                  {{"MSET", "abc", "v\r\n\r\nx", ""}}, lim);
  expect_refused("*2\r\n$3\r\nSET\r\n$5\r\nabcdeXY", "expected CRLF after bulk string", lim);
  expect_refused("*2\r\n$3\r\nSET\r\n$5\r\nabcde\rX", "expected CRLF after bulk string", lim);
  // max_command counts a large string's bytes though they left the buffer.
  lim.max_command = 30;
  expect_commands("*2\r\n$8\r\n01234567\r\n$1\r\nx\r\n", {{"01234567", "x"}}, lim);
  expect_refused("*2\r\n$10\r\n0123456789\r\n$10\r\n", "command too large", lim);
}

TEST(RespParser, TakeHandsOverALargeArgumentWithoutACopy) {
  resp::limits lim;
  lim.own_bulk = 1024;
  resp::command_parser p(lim);
  const std::string value(100 * 1024, 'v');
  std::string input =
      "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + std::to_string(value.size()) + "\r\n" + value + "\r\n";
  for (std::size_t at = 0; at < input.size(); at += 4096) p.feed(std::string_view(input).substr(at, 4096));
  ASSERT_EQ(p.next(), parse_status::command);
  ASSERT_EQ(p.args().size(), 3u);
  const std::string_view arg = p.args()[2];
  EXPECT_FALSE(p.take(p.args()[1]).has_value()) << "a short argument stays in the buffer";
  std::optional<std::string> owned = p.take(arg);
  ASSERT_TRUE(owned.has_value());
  EXPECT_EQ(owned->data(), arg.data()) << "the same bytes, not a copy";
  EXPECT_EQ(*owned, value);
  EXPECT_FALSE(p.take(arg).has_value()) << "taken once";
  EXPECT_EQ(p.buffered(), 0u);
  EXPECT_EQ(p.next(), parse_status::need_more);
  EXPECT_EQ(*owned, value) << "the taken string outlives the command";
}

// A large value in progress counts as buffered: a server that reads on while buffered() > 0 does not drop
// a command half read.
TEST(RespParser, ALargeValueInProgressCountsAsBuffered) {
  resp::command_parser p;  // own_bulk 32 KiB
  const std::string_view head = "*2\r\n$3\r\nSET\r\n$1048576\r\n";
  p.feed(head);
  EXPECT_EQ(p.next(), parse_status::need_more);
  const std::string piece(16 * 1024, 'x');
  std::size_t fed = 0;
  while (fed < 1024 * 1024) {
    p.feed(piece);
    fed += piece.size();
    EXPECT_EQ(p.next(), parse_status::need_more);
    EXPECT_EQ(p.buffered(), head.size() + fed) << "the header's bytes and the value's so far";
  }
  p.feed("\r\n");
  ASSERT_EQ(p.next(), parse_status::command);
  EXPECT_EQ(p.args()[1].size(), 1024u * 1024);
}

TEST(RespParser, MemoryStaysBoundedUnderAFlood) {
  resp::command_parser p;  // max_inline 64 KiB
  std::string junk(4096, 'A');
  parse_status st = parse_status::need_more;
  std::size_t fed = 0;
  while (st == parse_status::need_more && fed < 4 * 1024 * 1024) {
    p.feed(junk);
    fed += junk.size();
    st = p.next();
  }
  EXPECT_EQ(st, parse_status::error);
  EXPECT_EQ(p.error(), "-ERR Protocol error: too big inline request\r\n");
  EXPECT_LE(fed, 64u * 1024 + junk.size());
  p.feed(junk);
  EXPECT_EQ(p.buffered(), 0u) << "bytes fed after a refusal are dropped";
  EXPECT_EQ(p.next(), parse_status::error) << "sticky";
}

// Each file in corpus/resp/ is named for what it must give: ok-* parses into commands without a refusal,
// err-* is refused with a protocol error. Every split gives the same result.
TEST(RespParser, Corpus) {
  int files = uring::test::for_each_corpus_file(
      URING_CORPUS_DIR, [](const std::string& name, const std::string& input) {
        outcome o = parse(input);
        if (name.starts_with("ok-")) {
          EXPECT_EQ(o.error, "");
          EXPECT_FALSE(o.commands.empty());
          EXPECT_EQ(o.left, 0u);
        } else {
          EXPECT_TRUE(o.error.starts_with("-ERR Protocol error: ")) << o.error;
        }
        expect_split_invariant(input);
      });
  EXPECT_GE(files, 10);
}

TEST(RespReply, Encoders) {
  std::string out;
  resp::append_simple_string(out, "OK");
  resp::append_error(out, "ERR unknown command 'x\r\ny'");
  resp::append_integer(out, 42);
  resp::append_integer(out, -7);
  resp::append_integer(out, std::numeric_limits<std::int64_t>::min());
  resp::append_bulk_string(out, "a\r\n\0b"sv);
  resp::append_bulk_string(out, "");
  resp::append_null_bulk(out);
  resp::append_array_header(out, 2);
  resp::append_null_array(out);
  resp::append_simple_string(out, "two\nlines");
  EXPECT_EQ(out,
            "+OK\r\n"
            "-ERR unknown command 'x  y'\r\n"
            ":42\r\n:-7\r\n:-9223372036854775808\r\n"
            "$5\r\na\r\n\0b\r\n"
            "$0\r\n\r\n"
            "$-1\r\n*2\r\n*-1\r\n"
            "+two lines\r\n"sv);
}

TEST(RespReply, BulkArrayIsACommandTheParserReadsBack) {
  std::string out;
  const std::string_view items[] = {"SET", "key", "bin\r\n\0"sv};
  resp::append_bulk_array(out, items);
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$6\r\nbin\r\n\0\r\n"sv);
  expect_commands(out, {{"SET", "key", "bin\r\n\0"s}});
}

}  // namespace
