/// @file
/// uring/http/response.hpp — an incremental, defensive HTTP/1.1 response parser for clients.
///
/// Provides: uring::http::response_parser (bytes in; the head, then the body in pieces, out),
/// response, response_limits, body_kind, response_status. Errors are uring::http::parse_error
/// (uring/http/parser.hpp) with status 502, the answer a gateway gives for a malformed upstream response.
/// Library target uring::http (no I/O, no executor: a client feeds it what it reads).
/// Threads: plain values; a parser is used by one thread at a time (one parser per connection).
///
/// Use:
///   uring::http::response_parser p;                // one per connection
///   p.start(/*head_request=*/false);               // before each response (a new parser is ready for one)
///   for (;;) {
///     auto st = p.next();
///     if (st == response_status::need_more) {      // read more: feed it, or finish() at end of stream
///       n = read(...); n > 0 ? p.feed(bytes) : p.finish(); continue;
///     }
///     if (st == response_status::error) { report(p.error().reason); close(); break; }
///     if (st == response_status::head) look_at(p.get());   // once, for the final response
///     if (st == response_status::body) write(p.body());    // a piece of the body, as it arrived
///     if (st == response_status::done) break;              // p.get().keep_alive: may the connection serve
///     more
///   }
///
/// Lifetimes: the views (reason, header names and values, body()) point into the parser's own buffer and
/// stay valid until the next call to feed(), prepare(), commit() or next(). The plain values of get()
/// (status, version, framing, content_length, keep_alive) stay until the next start().
///
/// Memory: the body is never gathered: each next() hands out what has arrived of it (up to the end of the
/// body or chunk) and drops it at the next call. A client that feeds one read at a time and drains next()
/// until need_more holds at most one read plus max_head (the head), max_chunk_line (a chunk-size line) or
/// max_trailers (the trailer section): a body of any size streams through in bounded memory.
///
/// Rules (RFC 9112, on the strict side; every refusal is sticky: after response_status::error the
/// connection must be closed, the parser answers error from then on):
///  - Status line: HTTP/1.0 or HTTP/1.1 SP 3DIGIT (100-999) [SP reason] CRLF; a reason holds HTAB, SP,
///    visible ASCII and bytes >= 0x80. A well-formed other version (HTTP/2.0) is "HTTP version not
///    supported"; input not starting with "HTTP/" is refused at its first wrong byte.
///  - Lines end in CRLF (a bare LF or CR is refused), no NUL in the head; headers as for requests: a token
///    name, ":" OWS value OWS, no obs-fold, no control byte but HTAB in a value.
///  - Interim responses (1xx but 101) are skipped, at most max_interim of them; 101 is refused (a client
///    of this parser never asks to switch protocols).
///  - No body: the answer to a HEAD request (start(true)), 1xx, 204 and 304, whatever their headers say.
///  - Transfer-Encoding: only "chunked" (once) is understood, any other coding is refused (its body could not
///    be decoded). It wins over a Content-Length, and then the connection is not reused (RFC 9112 6.3).
///    Chunks: 1*HEXDIG size (leading zeros allowed, above 2^60 refused), extensions after ";" ignored,
///    the line bounded by max_chunk_line, data followed by CRLF; after the last chunk the trailer fields
///    are checked like headers, bounded by max_trailers bytes and max_headers fields, and dropped.
///  - Content-Length: 1*DIGIT, or a list of equal values ("5, 5"), repeated headers only with the same
///    value; conflicting values are refused, a value above 2^62 too.
///  - Neither: the body runs until the connection closes, which the caller reports with finish().
///  - finish() in the middle of a head, a length- or chunk-delimited body is an error ("connection closed
///    before the body ended"); before any byte of the response, "connection closed before the response".
///  - Keep-alive: HTTP/1.1 unless Connection lists "close"; HTTP/1.0 only with "keep-alive" (and not
///    "close"); never after a body delimited by the close, nor after Transfer-Encoding with Content-Length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <uring/http/parser.hpp>
#include <uring/protocol/input_buffer.hpp>

