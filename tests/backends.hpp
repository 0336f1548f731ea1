// backends.hpp — behavioural tests are written once and run on every backend configuration.
//
// Use: derive the fixture from uring::test::backend_test, write TEST_P, then
//   INSTANTIATE_BACKENDS(MySuite);
// `run(task)` runs the task on a fresh executor of the parameter's configuration.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <uring/executor.hpp>
#include <uring/task.hpp>

namespace uring::test {

struct backend_config {
  std::string name;
  executor_options options;
  bool signal_storm = false;  // storm_backend_test (signal_storm.hpp): run the test inside a SIGALRM storm
};

// Test names and failure messages show the configuration's name, not its bytes.
inline void PrintTo(const backend_config& c, std::ostream* os) { *os << c.name; }

inline std::vector<backend_config> all_backends() {
  executor_options native;
  native.backend = backend_kind::native;
  executor_options deferred = native;
  deferred.flags = ring_flags::single_issuer | ring_flags::defer_taskrun;
  executor_options emulated;
  emulated.backend = backend_kind::emulated;
  // A poller thread takes the SQ (its own plan drops COOP_TASKRUN, which the kernel refuses with it).
  executor_options sqpoll = native;
  sqpoll.sqpoll.enabled = true;
  return {{"native", native},
          {"native_defer_taskrun", deferred},
          {"native_sqpoll", sqpoll},
          {"emulated", emulated}};
}

// For messaging: the three above plus native with MSG_RING turned off (the mailbox between native rings).
inline std::vector<backend_config> messaging_backends() {
  auto configs = all_backends();
  executor_options mailbox;
  mailbox.backend = backend_kind::native;
  mailbox.disable = feature::msg_ring;
  configs.push_back({"native_mailbox", mailbox});
  return configs;
}

// Every backend, plus native with each feature given disabled (its fallback on a real ring), named as given.
struct native_without {
  feature off;
  const char* name;
};
inline std::vector<backend_config> backends_and_native_without(std::initializer_list<native_without> extra) {
  auto configs = all_backends();
  for (const native_without& e : extra) {
    executor_options without;
    without.backend = backend_kind::native;
    without.disable = e.off;
    configs.push_back({e.name, without});
  }
  return configs;
}
inline std::vector<backend_config> backends_and_native_without(feature f, const char* name) {
  return backends_and_native_without({{f, name}});
}

class backend_test : public ::testing::TestWithParam<backend_config> {
 protected:
  [[nodiscard]] executor_options options() const { return GetParam().options; }
  [[nodiscard]] bool emulated() const { return GetParam().options.backend == backend_kind::emulated; }

  template <class T>
  T run(task<T> t) {
    executor ex(options());
    return ex.run(std::move(t));
  }
};

}  // namespace uring::test

#define INSTANTIATE_MESSAGING_BACKENDS(suite)                                                       \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(uring::test::messaging_backends()), \
                           [](const auto& test_info) { return test_info.param.name; })

#define INSTANTIATE_BACKENDS(suite)                                                           \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(uring::test::all_backends()), \
                           [](const auto& test_info) { return test_info.param.name; })
