// children.hpp — what tests of child processes check after each test: none left, running or zombie.
#pragma once

#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace uring::test {

// "" when this process has no child at all (waitid says ECHILD, without reaping anything), else what
// is left.
inline std::string children_left() {
  siginfo_t info{};
  if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    return errno == ECHILD ? "" : std::string("waitid: ") + std::strerror(errno);
  return info.si_pid != 0 ? "a zombie, pid " + std::to_string(info.si_pid) : "a running child";
}

}  // namespace uring::test
