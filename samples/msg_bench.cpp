// uring-msgbench: thread-to-thread messaging on your machine, with this library.
//
//   uring-msgbench [--pattern pingpong|stream|bidir] [--api raw|resume|channel]
//                  [--mode native|defer|emulated|mailbox] [--messages N] [--json]
//
// pingpong: a token goes back and forth (raw send/inbox, a coroutine hopping with resume_on, or two
// channels); prints round trips/s and the round-trip latency percentiles. stream: one executor sends N
// messages to the other (raw, channel) or N coroutines hop one way (resume); prints messages/s. bidir:
// both executors send N to each other at once (raw, channel); prints messages/s counting both ways.
// --mode defer is native with SINGLE_ISSUER|DEFER_TASKRUN, mailbox native with MSG_RING disabled. The
// kernel features used are printed too.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
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
  bool json = false;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: uring-msgbench [--pattern pingpong|stream|bidir] [--api raw|resume|channel]\n"
               "                      [--mode native|defer|emulated|mailbox] [--messages N] [--json]\n");
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
            (c.mode == "native" || c.mode == "defer" || c.mode == "emulated" || c.mode == "mailbox") && c.messages > 0;
  if (!ok) usage(2);
  return c;
}

struct result {
  double seconds = 0;
  bool complete = true;  // every message arrived
  std::vector<double> round_trip_us;  // pingpong only
};

// Every round trip is timed, so the percentiles come from the whole run.
uring::task<void> pingpong_resume(uring::executor& a, uring::executor& b, long n, result& r, std::latch& done) {
  r.round_trip_us.reserve(static_cast<std::size_t>(n));
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    co_await uring::resume_on(b);
    co_await uring::resume_on(a);
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  done.count_down();
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
    (void)co_await from.receive();
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  to.close();
  done.count_down();
}

uring::task<void> stream_send(uring::channel<long>& ch, long n) {
  for (long i = 0; i < n; ++i) co_await ch.send(i);
  ch.close();
}

uring::task<void> stream_receive(uring::channel<long>& ch, long n, result& r, std::latch& done) {
  auto start = clock_type::now();
  long got = 0;
  while (co_await ch.receive()) ++got;
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (got != n) {
    std::fprintf(stderr, "uring-msgbench: received %ld of %ld\n", got, n);
    r.complete = false;
  }
  done.count_down();
}

// n coroutines start on a and each hops to b once: n one-way hand-offs.
uring::task<void> stream_resume(uring::executor& a, uring::executor& b, long n, result& r, std::latch& done) {
  std::latch arrived(n);
  auto start = clock_type::now();
  for (long i = 0; i < n; ++i) {
    uring::spawn([](uring::executor& to, std::latch& l) -> uring::task<void> {
      co_await uring::resume_on(to);
      l.count_down();
    }(b, arrived));
    if (i % 256 == 255) co_await uring::nop();  // let each batch go out in one enter
  }
  while (!arrived.try_wait()) co_await uring::nop();
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  (void)a;
  done.count_down();
}

// Raw messages: the token is the sequence number; the echo sends back what it gets.
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
    co_await uring::send(b, 1, static_cast<std::uint64_t>(i));
    if ((co_await in.receive()).data != static_cast<std::uint64_t>(i)) r.complete = false;
    r.round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  done.count_down();
}

uring::task<void> send_raw(uring::executor& to, long n) {
  for (long i = 0; i < n; ++i) co_await uring::send(to, 1, static_cast<std::uint64_t>(i));
}

// Receives n messages in order (0, 1, ...); the clock runs from `start` to the last one.
uring::task<void> receive_raw(long n, clock_type::time_point start, result& r, std::latch& done) {
  uring::inbox in(*uring::executor::current());
  for (long i = 0; i < n; ++i) {
    if ((co_await in.receive()).data != static_cast<std::uint64_t>(i)) r.complete = false;
  }
  r.seconds = std::max(r.seconds, std::chrono::duration<double>(clock_type::now() - start).count());
  done.count_down();
}

