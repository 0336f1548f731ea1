// text.hpp — small string helpers shared by the option parsers.
#pragma once

#include <string>

namespace uring::detail {

// `s` without leading and trailing blanks.
inline std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace uring::detail
