// protocols/src/http/syntax.hpp — the HTTP/1.1 grammar pieces that the request parser (parser.cpp) and the
// response parser (response.cpp) share: tokens, field values, case-insensitive comparison, lists.
#pragma once

#include <algorithm>
#include <string_view>

namespace uring::http::syntax {

inline constexpr std::string_view crlf = "\r\n";

// RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|"
// / "~" / DIGIT / ALPHA.
constexpr bool is_tchar(unsigned char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

inline bool is_token(std::string_view s) noexcept {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// Field values: SP, HTAB, VCHAR and obs-text (RFC 9110 5.5); every other control byte is refused.
constexpr bool is_field_value_char(unsigned char c) noexcept { return c == '\t' || (c >= 0x20 && c != 0x7F); }

constexpr bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }

constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

inline std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Calls f(token) for each element of a comma-separated list, blanks trimmed, empty elements skipped.
template <class F>
void for_each_list_element(std::string_view list, F&& f) {
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view element = trim_blanks(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace uring::http::syntax
