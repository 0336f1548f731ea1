// fd_leak.hpp — every gtest test fails if it leaves a file descriptor open (tests/test_main.cpp).
//
// The listener installed by the shared test main (linked into each uring_test() executable) lists
// /proc/self/fd when a test starts and again when it ends, after the fixture is destroyed; any fd open at
// the end that was not open at the start fails the test, and the message names each one with its
// readlink target ("fd 7 -> anon_inode:[io_uring]"). Strict on purpose: a leaked ring or socket is a
// bug in the test or in the library.
//
// Something a test keeps on purpose beyond its end (a process-wide static that opens an fd on first
// use) must say so with keep_fd_open(fd, why), which exempts that one fd for the rest of the process.
#pragma once

#include <set>

namespace uring::test {

// The fds this process has open now (from /proc/self/fd, without the listing's own).
std::set<int> open_fds();
inline long open_fd_count() { return static_cast<long>(open_fds().size()); }

// Exempts `fd` from the leak check from now on; `why` says what keeps it open (shown nowhere else, so
// the call site documents itself).
void keep_fd_open(int fd, const char* why);

}  // namespace uring::test