uring::task<void> receive_channel(uring::channel<long>& ch, long n, clock_type::time_point start, result& r,
                                  std::latch& done) {
  for (long i = 0; i < n; ++i) {
    auto v = co_await ch.receive();
    if (!v || *v != i) r.complete = false;
  }
  r.seconds = std::max(r.seconds, std::chrono::duration<double>(clock_type::now() - start).count());
  done.count_down();
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
  result r;
  uring::executor_plan plan;
  {
    uring::executor_group group(2, opts, /*pin_threads=*/true);
    plan = group.at(0).plan();
    std::latch done(c.pattern == "bidir" ? 2 : 1);
    uring::channel<long> ab(group.at(1), 1024), ba(group.at(0), 1024);
    const auto start = clock_type::now();
    if (c.api == "raw" && c.pattern == "pingpong") {
      uring::spawn(group.at(1), echo_raw(group.at(0), c.messages));
      uring::spawn(group.at(0), pingpong_raw(group.at(1), c.messages, r, done));
    } else if (c.api == "raw") {
      uring::spawn(group.at(1), receive_raw(c.messages, start, r, done));
      uring::spawn(group.at(0), send_raw(group.at(1), c.messages));
      if (c.pattern == "bidir") {
        uring::spawn(group.at(0), receive_raw(c.messages, start, r, done));
        uring::spawn(group.at(1), send_raw(group.at(0), c.messages));
      }
    } else if (c.pattern == "bidir") {
      uring::spawn(group.at(1), receive_channel(ab, c.messages, start, r, done));
      uring::spawn(group.at(0), receive_channel(ba, c.messages, start, r, done));
      uring::spawn(group.at(0), stream_send(ab, c.messages));
      uring::spawn(group.at(1), stream_send(ba, c.messages));
    } else if (c.pattern == "pingpong" && c.api == "resume") {
      uring::spawn(group.at(0), pingpong_resume(group.at(0), group.at(1), c.messages, r, done));
    } else if (c.pattern == "pingpong") {
      uring::spawn(group.at(1), echo(ab, ba));
      uring::spawn(group.at(0), pingpong_channel(ab, ba, c.messages, r, done));
    } else if (c.api == "channel") {
      uring::spawn(group.at(1), stream_receive(ab, c.messages, r, done));
      uring::spawn(group.at(0), stream_send(ab, c.messages));
    } else {
      uring::spawn(group.at(0), stream_resume(group.at(0), group.at(1), c.messages, r, done));
    }
    done.wait();
    ab.close();
    ba.close();
  }
  const long total = c.pattern == "bidir" ? 2 * c.messages : c.messages;
  double rate = static_cast<double>(total) / r.seconds;
  double p50 = percentile(r.round_trip_us, 0.50), p99 = percentile(r.round_trip_us, 0.99),
         p999 = percentile(r.round_trip_us, 0.999);
  // Channels keep values in an in-process queue; only their doorbell travels, by MSG_RING where it can.
  std::string transport = !plan.msg_ring ? "mailbox"
                          : c.api == "channel" ? "queue + MSG_RING doorbell"
                          : c.api == "raw" && !uring::probed_kernel().msg_ring_flags_pass ? "mailbox (no MSG_RING flags pass)"
                                                                                    : "MSG_RING";
  if (c.json) {
    std::printf("{\"pattern\":\"%s\",\"api\":\"%s\",\"mode\":\"%s\",\"messages\":%ld,\"seconds\":%.6f,"
                "\"per_second\":%.1f,\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"transport\":\"%s\"}\n",
                c.pattern.c_str(), c.api.c_str(), c.mode.c_str(), total, r.seconds, rate, p50, p99, p999,
                transport.c_str());
  } else {
    std::printf("%s over %s (%s, transport %s): %ld messages in %.3f s = %.3f M/s\n", c.pattern.c_str(),
                c.api.c_str(), c.mode.c_str(), transport.c_str(), total, r.seconds, rate / 1e6);
    if (c.pattern == "pingpong") std::printf("round trip: p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n", p50, p99, p999);
    std::printf("plan: %s\n", uring::to_string(plan).c_str());
  }
  return r.complete ? 0 : 1;
}
