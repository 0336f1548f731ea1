// The HTTP/1.1 response parser (uring::http::response_parser): status lines, headers, the body framings
// (Content-Length, chunked with extensions and trailers, until the close), bodies that HEAD, 1xx, 204 and
// 304 do not have, interim responses, keep-alive, several responses on one connection, the limits and
// every refusal, each case fed whole and in pieces down to one byte at a time, and a large body streamed
// through bounded memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <uring/http/response.hpp>

#include "parser_feed.hpp"

namespace {

namespace http = uring::http;
using http::body_kind;
using http::response_status;
using uring::test::all_at_once;

// A response copied out of the parser (its views die with the next call).
struct owned_response {
  http::version version{};
  int status = 0;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;
  body_kind framing = body_kind::none;
  std::optional<std::uint64_t> content_length;
  std::string body;
  bool keep_alive = false;
  std::size_t interim = 0;
  bool operator==(const owned_response&) const = default;
};

struct outcome {
  std::vector<owned_response> responses;  // complete ones
  std::optional<owned_response> partial;  // the head handed out last, while its body is still coming
  std::optional<std::string> error;
  std::size_t left = 0;  // bytes buffered at the end, not part of a response
  bool operator==(const outcome&) const = default;
};

struct options {
  std::vector<bool> heads{false};  // one response per entry: whether it answers a HEAD request
  bool finish = true;              // the connection ends after the input
  http::response_limits lim{};
};

// Drains the parser: each response into out, starting the next one (o.heads) after each; true once the
// parser has refused the input.
bool drain(http::response_parser& p, outcome& out, const options& o) {
  while (out.responses.size() < o.heads.size()) {
    switch (p.next()) {
      case response_status::need_more:
        return false;
      case response_status::head: {
        const http::response& r = p.get();
        owned_response c{r.version, r.status,     std::string(r.reason), {}, r.framing, r.content_length,
                         {},        r.keep_alive, p.interim_skipped()};
        for (const auto& h : r.headers) c.headers.emplace_back(h.name, h.value);
        out.partial = std::move(c);
        break;
      }
      case response_status::body:
        EXPECT_FALSE(p.body().empty());
        out.partial.value().body += p.body();
        break;
      case response_status::done:
        out.partial.value().keep_alive = p.get().keep_alive;
        out.responses.push_back(std::move(*out.partial));
        out.partial.reset();
        if (out.responses.size() < o.heads.size()) p.start(o.heads[out.responses.size()]);
        break;
      case response_status::error:
        EXPECT_EQ(p.error().status, 502);
        EXPECT_EQ(p.buffered(), 0u);
        out.error = std::string(p.error().reason);
        return true;
    }
  }
  return false;
}

outcome parse(std::string_view input, std::size_t chunk = all_at_once, const options& o = {},
              bool direct = false) {
  http::response_parser p(o.lim);
  p.start(o.heads.front());
  outcome out;
  bool refused = false;
  uring::test::feed_in_pieces(p, input, chunk, direct, [&](http::response_parser& q) {
    refused = drain(q, out, o);
    return refused;
  });
  if (o.finish && !refused) {
    p.finish();
    drain(p, out, o);
  }
  out.left = p.buffered();
  return out;
}

// The outcome of `input` fed whole, after checking that every split gives the same.
outcome parse_split(std::string_view input, const options& o = {}) {
  uring::test::expect_split_invariant(input, [&](std::string_view in, std::size_t chunk, bool direct) {
    return parse(in, chunk, o, direct);
  });
  return parse(input, all_at_once, o);
}

// One complete response, whatever the split.
owned_response expect_response(std::string_view input, const options& o = {}) {
  outcome out = parse_split(input, o);
  EXPECT_FALSE(out.error) << *out.error << " for: " << input;
  EXPECT_EQ(out.responses.size(), 1u) << input;
  return out.responses.empty() ? owned_response{} : out.responses.front();
}

void expect_refused(std::string_view input, std::string_view reason, const options& o = {}) {
  outcome out = parse_split(input, o);
  EXPECT_EQ(out.error.value_or("(accepted)"), reason) << "for: " << input;
  EXPECT_TRUE(out.responses.empty()) << input;
}

TEST(HttpResponse, ContentLengthBody) {
  owned_response r =
      expect_response("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(r.version, http::version::http_1_1);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.reason, "OK");
  EXPECT_EQ(r.framing, body_kind::length);
  EXPECT_EQ(r.content_length, 5u);
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>("Content-Type", "text/plain")));
}

