// uring-msgbench: thread-to-thread messaging on your machine, with this library.
//
//   uring-msgbench [--pattern pingpong|stream|bidir] [--api raw|resume|channel]
//                  [--mode native|defer|emulated|mailbox] [--messages N] [--threads T] [--json]
//
// T executors (default 2), each on a thread of its own, pinned. N counts per sender (per pair for
// pingpong). pingpong: T/2 pairs, a token going back and forth in each (raw send/inbox, a coroutine
// hopping with resume_on, or two channels); prints round trips/s over all pairs and the round-trip latency
// percentiles. stream: the other T-1 executors each send N messages to executor 0 (raw, channel) or N
// coroutines each hop there (resume); prints messages/s. bidir: every executor sends N to every other one
// at once (raw, channel); prints messages/s counting every direction. Each receiver checks that every
// sender's messages arrive complete and in order. --mode defer is native with
// SINGLE_ISSUER|DEFER_TASKRUN, mailbox native with MSG_RING disabled. The kernel features used are
// printed too.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <vector>

#include <uring/channel.hpp>
#include <uring/uring.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct config {
  std::string pattern = "pingpong";
  std::string api = "resume";
  std::string mode = "native";
  long messages = 100'000;
  int threads = 2;
  bool json = false;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-msgbench [--pattern pingpong|stream|bidir] [--api raw|resume|channel]\n"
               "                      [--mode native|defer|emulated|mailbox] [--messages N] [--threads T]\n"
               "                      [--json]\n"
               "  --threads T   executors on threads of their own (default 2; pingpong: an even number)\n");
  std::exit(code);
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--pattern") {
      c.pattern = value();
    } else if (a == "--api") {
      c.api = value();
    } else if (a == "--mode") {
      c.mode = value();
    } else if (a == "--messages") {
      c.messages = std::atol(value().c_str());
    } else if (a == "--threads") {
      c.threads = std::atoi(value().c_str());
    } else if (a == "--json") {
      c.json = true;
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      std::fprintf(stderr, "uring-msgbench: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  bool ok = (c.pattern == "pingpong" || c.pattern == "stream" || c.pattern == "bidir") &&
            (c.api == "raw" || c.api == "resume" || c.api == "channel") &&
            !(c.pattern == "bidir" && c.api == "resume") &&
            (c.mode == "native" || c.mode == "defer" || c.mode == "emulated" || c.mode == "mailbox") &&
            c.messages > 0 && c.threads >= 2 && c.threads <= 256 &&
            !(c.pattern == "pingpong" && c.threads % 2 != 0);
  if (!ok) usage(2);
  return c;
}

struct result {
  double seconds = 0;
  bool complete = true;               // every message arrived, each sender's in order
  std::vector<double> round_trip_us;  // pingpong only
};

// Which of a receiver's senders `from` is: the executors other than `to`, numbered from 0.
int sender_slot(int from, int to) { return from < to ? from : from - 1; }

// Each sender's k-th message must carry k: nothing lost, duplicated or reordered per sender.
class order_check {
 public:
  explicit order_check(int senders) : next_(static_cast<std::size_t>(senders), 0) {}
  bool take(long sender, long seq) {
    if (sender < 0 || static_cast<std::size_t>(sender) >= next_.size() ||
        next_[static_cast<std::size_t>(sender)] != seq) {
      return false;
    }
    ++next_[static_cast<std::size_t>(sender)];
    return true;
  }

 private:
  std::vector<long> next_;
};

void finish(result& r, clock_type::time_point start, std::latch& done) {
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  done.count_down();
}

// Every round trip is timed, so the percentiles come from the whole run.
uring::task<void> pingpong_resume(uring::executor& a, uring::executor& b, long n, result& r,
                                  std::latch& done) {
  r.round_trip_us.reserve(static_cast<std::size_t>(n));
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    co_await uring::resume_on(b);
    co_await uring::resume_on(a);
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  finish(r, start, done);
}

uring::task<void> echo(uring::channel<long>& in, uring::channel<long>& out) {
  while (auto v = co_await in.receive()) co_await out.send(*v);
}

uring::task<void> pingpong_channel(uring::channel<long>& to, uring::channel<long>& from, long n, result& r,
                                   std::latch& done) {
  r.round_trip_us.reserve(static_cast<std::size_t>(n));
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    co_await to.send(i);
    if (co_await from.receive() != i) r.complete = false;
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  to.close();  // ends the echo
  finish(r, start, done);
}

// Sender `slot` of the channel's receiver: its k-th value is slot * n + k.
uring::task<void> send_channel(uring::channel<long>& ch, int slot, long n) {
  for (long i = 0; i < n; ++i) co_await ch.send(slot * n + i);
}

uring::task<void> receive_channel(uring::channel<long>& ch, int senders, long n, clock_type::time_point start,
                                  result& r, std::latch& done) {
  order_check order(senders);
  for (long i = 0; i < senders * n; ++i) {
    auto v = co_await ch.receive();
    if (!v || !order.take(*v / n, *v % n)) r.complete = false;
  }
  finish(r, start, done);
}

// n coroutines start here and each hops to `to` once: n one-way hand-offs.
uring::task<void> stream_resume(uring::executor& to, long n, result& r, std::latch& done) {
  std::latch arrived(n);
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    uring::spawn([](uring::executor& target, std::latch& l) -> uring::task<void> {
      co_await uring::resume_on(target);
      l.count_down();
    }(to, arrived));
    if (i % 256 == 255) co_await uring::nop();  // let each batch go out in one enter
  }
  while (!arrived.try_wait()) co_await uring::nop();
  finish(r, start, done);
}

