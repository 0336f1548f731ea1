// channel_util.hpp — what the channel tests share (channel_test, channel_race_test): the Channel suite's
// fixture, and numbered values from several senders checked for loss, repeats and order per sender.
#pragma once

#include <cstddef>
#include <latch>
#include <vector>

#include <uring/uring.hpp>

#include "backends.hpp"

namespace uring::test {

class Channel : public backend_test {};

struct item {
  int sender;
  int seq;
};

// What a receiver saw of several senders' numbered values.
struct per_sender {
  explicit per_sender(int senders) : next(static_cast<std::size_t>(senders), 0) {}
  void saw(int sender, int seq) {
    int& expected = next.at(static_cast<std::size_t>(sender));
    if (seq != expected) ++bad;  // a gap is a loss or a reordering, a repeat a duplicate
    expected = seq + 1;
    ++total;
  }
  std::vector<int> next;  // per sender: values received so far, when all came in order
  int bad = 0;
  int total = 0;
};

// Receives until the channel is closed and drained.
inline task<void> check_senders(channel<item>& ch, per_sender& seen, std::latch& done) {
  while (auto v = co_await ch.receive()) seen.saw(v->sender, v->seq);
  done.count_down();
}

}  // namespace uring::test