TEST(HttpResponse, HeaderLookupIsCaseInsensitive) {
  http::response_parser p;
  p.feed("HTTP/1.1 404 Not Found\r\ncontent-LENGTH:  0 \r\nX-A: 1\r\n\r\n");
  ASSERT_EQ(p.next(), response_status::head);
  EXPECT_EQ(p.get().header("Content-Length"), "0");
  EXPECT_EQ(p.get().header("x-a"), "1");
  EXPECT_FALSE(p.get().header("x-b"));
  EXPECT_EQ(p.get().reason, "Not Found");
  EXPECT_EQ(p.next(), response_status::done);
  EXPECT_EQ(p.next(), response_status::done) << "done until start()";
}

TEST(HttpResponse, StatusLines) {
  EXPECT_EQ(expect_response("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").version, http::version::http_1_0);
  owned_response r = expect_response("HTTP/1.1 299\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.status, 299);
  EXPECT_EQ(r.reason, "") << "no reason at all";
  EXPECT_EQ(expect_response("HTTP/1.1 999 \r\nContent-Length: 0\r\n\r\n").reason, "");
  EXPECT_EQ(expect_response("HTTP/1.1 500 Very \tBad \xC3\xA9\r\nContent-Length: 0\r\n\r\n").reason,
            "Very \tBad \xC3\xA9");
  expect_refused("HTTP/1.1 20 OK\r\n\r\n", "bad status code");
  expect_refused("HTTP/1.1 2000 OK\r\n\r\n", "bad status code");
  expect_refused("HTTP/1.1 099 OK\r\n\r\n", "bad status code");
  expect_refused("HTTP/1.1 2x0 OK\r\n\r\n", "bad status code");
  expect_refused("HTTP/1.1  200 OK\r\n\r\n", "bad status code");
  expect_refused("HTTP/1.1 200 O\x01K\r\n\r\n", "control character in reason phrase");
  expect_refused("HTTP/2.0 200 OK\r\n\r\n", "HTTP version not supported");
  expect_refused("HTTP/1.2 200 OK\r\n\r\n", "HTTP version not supported");
  expect_refused("HTTP/1.1\r\n\r\n", "bad status line");
  expect_refused("HTTP/x.1 200 OK\r\n\r\n", "bad status line");
  expect_refused("http/1.1 200 OK\r\n\r\n", "bad status line");
  expect_refused("\r\nHTTP/1.1 200 OK\r\n\r\n", "bad status line");
  expect_refused("<html>hello</html>", "bad status line");
}

TEST(HttpResponse, BadInputIsRefusedAtItsFirstByte) {
  // Not HTTP at all: refused before a line end, and without waiting for more.
  for (std::string_view start : {"X", "HTTP/1.1 200 OK\r\r", "HTTP/1.1 200 OK\n"}) {
    options o;
    o.finish = false;
    EXPECT_TRUE(parse(start, all_at_once, o).error) << start;
  }
  // A bad status line is judged when it ends, before the headers.
  options o;
  o.finish = false;
  EXPECT_EQ(parse("HTTP/1.1 abc\r\nContent-Length: 1\r\n", all_at_once, o).error, "bad status code");
}

TEST(HttpResponse, LineEndingsAndBytesInTheHead) {
  expect_refused("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", "line ends in LF without CR");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", "line ends in LF without CR");
  expect_refused("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", "CR not followed by LF");
  // The literal's own length: sizeof counts its terminating NUL.
  static constexpr char with_nul[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
  expect_refused(std::string(with_nul, sizeof with_nul - 1), "NUL byte in response head");
  expect_refused("HTTP/1.1 200 OK\r\nX: a\x7F\r\n\r\n", "control character in header value");
  expect_refused("HTTP/1.1 200 OK\r\nX : a\r\n\r\n", "bad header name");
  expect_refused("HTTP/1.1 200 OK\r\n: a\r\n\r\n", "bad header name");
  expect_refused("HTTP/1.1 200 OK\r\nX a\r\n\r\n", "header line without colon");
  expect_refused("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "obsolete line folding");
}

TEST(HttpResponse, ContentLengthRules) {
  EXPECT_EQ(expect_response("HTTP/1.1 200 OK\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc").body,
            "abc");
  EXPECT_EQ(expect_response("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc").body, "abc");
  EXPECT_EQ(expect_response("HTTP/1.1 200 OK\r\nContent-Length: 003\r\n\r\nabc").body, "abc");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
                 "conflicting Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd", "conflicting Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", "bad Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", "bad Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 3 4\r\n\r\n", "bad Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", "bad Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n", "bad Content-Length");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999999\r\n\r\n",
                 "Content-Length too large");
  // Bytes after the body belong to whatever comes next on the connection: left buffered.
  outcome o = parse_split("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabHTTP");
  ASSERT_EQ(o.responses.size(), 1u);
  EXPECT_EQ(o.responses[0].body, "ab");
  EXPECT_EQ(o.left, 4u);
}

TEST(HttpResponse, ClosedBeforeTheBodyEnded) {
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                 "connection closed before the body ended");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                 "connection closed before the body ended");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",
                 "connection closed before the body ended");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n",
                 "connection closed before the body ended");
  expect_refused("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", "connection closed in the response head");
  expect_refused("", "connection closed before the response");
  // Without the end of the stream, a partial body only waits.
  options o;
  o.finish = false;
  outcome out = parse_split("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", o);
  EXPECT_FALSE(out.error);
  ASSERT_TRUE(out.partial);
  EXPECT_EQ(out.partial->body, "abc");
}