// Raw messages: value = the sender's slot, data = its sequence number; the echo sends back what it gets.
uring::task<void> echo_raw(uring::executor& back, long n) {
  uring::inbox in(*uring::executor::current());
  for (long i = 0; i < n; ++i) {
    uring::message m = co_await in.receive();
    co_await uring::send(back, m.value, m.data);
  }
}

uring::task<void> pingpong_raw(uring::executor& b, long n, result& r, std::latch& done) {
  uring::inbox in(*uring::executor::current());
  r.round_trip_us.reserve(static_cast<std::size_t>(n));
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    co_await uring::send(b, 0, static_cast<std::uint64_t>(i));
    if ((co_await in.receive()).data != static_cast<std::uint64_t>(i)) r.complete = false;
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  finish(r, start, done);
}

uring::task<void> send_raw(uring::executor& to, int slot, long n) {
  for (long i = 0; i < n; ++i) co_await uring::send(to, slot, static_cast<std::uint64_t>(i));
}

// The whole clock runs from `start` (before anything was spawned) to the last message.
uring::task<void> receive_raw(int senders, long n, clock_type::time_point start, result& r,
                              std::latch& done) {
  uring::inbox in(*uring::executor::current());
  order_check order(senders);
  for (long i = 0; i < senders * n; ++i) {
    uring::message m = co_await in.receive();
    if (!order.take(m.value, static_cast<long>(m.data))) r.complete = false;
  }
  finish(r, start, done);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  config c = parse(argc, argv);
  uring::executor_options opts;
  if (c.mode == "emulated") opts.backend = uring::backend_kind::emulated;
  if (c.mode == "defer") {
    opts.backend = uring::backend_kind::native;
    opts.flags = uring::ring_flags::single_issuer | uring::ring_flags::defer_taskrun;
  }
  if (c.mode == "mailbox") {
    opts.backend = uring::backend_kind::native;
    opts.disable = uring::feature::msg_ring;
  }
  const int t = c.threads;
  const long n = c.messages;
  // One result per receiver (per pinger in pingpong): the run takes as long as the slowest.
  std::vector<result> results(static_cast<std::size_t>(t));
  uring::executor_plan plan;
  // to[i] is received on executor i. The channels outlive the group: a frame its shutdown destroys may
  // still be a sender that was let in but not yet resumed, and it leaves its channel on the way out.
  std::vector<std::unique_ptr<uring::channel<long>>> to;
  {
    uring::executor_group group(static_cast<std::size_t>(t), opts, /*pin_threads=*/true);
    plan = group.at(0).plan();
    auto ex = [&](int i) -> uring::executor& { return group.at(static_cast<std::size_t>(i)); };
    auto res = [&](int i) -> result& { return results[static_cast<std::size_t>(i)]; };
    for (int i = 0; i < t; ++i) to.push_back(std::make_unique<uring::channel<long>>(ex(i), 1024));
    auto ch = [&](int i) -> uring::channel<long>& { return *to[static_cast<std::size_t>(i)]; };
    const int finishers = c.pattern == "pingpong" ? t / 2
                          : c.pattern == "bidir"  ? t
                          : c.api == "resume"     ? t - 1  // each sender times its own hops
                                                  : 1;
    std::latch done(finishers);
    const auto start = clock_type::now();
    if (c.pattern == "pingpong") {
      for (int a = 0; a < t; a += 2) {  // the pairs (a, a + 1)
        const int b = a + 1;
        if (c.api == "raw") {
          uring::spawn(ex(b), echo_raw(ex(a), n));
          uring::spawn(ex(a), pingpong_raw(ex(b), n, res(a), done));
        } else if (c.api == "channel") {
          uring::spawn(ex(b), echo(ch(b), ch(a)));
          uring::spawn(ex(a), pingpong_channel(ch(b), ch(a), n, res(a), done));
        } else {
          uring::spawn(ex(a), pingpong_resume(ex(a), ex(b), n, res(a), done));
        }
      }
    } else if (c.pattern == "stream" && c.api == "resume") {
      for (int i = 1; i < t; ++i) uring::spawn(ex(i), stream_resume(ex(0), n, res(i), done));
    } else {
      // stream: executors 1..t-1 send to 0; bidir: every executor to every other one.
      const int receivers = c.pattern == "stream" ? 1 : t;
      for (int r = 0; r < receivers; ++r) {
        if (c.api == "raw") {
          uring::spawn(ex(r), receive_raw(t - 1, n, start, res(r), done));
        } else {
          uring::spawn(ex(r), receive_channel(ch(r), t - 1, n, start, res(r), done));
        }
        for (int s = 0; s < t; ++s) {
          if (s == r) continue;
          if (c.api == "raw") {
            uring::spawn(ex(s), send_raw(ex(r), sender_slot(s, r), n));
          } else {
            uring::spawn(ex(s), send_channel(ch(r), sender_slot(s, r), n));
          }
        }
      }
    }
    done.wait();
    for (auto& c2 : to) c2->close();
  }
  result r;
  for (result& part : results) {
    r.seconds = std::max(r.seconds, part.seconds);
    r.complete = r.complete && part.complete;
    r.round_trip_us.insert(r.round_trip_us.end(), part.round_trip_us.begin(), part.round_trip_us.end());
  }
  if (!r.complete) std::fprintf(stderr, "uring-msgbench: messages lost, duplicated or out of order\n");
  const long total = c.pattern == "pingpong" ? (t / 2) * n
                     : c.pattern == "stream" ? (t - 1) * n
                                             : t * (t - 1L) * n;
  double rate = static_cast<double>(total) / r.seconds;
  double p50 = percentile(r.round_trip_us, 0.50), p99 = percentile(r.round_trip_us, 0.99),
         p999 = percentile(r.round_trip_us, 0.999);
  // Channels keep values in an in-process queue; only their doorbell travels, by MSG_RING where it can.
  std::string transport = !plan.msg_ring       ? "mailbox"
                          : c.api == "channel" ? "queue + MSG_RING doorbell"
                          : c.api == "raw" && !uring::probed_kernel().msg_ring_flags_pass
                              ? "mailbox (no MSG_RING flags pass)"
                              : "MSG_RING";
  if (c.json) {
    std::printf(
        "{\"pattern\":\"%s\",\"api\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"messages\":%ld,"
        "\"seconds\":%.6f,\"per_second\":%.1f,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,"
        "\"transport\":\"%s\"}\n",
        c.pattern.c_str(), c.api.c_str(), c.mode.c_str(), t, total, r.seconds, rate, p50, p99, p999,
        transport.c_str());
  } else {
    std::printf("%s over %s (%s, %d threads, transport %s): %ld messages in %.3f s = %.3f M/s\n",
                c.pattern.c_str(), c.api.c_str(), c.mode.c_str(), t, transport.c_str(), total, r.seconds,
                rate / 1e6);
    if (c.pattern == "pingpong")
      std::printf("round trip: p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n", p50, p99, p999);
    std::printf("plan: %s\n", uring::to_string(plan).c_str());
  }
  return r.complete ? 0 : 1;
}
