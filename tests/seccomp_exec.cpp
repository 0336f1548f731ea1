// seccomp_exec ERRNO PROGRAM [ARGS...]: runs PROGRAM with io_uring_setup failing with ERRNO (ENOSYS or
// EPERM), the way a container's seccomp profile blocks it. For tests that run a sample where io_uring is
// unusable.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "seccomp_child.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: seccomp_exec ENOSYS|EPERM PROGRAM [ARGS...]\n");
    return 2;
  }
  const std::string err = argv[1];
  if (err != "ENOSYS" && err != "EPERM") {
    std::fprintf(stderr, "seccomp_exec: '%s' is not ENOSYS or EPERM\n", argv[1]);
    return 2;
  }
  if (int failed = uring::test::block_syscall(__NR_io_uring_setup, err == "ENOSYS" ? ENOSYS : EPERM)) {
    std::fprintf(stderr, "seccomp_exec: installing the filter failed: %s\n", std::strerror(failed));
    return uring::test::kChildFilterFailed;
  }
  return uring::test::exec_program(std::vector<std::string>(argv + 2, argv + argc));
}
