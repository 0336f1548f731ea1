// The HTTP/1.1 response parser (uring/http/response.hpp). The rules are listed there.
//
// Like the request parser, each line-based part (the head, a chunk-size line, the trailer section) is
// scanned one byte at a time as it arrives, for what can be refused on the spot and for its end; only a
// complete line or head is then split and judged. So an error is found at the same byte whatever the
// split of the input, and a slow server costs one pass over its bytes. Body bytes are handed out where
// they lie in the buffer, never copied.
#include <uring/http/response.hpp>

#include <algorithm>

#include "syntax.hpp"

namespace uring::http {

using syntax::crlf;
using syntax::iequals;
using syntax::is_blank;
using syntax::is_field_value_char;
using syntax::is_token;

namespace {

constexpr int bad_gateway = 502;
constexpr std::string_view http_prefix = "HTTP/";
constexpr std::uint64_t max_content_length = std::uint64_t{1} << 62;
constexpr std::uint64_t max_chunk_size = std::uint64_t{1} << 60;

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Why a field line (header or trailer, without its CRLF) is malformed; empty when it is well formed.
// `name` and `value` (trimmed) are set when it is.
std::string_view check_field_line(std::string_view line, std::string_view& name, std::string_view& value) {
  if (is_blank(line.front())) return "obsolete line folding";
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "header line without colon";
  name = line.substr(0, colon);
  if (!is_token(name)) return "bad header name";
  value = line.substr(colon + 1);
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return is_field_value_char(static_cast<unsigned char>(c)); })) {
    return "control character in header value";
  }
  value = syntax::trim_blanks(value);
  return {};
}

}  // namespace

std::optional<std::string_view> response::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return std::nullopt;
}

void response_parser::start(bool head_request) noexcept {
  if (closed()) return;
  drop_handed_out();
  std::vector<header> headers = std::move(response_.headers);  // keeps its capacity for the next response
  headers.clear();
  response_ = {};
  response_.headers = std::move(headers);
  body_ = {};
  state_ = state::head;
  head_request_ = head_request;
  interim_ = 0;
  scan_ = line_start_ = fields_ = 0;
  remaining_ = 0;
}

response_status response_parser::fail(std::string_view reason) {
  error_ = {bad_gateway, reason};
  response_.reason = {};
  response_.headers.clear();
  body_ = {};
  close();  // nothing more will be parsed: the connection is closing
  return response_status::error;
}

response_status response_parser::next() {
  if (closed()) return response_status::error;
  drop_handed_out();
  body_ = {};
  for (;;) {
    std::optional<response_status> st;
    switch (state_) {
      case state::head:
        st = on_head();
        break;
      case state::length:
        if (remaining_ == 0) {
          state_ = state::done;
          continue;
        }
        return hand_out_body(remaining_);
      case state::chunk_size:
        st = on_chunk_size();
        break;
      case state::chunk_data:
        if (remaining_ == 0) {
          state_ = state::chunk_end;
          continue;
        }
        return hand_out_body(remaining_);
      case state::chunk_end:
        st = on_chunk_end();
        break;
      case state::trailers:
        st = on_trailers();
        break;
      case state::until_close:
        if (unread().empty() && eof_) {
          state_ = state::done;
          continue;
        }
        return hand_out_body(unread().size());
      case state::done:
        return response_status::done;
    }
    if (st) return *st;
  }
}

// Hands out what has arrived of the body, up to `limit` bytes; need_more (or the error at the end of the
// stream) when nothing has.
response_status response_parser::hand_out_body(std::size_t limit) {
  std::string_view in = unread();
  if (in.empty()) {
    if (eof_ && state_ != state::until_close) return fail("connection closed before the body ended");
    return response_status::need_more;
  }
  const std::size_t n = std::min<std::uint64_t>(limit, in.size());
  body_ = in.substr(0, n);
  hand_out(n);
  if (state_ != state::until_close) remaining_ -= n;
  return response_status::body;
}