TEST(HttpResponse, ChunkedBody) {
  owned_response r = expect_response(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n"
      "1;name=value;other\r\n,\r\n"
      "0006 ; ext=\"quoted; string\"\r\n world\r\n"
      "A\r\n0123456789\r\n"
      "0\r\n\r\n");
  EXPECT_EQ(r.framing, body_kind::chunked);
  EXPECT_EQ(r.body, "hello, world0123456789");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.content_length);
  // Trailers are read (and dropped); the response ends after them.
  outcome o = parse_split(
      "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-More: "
      "2\r\n\r\nNEXT");
  ASSERT_EQ(o.responses.size(), 1u);
  EXPECT_EQ(o.responses[0].body, "abc");
  EXPECT_EQ(o.left, 4u);
}

TEST(HttpResponse, ChunkedRefusals) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_refused(head + "x\r\n", "bad chunk size");
  expect_refused(head + "\r\n", "bad chunk size");
  expect_refused(head + ";a\r\n", "bad chunk size");
  expect_refused(head + "5 x\r\nhello\r\n0\r\n\r\n", "bad chunk size");
  expect_refused(head + "-5\r\n", "bad chunk size");
  expect_refused(head + "5\nhello\r\n0\r\n\r\n", "line ends in LF without CR");
  expect_refused(head + "5;a\x01\r\nhello\r\n0\r\n\r\n", "control character in chunk extension");
  expect_refused(head + "5\r\nhelloX\r\n0\r\n\r\n", "chunk data not followed by CRLF");
  expect_refused(head + "5\r\nhello\rX", "chunk data not followed by CRLF");
  expect_refused(head + "10000000000000001\r\n", "chunk size too large");
  expect_refused(head + "FFFFFFFFFFFFFFFFFFFF\r\n", "chunk size too large");
  EXPECT_EQ(expect_response(head + "000000000000000000000000003\r\nabc\r\n0\r\n\r\n").body, "abc")
      << "leading zeros are not an overflow";
  expect_refused(head + "0\r\nX y\r\n\r\n", "malformed trailer field");
  expect_refused(head + "0\r\n x: y\r\n\r\n", "malformed trailer field");
  expect_refused(head + "0\r\nX: y\n\r\n", "line ends in LF without CR");
  // Codings other than a single chunked could not be decoded.
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                 "unsupported Transfer-Encoding");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                 "unsupported Transfer-Encoding");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                 "unsupported Transfer-Encoding");
  expect_refused("HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n", "unsupported Transfer-Encoding");
}

TEST(HttpResponse, ChunkLimits) {
  options o;
  o.lim.max_chunk_line = 16;
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_response(head + "1;abcdefghijkl\r\nx\r\n0\r\n\r\n", o);  // 16 bytes with its CRLF
  expect_refused(head + "1;abcdefghijklm\r\nx\r\n0\r\n\r\n", "chunk line too long", o);
  expect_refused(head + "1" + std::string(100, ' '), "chunk line too long", o);
  o.lim.max_trailers = 16;
  expect_response(head + "0\r\nX: 123456789\r\n\r\n", o);  // 16 bytes with both CRLFs
  expect_refused(head + "0\r\nX: 1234567890\r\n\r\n", "trailers too large", o);
  o.lim.max_trailers = 1024;
  o.lim.max_headers = 2;
  expect_response(head + "0\r\nA: 1\r\nB: 2\r\n\r\n", o);
  expect_refused(head + "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", "too many trailers", o);
}

