// without_openat2 PROGRAM [ARGS...]: runs PROGRAM with openat2(2) failing with ENOSYS (a seccomp filter, as
// an old kernel or a container's policy would have it), to test what a program does without it.
#include <sys/syscall.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "seccomp_child.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: without_openat2 PROGRAM [ARGS...]\n");
    return 2;
  }
  if (int err = uring::test::block_syscall(SYS_openat2, ENOSYS); err != 0) {
    std::fprintf(stderr, "without_openat2: seccomp: %s\n", std::strerror(err));
    return uring::test::kChildFilterFailed;
  }
  return uring::test::exec_program(std::vector<std::string>(argv + 1, argv + argc));
}
