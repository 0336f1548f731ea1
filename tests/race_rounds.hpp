// race_rounds.hpp — a thread that races the test, round by round: the test opens round r, the thread runs
// its action once for it (as the test does its own part) and marks the round done.
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <utility>

namespace uring::test {

class race_rounds {
 public:
  explicit race_rounds(std::function<void(int)> act)
      : act_(std::move(act)), thread_([this] {
          for (int seen = 0; !quit_.load();) {
            const int r = round_.load();
            if (r <= seen) {
              std::this_thread::yield();
              continue;
            }
            seen = r;
            act_(r);
            round_ = -r;
          }
        }) {}
  race_rounds(const race_rounds&) = delete;
  race_rounds& operator=(const race_rounds&) = delete;
  ~race_rounds() {
    quit_ = true;
    thread_.join();
  }

  // Round r (1, 2, ...): the thread acts for it now.
  void open(int r) { round_ = r; }
  [[nodiscard]] bool done(int r) const { return round_.load() == -r; }

 private:
  std::function<void(int)> act_;
  std::atomic<int> round_{0};
  std::atomic<bool> quit_{false};
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace uring::test
