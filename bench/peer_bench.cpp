// The peers: what an application could use instead of our messaging, on the same three
// patterns, two threads each (items = messages; pingpong: round trips; bidir: both directions).
//   <pattern>/eventfd_queue   a mutex-guarded queue per receiver, an eventfd written only when the
//                             receiver is about to block on it (peer_queues.hpp)
//   <pattern>/spsc_spin       a bounded lock-free SPSC ring per direction, both threads spinning (never
//                             sleeping; every 64th idle spin yields, see spin_guard)
//   <pattern>/asio_post       two boost::asio::io_context, each run() on its own thread; every message a
//                             posted lambda, every 64th received posts a credit back to the sender
//   bidir/raw_msg_ring        two liburing rings (the executor's default flags), each thread
//                             submitting 64 MSG_RINGs per enter to the other while reaping its own CQ
//                             (pingpong and stream: msg_bench.cpp and stream_bench.cpp)
// Streams and bidir keep at most 1024 messages in flight per direction (our credit window): the
// receiver publishes its count, the sender sends at most 64 at once and never more than the window.
// Receivers check that messages arrive in order; a benchmark whose messages did not reports an error.
#include <benchmark/benchmark.h>
#include <liburing.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "peer_queues.hpp"

namespace {

using uring::bench::spin_guard;

constexpr std::uint64_t kWindow = 1024;
constexpr std::uint64_t kBatch = 64;

enum class pattern { pingpong, stream, bidir };

// Each transport offers two endpoints; endpoint i sends to the other and receives what it sent.
//   send(first, k): messages first .. first+k-1
//   receive(block): takes what has arrived (waiting for at least one with `block`), returns how many;
//                   clears ok() if one arrived out of order.

class msg_ring_transport {
 public:
  class endpoint {
   public:
    void send(std::uint64_t first, std::uint64_t k) {
      for (std::uint64_t i = 0; i < k; ++i) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        io_uring_prep_msg_ring(sqe, peer_fd_, 0, first + i, 0);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
      }
      io_uring_submit(&ring_);
    }
    std::uint64_t receive(bool block) {
      io_uring_cqe* cqe;
      if (block && io_uring_wait_cqe(&ring_, &cqe) != 0) throw std::runtime_error("io_uring_wait_cqe");
      unsigned head, n = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        if (cqe->res < 0) throw std::runtime_error("IORING_OP_MSG_RING failed");  // a sender's own failure
        ok_ = ok_ && cqe->user_data == expected_;
        ++expected_;
        ++n;
      }
      io_uring_cq_advance(&ring_, n);
      return n;
    }
    bool ok() const { return ok_; }

   private:
    friend class msg_ring_transport;
    io_uring ring_{};
    int peer_fd_ = -1;
    std::uint64_t expected_ = 0;
    bool ok_ = true;
  };

  msg_ring_transport() {
    io_uring_params p{};
    // The executor's default setup flags (SUBMIT_ALL|COOP_TASKRUN), so that only the library differs.
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
    p.cq_entries = 4 * kWindow;
    for (endpoint& e : ends_) {
      io_uring_params q = p;
      if (io_uring_queue_init_params(256, &e.ring_, &q) != 0) throw std::runtime_error("io_uring_queue_init");
    }
    ends_[0].peer_fd_ = ends_[1].ring_.ring_fd;
    ends_[1].peer_fd_ = ends_[0].ring_.ring_fd;
  }
  msg_ring_transport(const msg_ring_transport&) = delete;
  msg_ring_transport& operator=(const msg_ring_transport&) = delete;
  ~msg_ring_transport() {
    for (endpoint& e : ends_) io_uring_queue_exit(&e.ring_);
  }
  endpoint& end(int i) { return ends_[i]; }

 private:
  endpoint ends_[2];
};

class eventfd_transport {
 public:
  class endpoint {
   public:
    void send(std::uint64_t first, std::uint64_t k) {
      for (std::uint64_t i = 0; i < k; ++i) peer_->push(first + i);
    }
    std::uint64_t receive(bool block) {
      mine_->pop_all(batch_, block);
      for (std::uint64_t v : batch_) ok_ = ok_ && v == expected_++;
      return batch_.size();
    }
    bool ok() const { return ok_; }