// Scans the head bytes not seen yet; once the blank line ending it has arrived, judges it: an interim
// response is dropped and the next one scanned, a final one is handed out.
std::optional<response_status> response_parser::on_head() {
  for (;;) {
    std::string_view in = unread();
    std::size_t head_end = 0;
    for (; scan_ < in.size(); ++scan_) {
      if (scan_ >= limits_.max_head) return fail("response head too large");
      char c = in[scan_];
      // Something other than HTTP/1.x (an HTTP/0.9 body, another protocol) is refused at its first byte.
      if (scan_ < http_prefix.size() && c != http_prefix[scan_]) return fail("bad status line");
      if (c == '\0') return fail("NUL byte in response head");
      if (scan_ > 0 && in[scan_ - 1] == '\r' && c != '\n') return fail("CR not followed by LF");
      if (c != '\n') continue;
      if (scan_ == 0 || in[scan_ - 1] != '\r') return fail("line ends in LF without CR");
      const std::size_t start = line_start_;
      line_start_ = scan_ + 1;
      if (start == 0) {
        // The status line is judged as soon as it ends, so a bad one is refused before any header comes.
        if (auto st = parse_status_line(in.substr(0, scan_ - 1)); st) return st;
        continue;
      }
      if (scan_ + 1 - start == crlf.size()) {
        head_end = ++scan_;
        break;
      }
    }
    if (head_end == 0) {
      if (!eof_) return response_status::need_more;
      return fail(in.empty() ? "connection closed before the response"
                             : "connection closed in the response head");
    }
    if (auto st = parse_head(in.substr(0, head_end - crlf.size())); st) return st;
    scan_ = line_start_ = 0;
    if (response_.status >= 100 && response_.status < 200) {
      if (++interim_ > limits_.max_interim) return fail("too many interim responses");
      consume(head_end);  // a 100 Continue and its kind: nothing of them is kept
      continue;
    }
    hand_out(head_end);
    return response_status::head;
  }
}

// The status line (without its CRLF) into response_.version, status and reason.
std::optional<response_status> response_parser::parse_status_line(std::string_view line) {
  if (line.size() < 12 || line[8] != ' ') return fail("bad status line");
  std::string_view ver = line.substr(0, 8);
  if (ver == "HTTP/1.1") {
    response_.version = version::http_1_1;
  } else if (ver == "HTTP/1.0") {
    response_.version = version::http_1_0;
  } else if (is_digit(ver[5]) && ver[6] == '.' && is_digit(ver[7])) {
    return fail("HTTP version not supported");
  } else {
    return fail("bad status line");
  }
  std::string_view code = line.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), is_digit) || code[0] == '0') return fail("bad status code");
  std::string_view reason = line.substr(12);
  if (!reason.empty()) {
    if (reason.front() != ' ') return fail("bad status code");
    reason.remove_prefix(1);
  }
  if (!std::all_of(reason.begin(), reason.end(),
                   [](char c) { return is_field_value_char(static_cast<unsigned char>(c)); })) {
    return fail("control character in reason phrase");
  }
  response_.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  response_.reason = reason;
  return std::nullopt;
}

// Splits the complete head (without its final CRLF) into status line and headers, applies the rules and
// fills response_; for a final response, sets the state its body starts in.
std::optional<response_status> response_parser::parse_head(std::string_view head) {
  response_.headers.clear();
  response_.content_length.reset();
  std::size_t eol = head.find(crlf);
  if (auto st = parse_status_line(head.substr(0, eol)); st) return st;
  head.remove_prefix(std::min(head.size(), eol + crlf.size()));

  bool bad_length = false, conflicting_length = false;
  bool transfer_encoding = false, chunked = false, other_coding = false;
  bool conn_close = false, conn_keep_alive = false;
  std::optional<std::uint64_t> length;
  while (!head.empty()) {
    eol = head.find(crlf);
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(std::min(head.size(), eol + crlf.size()));
    std::string_view name, value;
    if (auto why = check_field_line(line, name, value); !why.empty()) return fail(why);
    if (response_.headers.size() == limits_.max_headers) return fail("too many headers");
    response_.headers.push_back({name, value});

    if (iequals(name, "content-length")) {
      if (value.empty()) bad_length = true;
      syntax::for_each_list_element(value, [&](std::string_view element) {
        if (!std::all_of(element.begin(), element.end(), is_digit)) {
          bad_length = true;
          return;
        }
        // Saturating: a long run of digits is "too large", never an overflow.
        std::uint64_t n = 0;
        for (char c : element) n = std::min(n * 10 + static_cast<unsigned>(c - '0'), max_content_length + 1);
        if (length && *length != n) conflicting_length = true;
        length = n;
      });
    } else if (iequals(name, "transfer-encoding")) {
      transfer_encoding = true;
      syntax::for_each_list_element(value, [&](std::string_view coding) {
        // "chunked" must be the one and only coding: any other could not be decoded here.
        if (iequals(coding, "chunked") && !chunked && !other_coding) {
          chunked = true;
        } else {
          other_coding = true;
        }
      });
    } else if (iequals(name, "connection")) {
      syntax::for_each_list_element(value, [&](std::string_view option) {
        if (iequals(option, "close")) conn_close = true;
        if (iequals(option, "keep-alive")) conn_keep_alive = true;
      });
    }
  }
  if (bad_length) return fail("bad Content-Length");
  if (conflicting_length) return fail("conflicting Content-Length");
  if (length && *length > max_content_length) return fail("Content-Length too large");
  response_.content_length = length;
  response_.keep_alive =
      response_.version == version::http_1_1 ? !conn_close : conn_keep_alive && !conn_close;

  const int status = response_.status;
  if (status >= 100 && status < 200) {
    if (status == 101) return fail("101 Switching Protocols not requested");
    return std::nullopt;  // interim: the caller drops it
  }
  if (head_request_ || status == 204 || status == 304) {
    response_.framing = body_kind::none;
    state_ = state::done;
  } else if (transfer_encoding) {
    if (!chunked || other_coding) return fail("unsupported Transfer-Encoding");
    response_.framing = body_kind::chunked;
    state_ = state::chunk_size;
    // Both framings: one of them was meant for someone else (request smuggling); this one ends here.
    if (length) response_.keep_alive = false;
  } else if (length) {
    response_.framing = body_kind::length;
    remaining_ = *length;
    state_ = state::length;
  } else {
    response_.framing = body_kind::until_close;
    response_.keep_alive = false;
    state_ = state::until_close;
  }
  return std::nullopt;
}

