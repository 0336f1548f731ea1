// The HTTP/1.1 request parser (uring::http): request line, headers, bodies, keep-alive, pipelining, the
// limits and every refusal, any split of the input (down to one byte at a time) giving the same result,
// the corpus in corpus/http/, the response writer and path_is_safe.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <uring/http/parser.hpp>

#include "parser_feed.hpp"

namespace {

namespace http = uring::http;
using http::parse_status;

// A request copied out of the parser (its views die with the next call).
struct owned_request {
  std::string method, target;
  http::version version{};
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = false;
  bool operator==(const owned_request&) const = default;
};

struct outcome {
  std::vector<owned_request> requests;
  std::optional<int> status;  // set when the parser refused the input
  std::string reason;
  std::size_t left = 0;  // bytes buffered at the end, not part of a request
  bool operator==(const outcome&) const = default;
};

owned_request copy(const http::request& r) {
  owned_request o{std::string(r.method), std::string(r.target), r.version, {},
                  std::string(r.body),   r.keep_alive};
  for (const auto& h : r.headers) o.headers.emplace_back(h.name, h.value);
  return o;
}

// Drains the parser until it wants more bytes or refuses; true once it has refused.
bool drain(http::request_parser& p, outcome& out) {
  for (;;) {
    switch (p.next()) {
      case parse_status::need_more:
        return false;
      case parse_status::request:
        out.requests.push_back(copy(p.get()));
        break;
      case parse_status::error:
        out.status = p.error().status;
        out.reason = std::string(p.error().reason);
        return true;
    }
  }
}

using uring::test::all_at_once;

outcome parse(std::string_view input, std::size_t chunk = all_at_once, http::limits lim = {},
              bool direct = false) {
  return uring::test::parse_in_pieces<http::request_parser, outcome>(input, chunk, lim, direct);
}

void expect_split_invariant(std::string_view input, http::limits lim = {}) {
  uring::test::expect_split_invariant(input, [&](std::string_view in, std::size_t chunk, bool direct) {
    return parse(in, chunk, lim, direct);
  });
}

outcome expect_one_request(std::string_view input, http::limits lim = {}) {
  outcome o = parse(input, all_at_once, lim);
  EXPECT_FALSE(o.status) << o.reason << " for: " << input;
  EXPECT_EQ(o.requests.size(), 1u) << input;
  EXPECT_EQ(o.left, 0u);
  expect_split_invariant(input, lim);
  return o;
}

void expect_refused(std::string_view input, int status, std::string_view reason, http::limits lim = {}) {
  outcome o = parse(input, all_at_once, lim);
  EXPECT_EQ(o.status, status) << "input: " << input;
  EXPECT_EQ(o.reason, reason) << "input: " << input;
  EXPECT_EQ(o.left, 0u) << "a refusing parser keeps no bytes";
  expect_split_invariant(input, lim);
}

TEST(HttpParser, SimpleGet) {
  outcome o = expect_one_request("GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
  ASSERT_EQ(o.requests.size(), 1u);
  const auto& r = o.requests[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/index.html?q=1");
  EXPECT_EQ(r.version, http::version::http_1_1);
  EXPECT_EQ(r.headers,
            (std::vector<std::pair<std::string, std::string>>{{"Host", "example.com"}, {"Accept", "*/*"}}));
  EXPECT_EQ(r.body, "");
  EXPECT_TRUE(r.keep_alive);
}

TEST(HttpParser, HeaderLookupIsCaseInsensitiveAndValuesAreTrimmed) {
  http::request_parser p;
  p.feed("GET / HTTP/1.1\r\ncOnTeNt-TyPe:  \t text/html \t\r\nX-Empty:\r\nX-Twice: 1\r\nx-twice: 2\r\n\r\n");
  ASSERT_EQ(p.next(), parse_status::request);
  const auto& r = p.get();
  EXPECT_EQ(r.header("Content-Type"), "text/html");
  EXPECT_EQ(r.header("CONTENT-TYPE"), "text/html");
  EXPECT_EQ(r.header("x-empty"), "");
  EXPECT_EQ(r.header("X-TWICE"), "1") << "the first of repeated headers";
  EXPECT_EQ(r.header("Missing"), std::nullopt);
  EXPECT_EQ(r.headers.size(), 4u);
}

TEST(HttpParser, ViewsPointIntoTheParserUntilTheNextCall) {
  http::request_parser p;
  std::string input = "GET /a HTTP/1.1\r\n\r\n";
  p.feed(input);
  input.assign(input.size(), 'x');  // the parser copied what it was fed
  ASSERT_EQ(p.next(), parse_status::request);
  EXPECT_EQ(p.get().target, "/a");
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(HttpParser, BodyByContentLength) {
  outcome o = expect_one_request("POST /submit HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world");
  ASSERT_EQ(o.requests.size(), 1u);
  EXPECT_EQ(o.requests[0].body, "hello world");
  o = expect_one_request("POST /empty HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(o.requests.size(), 1u);
  EXPECT_EQ(o.requests[0].body, "");
  using namespace std::literals;
  o = expect_one_request("PUT /bin HTTP/1.1\r\nContent-Length: 4\r\n\r\n\r\n\0\xff"sv);
  EXPECT_EQ(o.requests.at(0).body, "\r\n\0\xff"sv) << "bodies are bytes";
}

TEST(HttpParser, BodyArrivingLaterWaits) {
  http::request_parser p;
  p.feed("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nhello");
  EXPECT_EQ(p.next(), parse_status::need_more);
  EXPECT_EQ(p.next(), parse_status::need_more) << "asking again changes nothing";
  p.feed(std::string(100, ' '));  // a large feed that may move the buffer under the parsed head
  p.feed("");
  ASSERT_EQ(p.next(), parse_status::request);
  EXPECT_EQ(p.get().method, "POST");
  EXPECT_EQ(p.get().header("content-length"), "10");
  EXPECT_EQ(p.get().body, "hello     ");
  EXPECT_EQ(p.buffered(), 95u) << "the bytes after the body stay for the next request";
}

TEST(HttpParser, PipelinedRequestsInOneBuffer) {
  std::string input =
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
      "GET /c HTTP/1.0\r\n\r\n"
      "GET /d HTTP/1.1\r\n";  // incomplete
  outcome o = parse(input);
  EXPECT_FALSE(o.status);
  ASSERT_EQ(o.requests.size(), 3u);
  EXPECT_EQ(o.requests[0].target, "/a");
  EXPECT_EQ(o.requests[1].target, "/b");
  EXPECT_EQ(o.requests[1].body, "hello");
  EXPECT_EQ(o.requests[2].target, "/c");
  EXPECT_FALSE(o.requests[2].keep_alive);
  EXPECT_EQ(o.left, std::string_view("GET /d HTTP/1.1\r\n").size());
  expect_split_invariant(input);
}

TEST(HttpParser, ManyPipelinedRequestsAreHandedOutInOrder) {
  std::string input;
  for (int i = 0; i < 1000; ++i) input += "GET /" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
  outcome o = parse(input);
  ASSERT_EQ(o.requests.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(o.requests[i].target, std::string("/").append(std::to_string(i)));
  EXPECT_EQ(parse(input, 1), o);
  EXPECT_EQ(parse(input, 4096), o);
}

TEST(HttpParser, KeepAliveRules) {
  struct row {
    const char* version;
    const char* connection;  // nullptr: no Connection header
    bool keep_alive;
  };
  for (const row& c :
       {row{"HTTP/1.1", nullptr, true}, row{"HTTP/1.1", "close", false}, row{"HTTP/1.1", "Close", false},
        row{"HTTP/1.1", "keep-alive", true}, row{"HTTP/1.1", "upgrade, close", false},
        row{"HTTP/1.0", nullptr, false}, row{"HTTP/1.0", "keep-alive", true},
        row{"HTTP/1.0", "Keep-Alive", true}, row{"HTTP/1.0", " foo ,keep-alive ", true},
        row{"HTTP/1.0", "keep-alive, close", false}, row{"HTTP/1.0", "close", false}}) {
    std::string input = std::string("GET / ") + c.version + "\r\n";
    if (c.connection) input += std::string("Connection: ") + c.connection + "\r\n";
    input += "\r\n";
    outcome o = expect_one_request(input);
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].keep_alive, c.keep_alive) << input;
    EXPECT_EQ(o.requests[0].version,
              std::string_view(c.version) == "HTTP/1.1" ? http::version::http_1_1 : http::version::http_1_0);
  }
  // Repeated Connection headers are all read.
  outcome o = expect_one_request("GET / HTTP/1.1\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(o.requests.at(0).keep_alive);
}

TEST(HttpParser, EmptyLinesBeforeTheRequestLineAreSkipped) {
  outcome o = expect_one_request("\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(o.requests.at(0).method, "GET");
  // After a body too (clients that add CRLF after a POST).
  o = parse("POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx\r\nGET /2 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(o.requests.size(), 2u);
  EXPECT_EQ(o.requests[1].target, "/2");
}

TEST(HttpParser, TokensAndTargetsAccepted) {
  outcome o = expect_one_request("M-SEARCH * HTTP/1.1\r\nX_y!#$%&'*+.^`|~9: v\r\n\r\n");
  EXPECT_EQ(o.requests.at(0).method, "M-SEARCH");
  EXPECT_EQ(o.requests.at(0).target, "*");
  o = expect_one_request("GET http://example.com/x?y=%20 HTTP/1.1\r\nX: caf\xc3\xa9 \"quoted\"\r\n\r\n");
  EXPECT_EQ(o.requests.at(0).headers.at(0).second, "caf\xc3\xa9 \"quoted\"");
}

TEST(HttpParser, MalformedRequestLineIs400) {
  expect_refused("G(T / HTTP/1.1\r\n\r\n", 400, "bad method");
  expect_refused(" / HTTP/1.1\r\n\r\n", 400, "bad method");
  expect_refused("GET\r\n\r\n", 400, "malformed request line");
  expect_refused("GET /\r\n\r\n", 400, "request line without HTTP version");
  expect_refused("GET  / HTTP/1.1\r\n\r\n", 400, "bad request target");
  expect_refused("GET /a\x7f HTTP/1.1\r\n\r\n", 400, "bad request target");
  expect_refused("GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n", 400, "bad request target");
  expect_refused("GET / HTTP/1.1 \r\n\r\n", 400, "bad HTTP version");
  expect_refused("GET / http/1.1\r\n\r\n", 400, "bad HTTP version");
  expect_refused("GET / HTTP/1\r\n\r\n", 400, "bad HTTP version");
  expect_refused("GET / HTTP/1.10\r\n\r\n", 400, "bad HTTP version");
  expect_refused("GET / x HTTP/1.1\r\n\r\n", 400, "bad HTTP version");
}

// A bad request line is refused when its CRLF arrives, not after a blank line that may never come (an
// HTTP/0.9 client sends "GET /\r\n" and waits).
TEST(HttpParser, BadRequestLineRefusedBeforeTheHeadEnds) {
  for (std::string_view line : {"GET /\r\n", "GET / HTTP/2.0\r\n", "GET / FOO\r\n", "G(T / HTTP/1.1\r\n"}) {
    http::request_parser p;
    p.feed(line);
    EXPECT_EQ(p.next(), parse_status::error) << line;
  }
  http::request_parser p;
  p.feed("GET / HTTP/1.1\r\n");
  EXPECT_EQ(p.next(), parse_status::need_more);
}

TEST(HttpParser, OtherHttpVersionsAre505) {
  expect_refused("GET / HTTP/2.0\r\n\r\n", 505, "HTTP version not supported");
  expect_refused("GET / HTTP/1.2\r\n\r\n", 505, "HTTP version not supported");
  expect_refused("GET / HTTP/0.9\r\n\r\n", 505, "HTTP version not supported");
}

TEST(HttpParser, LineEndingsMustBeCrlf) {
  expect_refused("GET / HTTP/1.1\nHost: x\n\n", 400, "line ends in LF without CR");
  expect_refused("GET / HTTP/1.1\r\nHost: x\n\r\n", 400, "line ends in LF without CR");
  expect_refused("\nGET / HTTP/1.1\r\n\r\n", 400, "line ends in LF without CR");
  expect_refused("GET / HTTP/1.1\rHost: x\r\n\r\n", 400, "CR not followed by LF");
  expect_refused("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "CR not followed by LF");
}

TEST(HttpParser, NulAndControlBytesAre400) {
  using namespace std::literals;
  expect_refused("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"sv, 400, "NUL byte in request head");
  expect_refused("GET /\0 HTTP/1.1\r\n\r\n"sv, 400, "NUL byte in request head");
  expect_refused("GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", 400, "control character in header value");
  expect_refused("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "control character in header value");
  expect_refused("GET / HTTP/1.1\r\nX\x01: a\r\n\r\n", 400, "bad header name");
}

TEST(HttpParser, BadHeaderSyntaxIs400) {
  expect_refused("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "bad header name");
  expect_refused("GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", 400, "bad header name");
  expect_refused("GET / HTTP/1.1\r\n: x\r\n\r\n", 400, "bad header name");
  expect_refused("GET / HTTP/1.1\r\nX(y): x\r\n\r\n", 400, "bad header name");
  expect_refused("GET / HTTP/1.1\r\nHost x\r\n\r\n", 400, "header line without colon");
  expect_refused("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "obsolete line folding");
  expect_refused("GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", 400, "obsolete line folding");
  expect_refused("GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400, "obsolete line folding");
}

TEST(HttpParser, ContentLengthRules) {
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400,
                 "duplicate Content-Length");
  expect_refused("POST / HTTP/1.1\r\ncontent-length: 3\r\nCONTENT-LENGTH: 4\r\n\r\nabcd", 400,
                 "duplicate Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 0x3\r\n\r\nabc", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 3 3\r\n\r\nabc", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400, "bad Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999999999\r\n\r\n", 413,
                 "request body too large");
  outcome o = expect_one_request("POST / HTTP/1.1\r\nContent-Length:  007 \r\n\r\n1234567");
  EXPECT_EQ(o.requests.at(0).body, "1234567") << "leading zeros and blanks around the value are fine";
}

TEST(HttpParser, TransferEncodingIs501) {
  expect_refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501,
                 "Transfer-Encoding not supported");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 5\r\ntransfer-encoding: gzip\r\n\r\nhello", 501,
                 "Transfer-Encoding not supported");
}

TEST(HttpParser, HostRules) {
  expect_refused("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400, "duplicate Host");
  http::limits strict;
  strict.require_host = true;
  expect_refused("GET / HTTP/1.1\r\n\r\n", 400, "missing Host", strict);
  expect_one_request("GET / HTTP/1.1\r\nHost: a\r\n\r\n", strict);
  expect_one_request("GET / HTTP/1.0\r\n\r\n", strict);  // HTTP/1.0 has no Host requirement
  expect_one_request("GET / HTTP/1.1\r\n\r\n");          // off by default
}

TEST(HttpParser, HeadLimitIs431) {
  http::limits lim;
  lim.max_head = 64;
  std::string head = "GET / HTTP/1.1\r\nX: ";
  head += std::string(64 - head.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(head.size(), 64u);
  expect_one_request(head, lim);
  head.insert(head.find("a"), "a");
  expect_refused(head, 431, "request head too large", lim);
  // Without any line end the parser gives up at the limit instead of buffering on.
  expect_refused(std::string(65, 'G'), 431, "request head too large", lim);
  // Skipped empty lines count too.
  std::string empty_lines;
  for (int i = 0; i < 40; ++i) empty_lines += "\r\n";
  expect_refused(empty_lines + "GET / HTTP/1.1\r\n\r\n", 431, "request head too large", lim);
}

TEST(HttpParser, MemoryStaysBoundedUnderAFlood) {
  http::request_parser p;  // default max_head 8 KiB
  std::string junk(4096, 'A');
  parse_status st = parse_status::need_more;
  std::size_t fed = 0;
  while (st == parse_status::need_more && fed < 1024 * 1024) {
    p.feed(junk);
    fed += junk.size();
    st = p.next();
  }
  EXPECT_EQ(st, parse_status::error);
  EXPECT_EQ(p.error().status, 431);
  EXPECT_LE(fed, 8u * 1024 + junk.size());
  p.feed(junk);
  EXPECT_EQ(p.buffered(), 0u) << "bytes fed after a refusal are dropped";
}

TEST(HttpParser, HeaderCountLimitIs431) {
  http::limits lim;
  lim.max_headers = 3;
  expect_one_request("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", lim);
  expect_refused("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431, "too many headers", lim);
}

TEST(HttpParser, BodyLimitIs413) {
  http::limits lim;
  lim.max_body = 10;
  outcome o = expect_one_request("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", lim);
  EXPECT_EQ(o.requests.at(0).body, "0123456789");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n0123456789a", 413, "request body too large",
                 lim);
}

TEST(HttpParser, ErrorsAreStickyAndEndThePipeline) {
  http::request_parser p;
  p.feed("GET /ok HTTP/1.1\r\n\r\nBAD\r\n\r\nGET /never HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.next(), parse_status::request);
  EXPECT_EQ(p.get().target, "/ok");
  ASSERT_EQ(p.next(), parse_status::error);
  EXPECT_EQ(p.error().status, 400);
  p.feed("GET /later HTTP/1.1\r\n\r\n");
  EXPECT_EQ(p.next(), parse_status::error);
  EXPECT_EQ(p.buffered(), 0u);
}

// Each file in corpus/http/ is named for what it must give: ok-* parses into requests without a refusal,
// NNN-* is refused with status NNN. Every split gives the same result.
TEST(HttpParser, Corpus) {
  int files = uring::test::for_each_corpus_file(
      URING_CORPUS_DIR, [](const std::string& name, const std::string& input) {
        outcome o = parse(input);
        if (name.starts_with("ok-")) {
          EXPECT_FALSE(o.status) << o.reason;
          EXPECT_FALSE(o.requests.empty());
          EXPECT_EQ(o.left, 0u);
        } else {
          ASSERT_TRUE(o.status) << "expected a refusal";
          EXPECT_EQ(*o.status, std::stoi(name.substr(0, 3))) << o.reason;
        }
        expect_split_invariant(input);
      });
  EXPECT_GE(files, 20);
}

TEST(HttpResponse, WritesStatusHeadersLengthAndConnection) {
  std::string out;
  const http::header headers[] = {{"Content-Type", "text/plain"}, {"X-Id", "7"}};
  http::append_response(out, 200, headers, "hi", true);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Id: 7\r\nContent-Length: 2\r\n"
            "Connection: keep-alive\r\n\r\nhi");
  out.clear();
  http::append_response_head(out, 404, {}, 1234, false);
  EXPECT_EQ(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 1234\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(http::reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(http::reason_phrase(299), "Unknown");
}

TEST(HttpResponse, RefusesHeaderInjection) {
  std::string out;
  auto write = [&](std::string_view name, std::string_view value) {
    const http::header h{name, value};
    http::append_response(out, 200, std::span(&h, 1), "", true);
  };
  EXPECT_THROW(write("X", "a\r\nSet-Cookie: evil"), std::invalid_argument);
  EXPECT_THROW(write("X", "a\nb"), std::invalid_argument);
  EXPECT_THROW(write("X", std::string_view("a\0b", 3)), std::invalid_argument);
  EXPECT_THROW(write("X Y", "a"), std::invalid_argument);
  EXPECT_THROW(write("", "a"), std::invalid_argument);
  EXPECT_THROW(write("content-length", "5"), std::invalid_argument);
  EXPECT_THROW(write("Connection", "close"), std::invalid_argument);
  EXPECT_THROW(http::append_response(out, 42, {}, "", true), std::invalid_argument);
  EXPECT_EQ(out, "") << "nothing written by a refused call";
}

TEST(HttpResponse, ErrorResponseClosesAndSaysWhy) {
  http::request_parser p;
  p.feed("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx");
  ASSERT_EQ(p.next(), parse_status::error);
  EXPECT_EQ(http::error_response(p.error()),
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 25\r\nConnection: "
            "close\r\n\r\n"
            "duplicate Content-Length\n");
}

TEST(HttpPath, TargetPathDropsQueryAndFragment) {
  EXPECT_EQ(http::target_path("/a/b?x=1#f"), "/a/b");
  EXPECT_EQ(http::target_path("/a#f?x"), "/a");
  EXPECT_EQ(http::target_path("/a"), "/a");
  EXPECT_EQ(http::target_path("?x"), "");
}

TEST(HttpPath, TargetPathOfAbsoluteForm) {
  EXPECT_EQ(http::target_path("http://host/file/x"), "/file/x");
  EXPECT_EQ(http::target_path("HTTPS://host:8080/a/b?x=1#f"), "/a/b");
  EXPECT_EQ(http::target_path("http://user@host/a"), "/a");
  EXPECT_EQ(http::target_path("http://host"), "/");
  EXPECT_EQ(http::target_path("http://host?x=/y"), "/");
  EXPECT_EQ(http::target_path("http://"), "/");
  // Other schemes and near misses stay as they are: no route matches them.
  EXPECT_EQ(http::target_path("ftp://host/a"), "ftp://host/a");
  EXPECT_EQ(http::target_path("http:/host/a"), "http:/host/a");
  EXPECT_EQ(http::target_path("/http://host/a"), "/http://host/a");
}

TEST(HttpPath, SafePaths) {
  for (std::string_view ok : {"/", "/file/a.txt", "/file/name-with.dots..txt", "/file/..a", "/file/a..",
                              "/file/.hidden", "/file/a%20b", "/file/%41", "/a/b/c", "/file/~user"}) {
    EXPECT_TRUE(http::path_is_safe(ok)) << ok;
  }
}

TEST(HttpPath, UnsafePaths) {
  using namespace std::literals;
  for (
      std::string_view bad :
      {""sv,           "file/a"sv,           "/.."sv,          "/file/.."sv,          "/file/../etc/passwd"sv,
       "/file/./a"sv,  "/file/."sv,          "//etc/passwd"sv, "/file//etc/passwd"sv, "/file/"sv,
       "/file/a\0b"sv, "/file/a\x01"sv,      "/file/a\x7f"sv,  "/file/caf\xc3\xa9"sv, "/file/..\\..\\x"sv,
       "/file/a\\b"sv, "/file/a?b"sv,        "/file/a#b"sv,    "/file/%2e%2e/x"sv,    "/file/%2E%2E"sv,
       "/file/.%2e"sv, "/file/%2fetc"sv,     "/file/a%2Fb"sv,  "/file/%5c"sv,         "/file/%00"sv,
       "/file/%0a"sv,  "/file/%252e%252e"sv, "/file/%"sv,      "/file/%4"sv,          "/file/%zz"sv,
       "/file/a%2"sv}) {
    EXPECT_FALSE(http::path_is_safe(bad)) << bad;
  }
}

}  // namespace
