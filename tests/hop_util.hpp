// hop_util.hpp — a resume_on/submit_to hop that the target accepts and then drops while shutting down,
// shared by the tests that hop through an executor& (messaging_test) and an executor_handle
// (handle_hop_test).
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>

#include <uring/executor.hpp>
#include <uring/resume_on.hpp>
#include <uring/spawn.hpp>
#include <uring/task.hpp>

namespace uring::test {

// Hops to `to` by resume_on or submit_to, recording the refusal's errno and where the coroutine went on.
template <class Target>
task<void> hop_then_record(Target to, bool by_submit, bool& suspended, int& err, bool& fn_ran,
                           std::shared_ptr<int> kept, executor*& resumed_on) {
  const char* call = by_submit ? "uring::submit_to" : "uring::resume_on";
  try {
    suspended = true;  // set just before the hand-off: poll() returns after it
    if (by_submit) {
      auto fn = [&fn_ran, kept] {
        fn_ran = true;
      };  // named: g++ 12 destroys a throwing co_await's temporary twice
      co_await uring::submit_to(to, std::move(fn));
    } else {
      co_await uring::resume_on(to);
    }
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find(call), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no longer accepts work"), std::string::npos) << e.what();
    err = e.code().value();
  }
  resumed_on = executor::current();
}

// The target accepts the hop (its CQ or mailbox holds the node) but is destroyed before its loop ever
// runs it: the coroutine travels back to its own executor and the co_await throws ESHUTDOWN there,
// instead of hanging. Both executors live on this thread, so each step happens in a known order.
// `name(executor&)` gives the target as the test hops to it (the executor itself, or its handle).
template <class Name>
void expect_dropped_hop_comes_home(const executor_options& opts, Name name) {
  for (bool by_submit : {false, true}) {
    SCOPED_TRACE(by_submit ? "submit_to" : "resume_on");
    executor home(opts);
    auto target = std::make_unique<executor>(opts);
    bool suspended = false;
    bool fn_ran = false;
    int err = 0;
    executor* resumed_on = nullptr;
    auto token = std::make_shared<int>(0);
    uring::spawn(home, hop_then_record<decltype(name(*target))>(name(*target), by_submit, suspended, err,
                                                                fn_ran, token, resumed_on));
    for (int i = 0; i < 100 && !suspended; ++i) home.poll();
    ASSERT_TRUE(suspended);
    home.poll();  // the turn's enter hands a MSG_RING over to the target's ring, where one is used
    ASSERT_EQ(err, 0) << "the target refused at once; this test is about an accepted hop";
    ASSERT_EQ(resumed_on, nullptr);
    target.reset();  // its last drain finds the hop and sends it home
    for (int i = 0; i < 100 && resumed_on == nullptr; ++i) home.poll();
    EXPECT_EQ(err, ESHUTDOWN);
    EXPECT_EQ(resumed_on, &home);
    EXPECT_FALSE(fn_ran);
    EXPECT_EQ(token.use_count(), 1) << "the submit_to frame and its function are gone";
  }
}

}  // namespace uring::test