   private:
    friend class eventfd_transport;
    uring::bench::eventfd_queue<std::uint64_t>* mine_ = nullptr;
    uring::bench::eventfd_queue<std::uint64_t>* peer_ = nullptr;
    std::vector<std::uint64_t> batch_;
    std::uint64_t expected_ = 0;
    bool ok_ = true;
  };

  eventfd_transport() {
    ends_[0].mine_ = ends_[1].peer_ = &queues_[0];
    ends_[1].mine_ = ends_[0].peer_ = &queues_[1];
  }
  endpoint& end(int i) { return ends_[i]; }

 private:
  uring::bench::eventfd_queue<std::uint64_t> queues_[2];
  endpoint ends_[2];
};

class spsc_transport {
 public:
  class endpoint {
   public:
    void send(std::uint64_t first, std::uint64_t k) {
      spin_guard guard("spsc_spin send");
      for (std::uint64_t i = 0; i < k; ++i) {
        while (!out_->try_push(first + i)) guard.tick();
        guard.progress();
      }
    }
    std::uint64_t receive(bool block) {
      spin_guard guard("spsc_spin receive");
      std::uint64_t n = 0, v;
      for (;;) {
        while (in_->try_pop(v)) {
          ok_ = ok_ && v == expected_++;
          ++n;
        }
        if (n != 0 || !block) return n;
        guard.tick();
      }
    }
    bool ok() const { return ok_; }

   private:
    friend class spsc_transport;
    uring::bench::spsc_ring<std::uint64_t>* in_ = nullptr;
    uring::bench::spsc_ring<std::uint64_t>* out_ = nullptr;
    std::uint64_t expected_ = 0;
    bool ok_ = true;
  };

  spsc_transport()
      : rings_{uring::bench::spsc_ring<std::uint64_t>(kWindow),
               uring::bench::spsc_ring<std::uint64_t>(kWindow)} {
    ends_[0].in_ = ends_[1].out_ = &rings_[0];
    ends_[1].in_ = ends_[0].out_ = &rings_[1];
  }
  endpoint& end(int i) { return ends_[i]; }

 private:
  uring::bench::spsc_ring<std::uint64_t> rings_[2];
  endpoint ends_[2];
};

// Sends `to_send` and receives `to_receive`, both at once: at most kBatch per send, at most kWindow
// unreceived. It blocks for incoming messages only when it has nothing to send (done, or no room); the
// peer then owes it messages or room, and room comes from its own receiving.
template <class Endpoint>
void exchange(Endpoint& me, std::uint64_t to_send, std::uint64_t to_receive,
              std::atomic<std::uint64_t>& my_count, const std::atomic<std::uint64_t>& peer_count) {
  std::uint64_t sent = 0, got = 0;
  spin_guard guard("exchange");
  while (sent < to_send || got < to_receive) {
    bool can_send = false;
    if (sent < to_send) {
      std::uint64_t room = kWindow - (sent - peer_count.load(std::memory_order_acquire));
      std::uint64_t k = std::min({kBatch, to_send - sent, room});
      if (k != 0) {
        me.send(sent, k);
        sent += k;
        can_send = sent < to_send;
      }
    }
    if (got < to_receive) {
      got += me.receive(!can_send);
      my_count.store(got, std::memory_order_release);
    } else if (!can_send && sent < to_send) {
      guard.tick();  // waiting for room; the receiver is not sending to us
      continue;
    }
    guard.progress();
  }
}

template <class Transport>
void run_side(Transport& t, int me, pattern p, std::uint64_t n, std::atomic<std::uint64_t>* counts) {
  auto& e = t.end(me);
  if (p == pattern::pingpong) {
    for (std::uint64_t i = 0; i < n; ++i) {
      if (me == 0) e.send(i, 1);
      std::uint64_t got = 0;
      while (got == 0) got = e.receive(true);
      if (got != 1) throw std::logic_error("pingpong: more than one message in flight");
      if (me == 1) e.send(i, 1);
    }
    return;
  }
  const std::uint64_t to_send = p == pattern::bidir || me == 0 ? n : 0;
  const std::uint64_t to_receive = p == pattern::bidir || me == 1 ? n : 0;
  exchange(e, to_send, to_receive, counts[me], counts[1 - me]);
}

