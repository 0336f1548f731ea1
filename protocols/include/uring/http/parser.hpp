/// @file
/// uring/http/parser.hpp — an incremental, defensive HTTP/1.1 request parser and a small response writer.
///
/// Provides: uring::http::request_parser (bytes in, complete requests out), request, header, limits,
/// parse_error, parse_status; append_response / append_response_head / error_response / reason_phrase;
/// path_is_safe and target_path for serving files by name. Library target uring::http (no I/O, no
/// executor: a server feeds it what it reads).
/// Threads: plain values; a parser is used by one thread at a time (one parser per connection).
///
/// Use:
///   uring::http::request_parser p;                 // one per connection
///   p.feed(bytes_just_read);                       // any split, down to one byte at a time
///   for (;;) {
///     auto st = p.next();
///     if (st == parse_status::need_more) break;    // read more, feed again
///     if (st == parse_status::error) { send(error_response(p.error())); close(); break; }
///     handle(p.get());                             // a complete request; several may be buffered
///   }
///
/// Lifetimes: every std::string_view in a request (method, target, header names and values, body) points
/// into the parser's own buffer and stays valid until the next call to feed(), prepare(), commit() or
/// next() on that parser (or its destruction). Copy what must live longer.
///
/// Rules (RFC 9112, on the strict side; every refusal is sticky: after parse_status::error the connection
/// must be closed, the parser answers error from then on):
///  - Request line: method SP target SP version CRLF. method is a token (RFC 9110 tchar), target is 1+
///    visible ASCII bytes (0x21-0x7E; its meaning is the server's business, see path_is_safe), version
///    is exactly HTTP/1.0 or HTTP/1.1. A well-formed other version (HTTP/2.0, HTTP/1.2) is 505; anything
///    else is 400, a request line without a version (HTTP/0.9's "GET /") included. The request line is
///    judged as soon as its CRLF arrives, so a bad one is refused at once, before any header comes.
///    Empty lines before the request line are skipped (RFC 9112 2.2), counted in max_head.
///  - Every line ends in CRLF: a bare LF or a CR not followed by LF is 400. NUL anywhere in the head is 400.
///  - Header: name ":" OWS value OWS. name is a token (so whitespace before the colon is 400); a line that
///    starts with SP or HTAB (obs-fold) is 400; the value may hold SP, HTAB, visible ASCII and bytes >= 0x80,
///    any other control byte is 400. Names compare case-insensitively (request::header()).
///  - Content-Length: 1*DIGIT only (no sign, no list "5, 5"); a second Content-Length header is 400 even
///    with the same value; a value above limits.max_body is 413. No Content-Length means no body.
///  - Transfer-Encoding (chunked or any other) is refused with 501 "Transfer-Encoding not supported": a
///    server built on this parser accepts bodies by Content-Length only, which also rules out
///    CL/TE request smuggling.
///  - Host: a second Host header is 400; a missing one in HTTP/1.1 is 400 only with limits.require_host
///    (off by default: it protects nothing here, and simple load generators omit it).
///  - Keep-alive: HTTP/1.1 keeps the connection unless Connection lists "close"; HTTP/1.0 closes unless
///    Connection lists "keep-alive" (and not "close"). Tokens compare case-insensitively, lists and repeated
///    Connection headers are all read.
///  - Limits (struct limits): request line + headers above max_head bytes, or more than max_headers
///    headers, is 431; a body above max_body is 413. The parser's memory is the bytes fed and not yet
///    handed out by next(): a server that feeds one read at a time and drains next() until need_more
///    holds at most max_head + max_body + one read.
///  - Not supported: Expect: 100-continue is not answered (the body is simply waited for), trailers.
///    Targets are passed through as they came: absolute-form ("http://host/path") included, whose path
///    target_path gives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uring/protocol/input_buffer.hpp>

namespace uring::http {

/// What request_parser accepts, and the status it refuses with beyond it. Threads: a plain value.
struct limits {
  std::size_t max_head = 8 * 1024;     ///< request line + headers, with their CRLFs: above -> 431
  std::size_t max_headers = 64;        ///< header lines: above -> 431
  std::size_t max_body = 1024 * 1024;  ///< Content-Length: above -> 413
  bool require_host = false;           ///< HTTP/1.1 without Host -> 400
};

/// The HTTP version of a request or response.
enum class version : std::uint8_t {
  http_1_0,  ///< HTTP/1.0
  http_1_1   ///< HTTP/1.1
};

/// One header line: a view of its name and value.
struct header {
  std::string_view name;   ///< as received (compare it case-insensitively)
  std::string_view value;  ///< without the optional whitespace around it
};

/// One complete request. Views into the parser's buffer: see "Lifetimes" above.
struct request {
  std::string_view method;                    ///< "GET", "POST", ...
  std::string_view target;                    ///< as received (target_path takes its path)
  http::version version = version::http_1_1;  ///< the request line's version
  std::vector<http::header> headers;          ///< in arrival order, at most limits.max_headers
  std::string_view body;                      ///< Content-Length bytes (empty without one)
  bool keep_alive = true;                     ///< the connection may carry another request after the response

