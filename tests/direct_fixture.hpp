// direct_fixture.hpp — what the direct-descriptor tests share (direct_test, direct_accept_test,
// direct_send_test): the Direct suite's fixture, and reading a failure's errno and what().
#pragma once

#include <string>
#include <system_error>
#include <utility>

#include <uring/uring.hpp>

#include "backends.hpp"

namespace uring::test {

// The errno and what() of the std::system_error that `t` throws, or {0, ""}.
template <class T>
task<std::pair<int, std::string>> failure_of(task<T> t) {
  try {
    co_await std::move(t);
  } catch (const std::system_error& e) {
    co_return std::pair<int, std::string>{e.code().value(), e.what()};
  }
  co_return std::pair<int, std::string>{0, ""};
}

inline bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

class Direct : public backend_test {
 protected:
  template <class T>
  T run_with_table(unsigned slots, task<T> t) {
    executor_options o = options();
    o.direct_files = slots;
    executor ex(o);
    return ex.run(std::move(t));
  }
};

}  // namespace uring::test
