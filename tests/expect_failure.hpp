// expect_failure.hpp — checks that an operation fails as its syscall would, in both of its forms.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <system_error>

#include <uring/task.hpp>

namespace uring::test {

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The operation `make()` returns fails with `err`: .nothrow() yields -err, and the throwing form throws
// that error with a message starting with the operation's name.
template <class Make>
task<void> expect_failure(Make make, int err, const char* name) {
  // Named first: g++ cannot type a co_await inside a macro of a template.
  const auto quiet = co_await make().nothrow();
  EXPECT_EQ(quiet.res, -err) << name;
  try {
    co_await make();
    ADD_FAILURE() << name << " did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), err) << e.what();
    EXPECT_TRUE(starts_with(e.what(), std::string(name) + ": ")) << e.what();
  }
}

}  // namespace uring::test
