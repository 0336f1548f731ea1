// samples/kv/inline.cpp — inline commands read as Redis reads them (inline.hpp).
#include "inline.hpp"

namespace kv {

namespace {

bool blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int hex(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string_view> inline_line(args_t args) noexcept {
  if (args.size() < 2) return std::nullopt;
  const char* first_end = args[0].data() + args[0].size();
  for (const char* p = first_end; p < args[1].data(); ++p) {
    if (*p != ' ' && *p != '\t') return std::nullopt;
  }
  const char* end = args.back().data() + args.back().size();
  return std::string_view(args[0].data(), static_cast<std::size_t>(end - args[0].data()));
}

std::optional<std::vector<std::string>> split_inline(std::string_view line) {
  // Bytes past the end read as NUL, as in Redis's C string.
  auto at = [line](std::size_t i) { return i < line.size() ? line[i] : '\0'; };
  std::vector<std::string> words;
  std::size_t p = 0;
  for (;;) {
    while (at(p) != '\0' && blank(at(p))) ++p;
    if (at(p) == '\0') return words;
    std::string word;
    char quote = 0;  // the quote the word is in: '"', '\'' or none
    for (bool done = false; !done;) {
      char c = at(p);
      if (quote == '"' && c == '\\' && at(p + 1) == 'x' && hex(at(p + 2)) >= 0 && hex(at(p + 3)) >= 0) {
        word.push_back(static_cast<char>(hex(at(p + 2)) * 16 + hex(at(p + 3))));
        p += 3;
      } else if (quote == '"' && c == '\\' && at(p + 1) != '\0') {
        char e = at(++p);
        word.push_back(e == 'n'   ? '\n'
                       : e == 'r' ? '\r'
                       : e == 't' ? '\t'
                       : e == 'b' ? '\b'
                       : e == 'a' ? '\a'
                                  : e);
      } else if (quote == '\'' && c == '\\' && at(p + 1) == '\'') {
        word.push_back(at(++p));
      } else if (quote != 0 && c == quote) {
        if (at(p + 1) != '\0' && !blank(at(p + 1))) return std::nullopt;  // "a"b: not a word
        done = true;
      } else if (quote != 0 && c == '\0') {
        return std::nullopt;  // unbalanced
      } else if (quote != 0) {
        word.push_back(c);
      } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0') {
        done = true;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else {
        word.push_back(c);
      }
      if (at(p) != '\0') ++p;
    }
    words.push_back(std::move(word));
  }
}

}  // namespace kv