  /// The value of the first header called `name` (compared case-insensitively), if any.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const noexcept;
};

/// Why a request was refused: the HTTP status to answer with (400, 413, 431, 501, 505) and a short
/// reason ("bad header name", "duplicate Content-Length", ...). `reason` points at a static string.
struct parse_error {
  int status = 0;           ///< the HTTP status to answer with
  std::string_view reason;  ///< a short reason, a static string
};

/// What request_parser::next found.
enum class parse_status : std::uint8_t {
  need_more,  ///< no complete request buffered: feed more bytes
  request,    ///< get() is the next request
  error,      ///< error() says why; answer it and close the connection
};

/// An incremental, defensive HTTP/1.1 request parser: bytes in (any split), complete requests out, each
/// refused one with the status to answer (the file's comment has its rules and the views' lifetimes).
/// Threads: a parser is used by one thread at a time (one parser per connection).
class request_parser : private detail::input_buffer {
 public:
  /// A parser that enforces `lim`.
  explicit request_parser(limits lim = {}) noexcept : limits_(lim) {}

  /// feed(bytes), prepare(n) + commit(k), buffered(): adding bytes read from the connection, and how many
  /// are waiting (see input_buffer). Each invalidates the views of the last message handed out.
  using input_buffer::buffered;
  using input_buffer::commit;
  using input_buffer::feed;
  using input_buffer::prepare;

  /// Parses on from where the last call stopped. Drops the previous request's bytes first, so the views
  /// of the request returned before are invalid afterwards.
  [[nodiscard]] parse_status next();

  /// The request next() just returned parse_status::request for.
  [[nodiscard]] const request& get() const noexcept { return request_; }
  /// Why next() returned parse_status::error.
  [[nodiscard]] const parse_error& error() const noexcept { return error_; }

 private:
  parse_status fail(int status, std::string_view reason);
  parse_status scan_head();
  parse_status parse_request_line(std::string_view line);
  parse_status parse_head();

  limits limits_;
  request request_;
  parse_error error_;
  /// Offsets relative to the front of the unread bytes (the current request's first byte).
  std::size_t scan_ = 0;        ///< head bytes checked so far
  std::size_t line_start_ = 0;  ///< where the line being scanned starts
  std::size_t head_start_ = 0;  ///< after the empty lines skipped before the request line
  std::size_t head_end_ = 0;    ///< just past the blank line; 0 while the head is incomplete
  std::size_t body_length_ = 0;
};

/// The standard reason phrase for `status` ("OK", "Not Found", ...); "Unknown" for codes it does not know.
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

/// Appends "HTTP/1.1 <status> <reason>\r\n", the given headers, "Content-Length: <content_length>",
/// Connection: keep-alive|close, and the blank line — the head of a response whose body the caller sends
/// (or omits, for HEAD). Throws std::invalid_argument for a header name that is not a token, a value with
/// CR, LF or NUL (response splitting), or a Content-Length/Connection header of the caller's (both are
/// written here, once).
void append_response_head(std::string& out, int status, std::span<const header> headers,
                          std::size_t content_length, bool keep_alive);
/// The head as above followed by `body`.
void append_response(std::string& out, int status, std::span<const header> headers, std::string_view body,
                     bool keep_alive);
/// The complete answer to a refused request: its status, Connection: close, and the reason as text/plain.
[[nodiscard]] std::string error_response(const parse_error& err);

/// The path of a request target, without its query ("?...") and fragment ("#..."). An absolute-form target
/// (RFC 9112 3.2.2) of scheme http or https (any case) gives the path after its authority, "/" when it
/// has none: "http://host/a?x" -> "/a", "https://host" -> "/". Other targets are taken as origin-form.
[[nodiscard]] std::string_view target_path(std::string_view target) noexcept;

/// Whether `path` (a request target's path, see target_path) can be appended to a served directory
/// without leaving it. Refuses:
///  - anything not starting with '/', and any empty segment ("//", a trailing '/'), except "/" itself:
///    "//etc/passwd" would otherwise become an absolute path under std::filesystem's operator/;
///  - "." and ".." segments;
///  - NUL, control bytes (< 0x20, 0x7F), bytes >= 0x80, backslash, '?' and '#';
///  - percent-encoding that is malformed (not %XX) or decodes to '.', '/', '\\', '%' (double encoding),
///    NUL or a control byte: "%2e%2e", "%2F", "%252e" never reach a decoder that could turn them into
///    traversal. Other escapes (%20) are allowed and left to the caller to decode.
[[nodiscard]] bool path_is_safe(std::string_view path) noexcept;

}  // namespace uring::http