TEST(HttpResponse, BodyUntilTheClose) {
  owned_response r = expect_response("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of\r\nthis");
  EXPECT_EQ(r.framing, body_kind::until_close);
  EXPECT_EQ(r.body, "all of\r\nthis");
  EXPECT_FALSE(r.keep_alive);
  r = expect_response("HTTP/1.1 200 OK\r\n\r\nx");
  EXPECT_EQ(r.body, "x");
  EXPECT_FALSE(r.keep_alive) << "a body delimited by the close ends the connection";
  EXPECT_EQ(expect_response("HTTP/1.1 200 OK\r\n\r\n").body, "");
  // Never done before the close.
  options o;
  o.finish = false;
  outcome out = parse_split("HTTP/1.0 200 OK\r\n\r\nabc", o);
  EXPECT_TRUE(out.responses.empty());
  ASSERT_TRUE(out.partial);
  EXPECT_EQ(out.partial->body, "abc");
}

TEST(HttpResponse, ResponsesWithoutABody) {
  for (std::string_view in : {"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                              "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
    outcome o = parse_split(std::string(in) + "NEXT");
    ASSERT_EQ(o.responses.size(), 1u) << in;
    EXPECT_EQ(o.responses[0].framing, body_kind::none);
    EXPECT_EQ(o.responses[0].body, "");
    EXPECT_TRUE(o.responses[0].keep_alive);
    EXPECT_EQ(o.left, 4u) << "the bytes after the head are not a body";
  }
  options head;
  head.heads = {true};
  outcome o = parse_split("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", head);
  ASSERT_EQ(o.responses.size(), 1u);
  EXPECT_EQ(o.responses[0].content_length, 1000u) << "as announced";
  EXPECT_EQ(o.responses[0].framing, body_kind::none);
  EXPECT_TRUE(o.responses[0].keep_alive);
  // Even a body delimited by the close does not exist for HEAD: done without waiting for the close.
  head.finish = false;
  o = parse_split("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", head);
  ASSERT_EQ(o.responses.size(), 1u);
  EXPECT_TRUE(o.responses[0].keep_alive);
}

TEST(HttpResponse, InterimResponsesAreSkipped) {
  owned_response r = expect_response(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
      "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.interim, 2u);
  EXPECT_EQ(r.body, "ok");
  ASSERT_EQ(r.headers.size(), 1u) << "the interim headers are not the final response's";
  expect_refused("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
                 "101 Switching Protocols not requested");
  options o;
  o.lim.max_interim = 2;
  std::string many;
  for (int i = 0; i < 3; ++i) many += "HTTP/1.1 100 Continue\r\n\r\n";
  expect_refused(many + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "too many interim responses", o);
  // Each interim response is checked like any head.
  expect_refused("HTTP/1.1 100 Continue\r\nX\r\n\r\n", "header line without colon");
}

TEST(HttpResponse, KeepAliveRules) {
  struct {
    const char* head;
    bool keep;
  } cases[] = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", true},
      {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false},
      // Both framings: chunked wins, and the connection is not trusted afterwards.
      {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
  };
  for (const auto& c : cases) EXPECT_EQ(expect_response(c.head).keep_alive, c.keep) << c.head;
}

TEST(HttpResponse, SeveralResponsesOnOneConnection) {
  options o;
  o.heads = {false, true, false, false};
  outcome out = parse_split(
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
      "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nbc\r\n0\r\n\r\n"
      "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n",
      o);
  EXPECT_FALSE(out.error);
  ASSERT_EQ(out.responses.size(), 4u);
  EXPECT_EQ(out.responses[0].body, "a");
  EXPECT_EQ(out.responses[1].body, "");
  EXPECT_EQ(out.responses[2].body, "bc");
  EXPECT_EQ(out.responses[3].status, 404);
  EXPECT_EQ(out.responses[3].body, "no\n");
  EXPECT_FALSE(out.responses[3].keep_alive);
  EXPECT_EQ(out.left, 0u);
}

TEST(HttpResponse, HeadLimits) {
  options o;
  o.lim.max_head = 64;
  std::string head = "HTTP/1.1 200 OK\r\nX: ";
  head += std::string(64 - head.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(head.size(), 64u);
  expect_response(head, o);
  head.insert(head.find('a'), "a");
  expect_refused(head, "response head too large", o);
  // An endless header: refused at the limit, not buffered on.
  o.finish = false;
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nX: " + std::string(100, 'a'), all_at_once, o).error,
            "response head too large");
  options many;
  many.lim.max_headers = 3;
  expect_response("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", many);
  expect_refused("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", "too many headers", many);
  // The defaults: 64 KiB of head, 100 headers.
  std::string hundred = "HTTP/1.1 204 No Content\r\n";
  for (int i = 0; i < 100; ++i) hundred += "H" + std::to_string(i) + ": v\r\n";
  expect_response(hundred + "\r\n");
  expect_refused(hundred + "H100: v\r\n\r\n", "too many headers");
  expect_refused("HTTP/1.1 200 OK\r\nX: " + std::string(64 * 1024, 'a') + "\r\n\r\n",
                 "response head too large");
}

TEST(HttpResponse, ErrorsAreSticky) {
  http::response_parser p;
  p.feed("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
  EXPECT_EQ(p.next(), response_status::error);
  EXPECT_EQ(p.error().reason, "bad Content-Length");
  p.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  p.start();
  EXPECT_EQ(p.next(), response_status::error);
  EXPECT_EQ(p.buffered(), 0u) << "input after a refusal is dropped";
}

// A 1 GiB body read 64 KiB at a time (through prepare/commit, as a client reads) never makes the parser
// hold more than one read: the pieces are handed out where they lie and dropped at the next call.
TEST(HttpResponse, LargeBodyStreamsInBoundedMemory) {
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "content-length");
    constexpr std::uint64_t total = std::uint64_t{1} << 30;
    constexpr std::size_t read_size = 64 * 1024;
    http::response_parser p;
    // What a server sends: framing bytes (the head, chunk-size lines, CRLFs, the last chunk) go out
    // first from `pending`, body bytes are generated; chunks are 1 MiB.
    std::string pending = chunked
                              ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              : "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n";
    constexpr std::uint64_t chunk_size = 1 << 20;
    std::uint64_t sent = 0, received = 0, in_chunk = 0;
    std::size_t most_buffered = 0, pieces = 0;
    bool head_seen = false, ended = false, done = false;
    auto produce = [&](std::span<char> room) {
      std::size_t n = 0;
      for (;;) {
        if (!pending.empty()) {
          const std::size_t k = std::min(pending.size(), room.size() - n);
          std::copy_n(pending.begin(), k, room.begin() + static_cast<std::ptrdiff_t>(n));
          pending.erase(0, k);
          n += k;
          if (!pending.empty()) break;
          continue;
        }
        if (sent == total) {
          if (!chunked || ended) break;
          pending = "\r\n0\r\n\r\n";
          ended = true;
          continue;
        }
        if (n == room.size()) break;
        if (chunked && in_chunk == 0) {
          pending = std::string(sent > 0 ? "\r\n" : "") + "100000\r\n";
          in_chunk = chunk_size;
          continue;
        }
        std::uint64_t take = std::min<std::uint64_t>(room.size() - n, total - sent);
        if (chunked) take = std::min(take, in_chunk);
        std::fill_n(room.begin() + static_cast<std::ptrdiff_t>(n), take, static_cast<char>('a' + sent % 26));
        n += take;
        sent += take;
        if (chunked) in_chunk -= take;
      }
      return n;
    };
    while (!done) {
      auto room = p.prepare(read_size);
      p.commit(produce(room));
      most_buffered = std::max(most_buffered, p.buffered());
      for (bool more = true; more && !done;) {
        switch (p.next()) {
          case response_status::need_more:
            more = false;
            break;
          case response_status::head:
            head_seen = true;
            break;
          case response_status::body:
            received += p.body().size();
            ++pieces;
            break;
          case response_status::done:
            done = true;
            break;
          case response_status::error:
            FAIL() << p.error().reason;
        }
      }
    }
    EXPECT_TRUE(head_seen);
    EXPECT_EQ(received, total);
    EXPECT_GE(pieces, total / read_size);
    // One read, and at most the start of a chunk-size line or CRLF that the read before ended in.
    EXPECT_LE(most_buffered, read_size + 16) << "the parser holds about one read at most";
  }
}

}  // namespace