namespace uring::http {

/// What response_parser accepts; beyond it the response is an error. Threads: a plain value.
struct response_limits {
  std::size_t max_head = 64 * 1024;      ///< status line + headers of one response, with their CRLFs
  std::size_t max_headers = 100;         ///< header lines of one response; also trailer fields
  std::size_t max_chunk_line = 4096;     ///< a chunk-size line with its extensions and CRLF
  std::size_t max_trailers = 16 * 1024;  ///< the trailer section after the last chunk, with its CRLFs
  std::size_t max_interim = 16;          ///< 1xx responses skipped before the final one
};

/// How the body of the final response is delimited.
enum class body_kind : std::uint8_t {
  none,         ///< HEAD, 1xx, 204, 304
  length,       ///< Content-Length bytes
  chunked,      ///< Transfer-Encoding: chunked
  until_close,  ///< the rest of the connection
};

/// The head of the final response. Its views point into the parser's buffer and stay valid until the next
/// call to feed(), prepare(), commit() or next().
struct response {
  http::version version = version::http_1_1;    ///< the status line's version
  int status = 0;                               ///< the status code
  std::string_view reason;                      ///< the reason phrase, as received
  std::vector<http::header> headers;            ///< in arrival order, at most limits.max_headers
  body_kind framing = body_kind::none;          ///< how the body is delimited
  std::optional<std::uint64_t> content_length;  ///< as announced (also for HEAD, 204, 304)
  bool keep_alive = false;  ///< the connection may carry another request once this response is done

  /// The value of the first header called `name` (compared case-insensitively), if any.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const noexcept;
};

/// What response_parser::next found.
enum class response_status : std::uint8_t {
  need_more,  ///< feed more bytes, or finish() at the end of the stream
  head,       ///< get() is the final response's head (interim responses were skipped)
  body,       ///< body() is the next piece of the body
  done,       ///< the response is complete; get().keep_alive says whether the connection may be reused
  error,      ///< error() says why; close the connection
};

/// An incremental HTTP/1.1 response parser for a client: bytes in, the final response's head and then its
/// body's pieces out, whatever its framing (the file's comment has its rules).
/// Threads: a parser is used by one thread at a time (one parser per connection).
class response_parser : private detail::input_buffer {
 public:
  /// A parser that enforces `lim`.
  explicit response_parser(response_limits lim = {}) noexcept : limits_(lim) {}

  /// feed(bytes), prepare(n) + commit(k), buffered(): adding bytes read from the connection, and how many
  /// are waiting (see input_buffer). Each invalidates the views handed out last.
  using input_buffer::buffered;
  using input_buffer::commit;
  using input_buffer::feed;
  using input_buffer::prepare;

  /// Makes the parser ready for the next response on the connection (bytes already buffered are its first
  /// bytes). `head_request`: the request was HEAD, so the response has no body whatever it announces.
  void start(bool head_request = false) noexcept;
  /// The connection has ended: no more bytes will come. What is buffered is parsed to its end.
  void finish() noexcept { eof_ = true; }

  /// Parses on from where the last call stopped; drops the body piece (or head) handed out before.
  [[nodiscard]] response_status next();

  /// The final response's head, once next() returned response_status::head.
  [[nodiscard]] const response& get() const noexcept { return response_; }
  /// The body piece next() just returned response_status::body for (never empty).
  [[nodiscard]] std::string_view body() const noexcept { return body_; }
  /// Why next() returned response_status::error.
  [[nodiscard]] const parse_error& error() const noexcept { return error_; }
  /// The 1xx responses skipped before this one.
  [[nodiscard]] std::size_t interim_skipped() const noexcept { return interim_; }

 private:
  enum class state : std::uint8_t {
    head,
    length,
    chunk_size,
    chunk_data,
    chunk_end,
    trailers,
    until_close,
    done
  };

  response_status fail(std::string_view reason);
  std::optional<response_status> on_head();
  std::optional<response_status> on_chunk_size();
  std::optional<response_status> on_chunk_end();
  std::optional<response_status> on_trailers();
  response_status hand_out_body(std::size_t limit);
  std::optional<response_status> parse_status_line(std::string_view line);
  std::optional<response_status> parse_head(std::string_view head);

  response_limits limits_;
  response response_;
  parse_error error_;
  std::string_view body_;
  state state_ = state::head;
  bool head_request_ = false;
  bool eof_ = false;
  std::size_t interim_ = 0;
  /// Offsets relative to the front of the unread bytes while a line-based part (head, chunk line, trailers)
  /// is being scanned.
  std::size_t scan_ = 0;         ///< bytes checked so far
  std::size_t line_start_ = 0;   ///< where the line being scanned starts
  std::size_t fields_ = 0;       ///< trailer fields so far
  std::uint64_t remaining_ = 0;  ///< of the Content-Length body or the current chunk
};

}  // namespace uring::http
