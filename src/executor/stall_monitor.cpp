// executor/stall_monitor.cpp — the stall watchdog: one monitor thread for the process, started with the
// first watched executor and ended with the last, that samples each watched loop's heartbeat.
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/executor_state.hpp"

namespace uring {
namespace detail {

namespace {

using clock = std::chrono::steady_clock;

struct watched {
  loop_heartbeat beat;
  std::chrono::milliseconds after;
  std::function<void(const stall_report&)> report;
  std::uint64_t turns = 0;  // the heartbeat when last seen to move
  clock::time_point since;  // when it was last seen to move (or to sleep, or to stop)
  bool reported = false;    // this stall was reported
};

// The symbol of a resume function, demangled, or its module and offset in it, or its address.
std::string symbol_of(const void* fn) {
  if (fn == nullptr) return "nothing yet";
  Dl_info info{};
  if (::dladdr(fn, &info) != 0 && info.dli_sname != nullptr) {
    int status = 0;
    char* name = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string out = status == 0 && name != nullptr ? name : info.dli_sname;
    std::free(name);
    return out;
  }
  char buf[64];
  if (info.dli_fname != nullptr) {  // for addr2line -f -C -e MODULE OFFSET
    std::snprintf(
        buf, sizeof buf, "+%#zx",
        static_cast<std::size_t>(static_cast<const char*>(fn) - static_cast<const char*>(info.dli_fbase)));
    return info.dli_fname + std::string(buf);
  }
  std::snprintf(buf, sizeof buf, "%p", fn);
  return buf;
}

class stall_monitor {
 public:
  // Never destroyed: an executor still watched when the process exits keeps its thread running.
  static stall_monitor& instance() {
    static auto* m = new stall_monitor;
    return *m;
  }

  void add(const loop_heartbeat& beat, std::chrono::milliseconds after,
           std::function<void(const stall_report&)> r) {
    std::unique_lock lock(m_);
    list_.reserve(list_.size() + 1);  // what may throw comes first: a failed add leaves nothing behind
    if (!thread_.joinable()) {
      stopping_ = false;
      thread_ = std::thread([this] { loop(); });
    }
    list_.push_back(watched{beat, after, std::move(r), 0, clock::now(), false});
    wake_.notify_one();  // the period may be shorter now
  }

  void remove(const void* key) noexcept {
    std::thread ending;
    {
      std::lock_guard lock(m_);
      std::erase_if(list_, [&](const watched& w) { return w.beat.key == key; });
      if (!list_.empty()) return;
      stopping_ = true;
      ending = std::move(thread_);
    }
    wake_.notify_one();
    if (ending.joinable()) ending.join();
  }

 private:
  void loop() {
    std::unique_lock lock(m_);
    while (!stopping_) {
      auto period = std::chrono::milliseconds(250);
      for (const watched& w : list_)
        period = std::min(period, std::max(w.after / 4, std::chrono::milliseconds(5)));
      wake_.wait_for(lock, period);
      if (stopping_) break;
      const auto now = clock::now();
      std::vector<std::pair<std::function<void(const stall_report&)>*, stall_report>> due;
      for (watched& w : list_) {
        const std::uint64_t turns = w.beat.turns->load(std::memory_order_relaxed);
        if (turns != w.turns || !w.beat.looping->load(std::memory_order_relaxed) ||
            w.beat.sleeping->load(std::memory_order_relaxed)) {
          w.turns = turns;
          w.since = now;
          w.reported = false;
          continue;
        }
        const auto stalled = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.since);
        if (w.reported || stalled < w.after) continue;
        w.reported = true;
        due.emplace_back(
            &w.report,
            stall_report{stalled, symbol_of(w.beat.last_resumed->load(std::memory_order_relaxed))});
      }
      // Reported under the lock: an executor being destroyed waits in remove() until its reports are out.
      for (auto& [report, what] : due) {
        try {
          if (*report) {
            (*report)(what);
          } else {
            std::fprintf(
                stderr,
                "uring: an executor's loop has not come back for %lldms (a coroutine blocks the thread "
                "or computes without awaiting); last resumed: %s\n",
                static_cast<long long>(what.stalled_for.count()), what.last_resumed.c_str());
          }
        } catch (...) {
          std::fprintf(stderr, "uring: the stall report failed\n");
        }
      }
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::vector<watched> list_;
  std::thread thread_;
  bool stopping_ = false;
};

}  // namespace

void watch_stalls(const loop_heartbeat& beat, std::chrono::milliseconds after,
                  std::function<void(const stall_report&)> report) {
  stall_monitor::instance().add(beat, after, std::move(report));
}

void unwatch_stalls(const void* key) noexcept { stall_monitor::instance().remove(key); }

}  // namespace detail
}  // namespace uring