// A chunk-size line: 1*HEXDIG [ BWS ";" extensions ] CRLF. The size 0 starts the trailers.
std::optional<response_status> response_parser::on_chunk_size() {
  std::string_view in = unread();
  for (; scan_ < in.size(); ++scan_) {
    if (scan_ >= limits_.max_chunk_line) return fail("chunk line too long");
    char c = in[scan_];
    if (scan_ == 0 && hex_value(c) < 0) return fail("bad chunk size");
    if (scan_ > 0 && in[scan_ - 1] == '\r' && c != '\n') return fail("CR not followed by LF");
    if (c != '\n') continue;
    if (in[scan_ - 1] != '\r') return fail("line ends in LF without CR");
    std::string_view line = in.substr(0, scan_ - 1);
    std::uint64_t size = 0;
    std::size_t i = 0;
    for (; i < line.size() && hex_value(line[i]) >= 0; ++i) {
      if (size > max_chunk_size / 16) return fail("chunk size too large");  // before it could wrap
      size = size * 16 + static_cast<unsigned>(hex_value(line[i]));
    }
    std::string_view rest = line.substr(i);
    while (!rest.empty() && is_blank(rest.front())) rest.remove_prefix(1);
    if (!rest.empty() && rest.front() != ';') return fail("bad chunk size");
    if (!std::all_of(rest.begin(), rest.end(),
                     [](char x) { return is_field_value_char(static_cast<unsigned char>(x)); })) {
      return fail("control character in chunk extension");
    }
    consume(scan_ + 1);
    scan_ = 0;
    if (size == 0) {
      line_start_ = fields_ = 0;
      state_ = state::trailers;
    } else {
      remaining_ = size;
      state_ = state::chunk_data;
    }
    return std::nullopt;
  }
  if (eof_) return fail("connection closed before the body ended");
  return response_status::need_more;
}

// The CRLF after a chunk's data.
std::optional<response_status> response_parser::on_chunk_end() {
  std::string_view in = unread();
  if ((!in.empty() && in[0] != '\r') || (in.size() > 1 && in[1] != '\n'))
    return fail("chunk data not followed by CRLF");
  if (in.size() < crlf.size()) {
    if (eof_) return fail("connection closed before the body ended");
    return response_status::need_more;
  }
  consume(crlf.size());
  state_ = state::chunk_size;
  return std::nullopt;
}

// The trailer section after the last chunk: field lines, checked and dropped, up to a blank line.
std::optional<response_status> response_parser::on_trailers() {
  std::string_view in = unread();
  for (; scan_ < in.size(); ++scan_) {
    if (scan_ >= limits_.max_trailers) return fail("trailers too large");
    char c = in[scan_];
    if (c == '\0') return fail("NUL byte in trailers");
    if (scan_ > 0 && in[scan_ - 1] == '\r' && c != '\n') return fail("CR not followed by LF");
    if (c != '\n') continue;
    if (scan_ == 0 || in[scan_ - 1] != '\r') return fail("line ends in LF without CR");
    const std::size_t start = line_start_;
    line_start_ = scan_ + 1;
    if (scan_ + 1 - start == crlf.size()) {
      consume(scan_ + 1);
      scan_ = line_start_ = 0;
      state_ = state::done;
      return std::nullopt;
    }
    std::string_view name, value;
    if (auto why = check_field_line(in.substr(start, scan_ - 1 - start), name, value); !why.empty())
      return fail("malformed trailer field");
    if (++fields_ > limits_.max_headers) return fail("too many trailers");
  }
  if (eof_) return fail("connection closed before the body ended");
  return response_status::need_more;
}

}  // namespace uring::http
