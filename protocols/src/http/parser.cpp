// The HTTP/1.1 request parser and response writer (uring/http/parser.hpp). The rules are listed there.
//
// Parsing happens in two passes over the head. scan_head() looks at each byte once, as it arrives, for
// what can be refused on the spot (bare CR or LF, NUL, the size limit) and for the blank line ending the
// head; only then does parse_head() split the complete head into request line and headers. So an error
// is found at the same byte whether the input comes at once or one byte at a time, and a slow client
// costs one pass over its bytes, not one per read.
#include <uring/http/parser.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>

#include "syntax.hpp"

namespace uring::http {

using syntax::crlf;
using syntax::for_each_list_element;
using syntax::iequals;
using syntax::is_blank;
using syntax::is_field_value_char;
using syntax::is_token;
using syntax::trim_blanks;

std::optional<std::string_view> request::header(std::string_view name) const noexcept {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return std::nullopt;
}

parse_status request_parser::fail(int status, std::string_view reason) {
  error_ = {status, reason};
  request_ = {};
  close();  // nothing more will be parsed: the connection is closing
  return parse_status::error;
}

parse_status request_parser::next() {
  if (closed()) return parse_status::error;
  drop_handed_out();
  if (head_end_ == 0) {
    if (auto st = scan_head(); st != parse_status::request) return st;
    if (auto st = parse_head(); st != parse_status::request) return st;
  } else if (unread().size() - head_end_ >= body_length_) {
    // The body arrived after the head: feed() may have moved the buffer since parse_head() made the views,
    // so they are made again (the head was already accepted; this pass cannot fail).
    (void)parse_head();
  }
  std::string_view in = unread();
  if (in.size() - head_end_ < body_length_) return parse_status::need_more;
  request_.body = in.substr(head_end_, body_length_);
  hand_out(head_end_ + body_length_);
  scan_ = line_start_ = head_start_ = head_end_ = body_length_ = 0;
  return parse_status::request;
}

// Looks at the head bytes not seen yet. need_more until the blank line ending the head has arrived, then
// request (head_end_ set); error on a byte that can never start a valid head or past the size limit.
parse_status request_parser::scan_head() {
  std::string_view in = unread();
  for (; scan_ < in.size(); ++scan_) {
    if (scan_ >= limits_.max_head) return fail(431, "request head too large");
    char c = in[scan_];
    if (c == '\0') return fail(400, "NUL byte in request head");
    if (scan_ > 0 && in[scan_ - 1] == '\r' && c != '\n') return fail(400, "CR not followed by LF");
    if (c != '\n') continue;
    if (scan_ == 0 || in[scan_ - 1] != '\r') return fail(400, "line ends in LF without CR");
    const std::size_t start = line_start_;
    bool empty_line = scan_ + 1 - start == crlf.size();
    line_start_ = scan_ + 1;
    if (!empty_line) {
      // The request line is judged as soon as it ends: a client that sends no headers after a bad one (an
      // HTTP/0.9 "GET /") gets its 400 at once, not a timeout.
      if (start != head_start_) continue;
      if (auto st = parse_request_line(in.substr(start, scan_ - 1 - start)); st != parse_status::request)
        return st;
      continue;
    }
    if (line_start_ - crlf.size() == head_start_) {  // an empty line before the request line: skipped
      head_start_ = line_start_;
      continue;
    }
    head_end_ = ++scan_;
    return parse_status::request;
  }
  return parse_status::need_more;
}

// The request line (without its CRLF) into request_.method, target and version, or the refusal.
parse_status request_parser::parse_request_line(std::string_view line) {
  std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return fail(400, "malformed request line");
  std::string_view method = line.substr(0, sp1);
  if (!is_token(method)) return fail(400, "bad method");
  std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return fail(400, "request line without HTTP version");
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7F;
      })) {
    return fail(400, "bad request target");
  }
  std::string_view ver = line.substr(sp2 + 1);
  if (ver == "HTTP/1.1") {
    request_.version = version::http_1_1;
  } else if (ver == "HTTP/1.0") {
    request_.version = version::http_1_0;
  } else if (ver.size() == 8 && ver.starts_with("HTTP/") && ver[5] >= '0' && ver[5] <= '9' && ver[6] == '.' &&
             ver[7] >= '0' && ver[7] <= '9') {
    return fail(505, "HTTP version not supported");
  } else {
    return fail(400, "bad HTTP version");
  }
  request_.method = method;
  request_.target = target;
  return parse_status::request;
}