template <class Transport>
void BM_peer(benchmark::State& state, pattern p) {
  const auto n = static_cast<std::uint64_t>(state.max_iterations);
  Transport t;
  std::atomic<std::uint64_t> counts[2] = {0, 0};
  while (state.KeepRunningBatch(state.max_iterations)) {
    std::thread one([&] { run_side(t, 1, p, n, counts); });
    std::thread zero([&] { run_side(t, 0, p, n, counts); });
    zero.join();
    one.join();
  }
  if (!t.end(0).ok() || !t.end(1).ok()) state.SkipWithError("messages arrived out of order");
  state.SetItemsProcessed(p == pattern::bidir ? 2 * state.iterations() : state.iterations());
}

// Boost.Asio: one io_context per thread, kept running by a work guard that each side drops on its own
// thread once it has everything it expects.
struct asio_side {
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard{
      io.get_executor()};
  int pending = 0;  // final receives and final credits still expected (this side's thread)
  void settle() {
    if (--pending == 0) guard.reset();
  }
};

// One direction: `from` posts lambdas to `to`; `to` posts a credit back every kBatch.
struct asio_flow {
  asio_side* from;
  asio_side* to;
  std::uint64_t n;
  std::uint64_t sent = 0, acked = 0;  // from's thread
  std::uint64_t received = 0;         // to's thread
  bool ok = true;

  void pump() {
    for (; sent < n && sent - acked < kWindow; ++sent) {
      boost::asio::post(to->io, [this, seq = sent] { arrive(seq); });
    }
  }
  void arrive(std::uint64_t seq) {
    ok = ok && seq == received;
    ++received;
    if (received % kBatch == 0 || received == n) {
      boost::asio::post(from->io, [this, r = received] {
        acked = r;
        if (acked == n) {
          from->settle();
        } else {
          pump();
        }
      });
    }
    if (received == n) to->settle();
  }
};

void BM_asio(benchmark::State& state, pattern p) {
  const auto n = static_cast<std::uint64_t>(state.max_iterations);
  asio_side a, b;
  std::vector<asio_flow> flows;
  std::uint64_t rounds = 0;
  std::function<void()> ping;  // pingpong: a posts to b, which posts back to a
  if (p == pattern::pingpong) {
    a.pending = b.pending = 1;
    ping = [&] {
      if (rounds++ == n) {
        a.settle();
        boost::asio::post(b.io, [&b] { b.settle(); });
        return;
      }
      boost::asio::post(b.io, [&] { boost::asio::post(a.io, ping); });
    };
  } else {
    flows.push_back({&a, &b, n});
    if (p == pattern::bidir) flows.push_back({&b, &a, n});
    for (asio_flow& f : flows) ++f.from->pending, ++f.to->pending;
  }
  while (state.KeepRunningBatch(state.max_iterations)) {
    if (p == pattern::pingpong) {
      boost::asio::post(a.io, ping);
    } else {
      for (asio_flow& f : flows) boost::asio::post(f.from->io, [&f] { f.pump(); });
    }
    std::thread tb([&] { b.io.run(); });
    std::thread ta([&] { a.io.run(); });
    ta.join();
    tb.join();
  }
  for (const asio_flow& f : flows) {
    if (!f.ok || f.received != n) state.SkipWithError("messages lost or out of order");
  }
  state.SetItemsProcessed(p == pattern::bidir ? 2 * state.iterations() : state.iterations());
}

void add(const char* name, void (*fn)(benchmark::State&, pattern), pattern p) {
  benchmark::RegisterBenchmark(name, [fn, p](benchmark::State& st) { fn(st, p); })->UseRealTime();
}

const bool registered = [] {
  add("pingpong/eventfd_queue/1", BM_peer<eventfd_transport>, pattern::pingpong);
  add("pingpong/spsc_spin/1", BM_peer<spsc_transport>, pattern::pingpong);
  add("pingpong/asio_post/1", BM_asio, pattern::pingpong);
  add("stream/eventfd_queue/64", BM_peer<eventfd_transport>, pattern::stream);
  add("stream/spsc_spin/64", BM_peer<spsc_transport>, pattern::stream);
  add("stream/asio_post/64", BM_asio, pattern::stream);
  add("bidir/raw_msg_ring/64", BM_peer<msg_ring_transport>, pattern::bidir);
  add("bidir/eventfd_queue/64", BM_peer<eventfd_transport>, pattern::bidir);
  add("bidir/spsc_spin/64", BM_peer<spsc_transport>, pattern::bidir);
  add("bidir/asio_post/64", BM_asio, pattern::bidir);
  return true;
}();

}  // namespace