// Splits the complete head [head_start_, head_end_) into request line and headers, applies the rules, and
// fills request_ (all but the body) and body_length_.
parse_status request_parser::parse_head() {
  request_.headers.clear();  // keeps its capacity for the next request on this connection
  request_.body = {};
  std::string_view head = unread().substr(head_start_, head_end_ - head_start_ - crlf.size());

  // Request line.
  std::size_t eol = head.find(crlf);
  if (auto st = parse_request_line(head.substr(0, eol)); st != parse_status::request) return st;
  head.remove_prefix(eol + crlf.size());
  std::string_view line;

  // Headers.
  bool has_length = false, has_host = false, has_transfer_encoding = false;
  bool conn_close = false, conn_keep_alive = false;
  std::uint64_t length = 0;
  while (!head.empty()) {
    eol = head.find(crlf);
    line = head.substr(0, eol);
    head.remove_prefix(eol + crlf.size());
    if (is_blank(line.front())) return fail(400, "obsolete line folding");
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail(400, "header line without colon");
    std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return fail(400, "bad header name");
    std::string_view value = line.substr(colon + 1);
    if (!std::all_of(value.begin(), value.end(),
                     [](char c) { return is_field_value_char(static_cast<unsigned char>(c)); })) {
      return fail(400, "control character in header value");
    }
    value = trim_blanks(value);
    if (request_.headers.size() == limits_.max_headers) return fail(431, "too many headers");
    request_.headers.push_back({name, value});

    if (iequals(name, "content-length")) {
      if (has_length) return fail(400, "duplicate Content-Length");
      has_length = true;
      if (value.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return fail(400, "bad Content-Length");
      }
      // Saturating: a long run of digits is "too large", never an overflow.
      for (char c : value)
        length = std::min<std::uint64_t>(length * 10 + static_cast<unsigned>(c - '0'), UINT64_MAX / 16);
    } else if (iequals(name, "transfer-encoding")) {
      has_transfer_encoding = true;
    } else if (iequals(name, "host")) {
      if (has_host) return fail(400, "duplicate Host");
      has_host = true;
    } else if (iequals(name, "connection")) {
      for_each_list_element(value, [&](std::string_view option) {
        if (iequals(option, "close")) conn_close = true;
        if (iequals(option, "keep-alive")) conn_keep_alive = true;
      });
    }
  }
  if (has_transfer_encoding) return fail(501, "Transfer-Encoding not supported");
  if (!has_host && limits_.require_host && request_.version == version::http_1_1)
    return fail(400, "missing Host");
  if (length > limits_.max_body) return fail(413, "request body too large");
  body_length_ = static_cast<std::size_t>(length);
  request_.keep_alive = request_.version == version::http_1_1 ? !conn_close : conn_keep_alive && !conn_close;
  return parse_status::request;
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 416:
      return "Range Not Satisfiable";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

void append_response_head(std::string& out, int status, std::span<const header> headers,
                          std::size_t content_length, bool keep_alive) {
  if (status < 100 || status > 999) throw std::invalid_argument("http response: status out of range");
  for (const auto& h : headers) {
    if (!is_token(h.name)) throw std::invalid_argument("http response: header name is not a token");
    if (h.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) {
      throw std::invalid_argument("http response: header value holds CR, LF or NUL");
    }
    if (iequals(h.name, "content-length") || iequals(h.name, "connection")) {
      throw std::invalid_argument("http response: Content-Length and Connection are written by the writer");
    }
  }
  std::array<char, 24> number{};
  auto put_number = [&](std::uint64_t n) {
    auto [end, ec] = std::to_chars(number.data(), number.data() + number.size(), n);
    out.append(number.data(), end);
  };
  out.append("HTTP/1.1 ");
  put_number(static_cast<std::uint64_t>(status));
  out.push_back(' ');
  out.append(reason_phrase(status));
  out.append(crlf);
  for (const auto& h : headers) {
    out.append(h.name).append(": ").append(h.value).append(crlf);
  }
  out.append("Content-Length: ");
  put_number(content_length);
  out.append(crlf);
  out.append(keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
  out.append(crlf);
}

void append_response(std::string& out, int status, std::span<const header> headers, std::string_view body,
                     bool keep_alive) {
  append_response_head(out, status, headers, body.size(), keep_alive);
  out.append(body);
}

std::string error_response(const parse_error& err) {
  std::string out;
  std::string body = std::string(err.reason) + "\n";
  const header type{"Content-Type", "text/plain"};
  append_response(out, err.status, std::span(&type, 1), body, false);
  return out;
}

std::string_view target_path(std::string_view target) noexcept {
  for (std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
    if (target.size() < scheme.size() || !iequals(target.substr(0, scheme.size()), scheme)) continue;
    std::string_view rest = target.substr(scheme.size());
    std::size_t path = rest.find_first_of("/?#");
    if (path == std::string_view::npos || rest[path] != '/') return "/";
    target = rest.substr(path);
    break;
  }
  return target.substr(0, target.find_first_of("?#"));
}

bool path_is_safe(std::string_view path) noexcept {
  if (path.empty() || path.front() != '/') return false;
  if (path == "/") return true;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string_view rest = path.substr(1);
  for (;;) {
    std::size_t slash = rest.find('/');
    std::string_view segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") return false;
    for (std::size_t i = 0; i < segment.size(); ++i) {
      auto c = static_cast<unsigned char>(segment[i]);
      if (c < 0x20 || c >= 0x7F || c == '\\' || c == '?' || c == '#') return false;
      if (c != '%') continue;
      if (i + 2 >= segment.size()) return false;  // "%" or "%X" at the end
      int hi = hex(segment[i + 1]), lo = hex(segment[i + 2]);
      if (hi < 0 || lo < 0) return false;
      auto decoded = static_cast<unsigned char>(hi * 16 + lo);
      if (decoded < 0x20 || decoded == 0x7F || decoded == '.' || decoded == '/' || decoded == '\\' ||
          decoded == '%') {
        return false;
      }
      i += 2;
    }
    if (slash == std::string_view::npos) return true;
    rest.remove_prefix(slash + 1);
  }
}

}  // namespace uring::http
