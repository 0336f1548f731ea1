/// @file
/// uring/executor_options.hpp — what a user can ask of an executor.
///
/// Provides: uring::executor_options (also spelled executor::options), uring::ring_flags,
/// uring::backend_kind, uring::feature and uring::feature_set (the allowlist: uring/op_allowlist.hpp).
/// Threads: plain values; any thread.
///
/// The request is not the outcome: make_plan (uring/plan.hpp) combines it with what the kernel can do and
/// with the URING_BACKEND / URING_DISABLE environment overrides, and records why it chose what it chose.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "uring/inflight.hpp"
#include "uring/op_allowlist.hpp"

namespace uring {

/// io_uring setup flags an executor may ask for. Those the kernel refuses are dropped (see
/// executor::dropped_flags()). Minimum kernels: submit_all 5.18, coop_taskrun 5.19, single_issuer 6.0,
/// defer_taskrun 6.1 (requires single_issuer).
enum class ring_flags : std::uint32_t {
  none = 0,                 ///< no flag
  submit_all = 1u << 0,     ///< keep submitting the batch past an SQE that fails to prepare
  coop_taskrun = 1u << 1,   ///< no IPI to interrupt the owner thread for task work
  single_issuer = 1u << 2,  ///< only the owner thread submits (always true for us)
  defer_taskrun = 1u << 3,  ///< task work runs only when the owner enters to wait
};
///@{
/// Combine, intersect and complement ring_flags as bit sets.
constexpr ring_flags operator|(ring_flags a, ring_flags b) noexcept {
  return ring_flags(std::uint32_t(a) | std::uint32_t(b));
}
constexpr ring_flags operator&(ring_flags a, ring_flags b) noexcept {
  return ring_flags(std::uint32_t(a) & std::uint32_t(b));
}
constexpr ring_flags operator~(ring_flags a) noexcept { return ring_flags(~std::uint32_t(a)); }
///@}
/// True when `f` has any flag set.
constexpr bool any(ring_flags f) noexcept { return f != ring_flags::none; }
/// The flags' io_uring names joined by '|' ("SINGLE_ISSUER|DEFER_TASKRUN"), "none" for none.
std::string to_string(ring_flags f);

/// Which implementation of "a ring" an executor drives.
enum class backend_kind : std::uint8_t {
  automatic,  ///< native where io_uring works, emulated otherwise (the probe says why)
  native,     ///< real io_uring; construction fails with the kernel's reason if it is unusable
  emulated,   ///< the in-process emulation of the same semantics (epoll, non-blocking syscalls, timers)
};
/// "auto", "native" or "emulated".
std::string to_string(backend_kind k);

/// Kernel features a user or operator may turn off, to test fallbacks or work around a kernel bug.
/// Names (for URING_DISABLE) are the enumerators' names.
enum class feature : std::uint32_t {
  registered_ring = 1u << 0,  ///< io_uring_register_ring_fd
  msg_ring = 1u << 1,         ///< IORING_OP_MSG_RING between executors (else mailbox + eventfd)
  send_msg_ring = 1u << 2,    ///< IORING_REGISTER_SEND_MSG_RING from threads without a ring
  submit_all = 1u << 3,       ///< the ring_flags of the same names
  coop_taskrun = 1u << 4,     ///< as submit_all
  single_issuer = 1u << 5,    ///< as submit_all
  defer_taskrun = 1u << 6,    ///< as submit_all
  eventfd = 1u << 7,          ///< io_uring_register_eventfd
  buf_ring = 1u << 8,         ///< provided buffer rings
  multishot = 1u << 9,        ///< multishot accept/recv, and the ticker's multishot timeout
  send_zc = 1u << 10,         ///< zero-copy send
  napi = 1u << 11,            ///< NAPI busy polling (IORING_REGISTER_NAPI; emulated: epoll's EPIOCSPARAMS)
  read_multishot = 1u << 12,  ///< IORING_OP_READ_MULTISHOT (else read_stream reads one chunk per request)
  sqpoll = 1u << 13,          ///< a kernel thread polling the submission queue (IORING_SETUP_SQPOLL)
  recv_bundle = 1u << 14,  ///< a leased receive filling several pool buffers at once (IORING_RECVSEND_BUNDLE)
  recv_incremental =
      1u << 15,  ///< pool buffers shared by many chunks, consumed by the kernel (IOU_PBUF_RING_INC)
  send_bundle =
      1u << 16,  ///< a send_queue's bundled send from a buffer ring of its own (IORING_RECVSEND_BUNDLE)
};

/// A set of features (the executor_options::disable list, the URING_DISABLE variable). Threads: a plain
/// value.
class feature_set {
 public:
  /// The empty set.
  constexpr feature_set() noexcept = default;
  /// The set of one feature (implicit, so a single feature passes where a set is asked for).
  constexpr feature_set(feature f) noexcept : bits_(static_cast<std::uint32_t>(f)) {}  // NOLINT
  /// The union.
  constexpr feature_set operator|(feature_set o) const noexcept { return from_bits(bits_ | o.bits_); }
  /// True when `f` is in the set.
  constexpr bool contains(feature f) const noexcept { return (bits_ & static_cast<std::uint32_t>(f)) != 0; }
  /// True when no feature is in the set.
  constexpr bool empty() const noexcept { return bits_ == 0; }
  ///@{
  /// The set as the enumerators' bits, and back.
  constexpr std::uint32_t bits() const noexcept { return bits_; }
  static constexpr feature_set from_bits(std::uint32_t b) noexcept {
    feature_set s;
    s.bits_ = b;
    return s;
  }
  ///@}
  /// Same features.
  constexpr bool operator==(const feature_set&) const noexcept = default;

 private:
  std::uint32_t bits_ = 0;
};
/// The set of `a` and `b`.
constexpr feature_set operator|(feature a, feature b) noexcept { return feature_set(a) | feature_set(b); }

/// "msg_ring,defer_taskrun" <-> feature_set. Parsing throws std::invalid_argument naming an unknown entry.
feature_set parse_feature_set(const std::string& comma_list);
/// The inverse of parse_feature_set: the names, comma-separated ("none" for the empty set).
std::string to_string(feature_set s);

/// IORING_SETUP_SQPOLL: a kernel thread of the ring's own takes operations from its submission queue as
/// they are written, so a busy executor starts I/O without io_uring_enter. The thread spins while there is
/// work and for `idle` after it, then sleeps until the executor's next submission wakes it (one enter,
/// IORING_ENTER_SQ_WAKEUP). It costs a core while it spins: worth it where the executor has a core to
/// spare and submits steadily (docs/sqpoll.md has the measurements and the recommendation).
struct sqpoll_options {
  /// Ask for the polling thread; the plan records whether it was granted (executor_plan::sqpoll).
  bool enabled = false;
  /// How long the poller spins without work before it sleeps (the kernel's sq_thread_idle). At least 1 ms.
  std::chrono::milliseconds idle{10};
  /// The CPU to pin the poller to (IORING_SETUP_SQ_AFF); -1 leaves it to the scheduler.
  int cpu = -1;
};

/// What a user can ask of an executor; the plan (uring/plan.hpp) records what it got and why. Threads:
/// a plain value.
struct executor_options {
  /// Submission queue entries (rounded up to a power of two by the kernel). More queued operations than
  /// this only cost an extra early submit, never a lost operation.
  unsigned sq_entries = 256;
  /// Completion queue entries; 0 means 4 * sq_entries. Overflow is drained, never dropped.
  unsigned cq_entries = 0;
  /// Plain rings beat SINGLE_ISSUER|DEFER_TASKRUN for cross-ring messaging (bench/README.md, "Raw
  /// messages"), so the default asks only for the flags that never cost throughput.
  ring_flags flags = ring_flags::submit_all | ring_flags::coop_taskrun;
  /// Register the ring fd so that enters skip the fd-table lookup. Off only to measure the difference.
  bool register_ring_fd = true;
  /// URING_BACKEND, when set to native or emulated, overrides this.
  backend_kind backend = backend_kind::automatic;
  /// Features not to use even where the kernel has them; URING_DISABLE adds to this set.
  feature_set disable;
  /// Raw messages (uring/message.hpp): how many messages from one sender may wait in this executor's
  /// inbox (or in the kernel on their way to it) before that sender's send suspends. Bounds the memory a
  /// fast sender can pile up. At least 2.
  unsigned message_window = 1024;
  /// The operations this executor may start (uring/op_allowlist.hpp); empty: all. Anything else fails
  /// with EACCES naming the operation, on every backend; natively the kernel enforces the same list
  /// (IORING_REGISTER_RESTRICTIONS), fixed for the ring's life. Example: {op_kind::read, op_kind::write}.
  op_allowlist allowed_ops;
  /// Opt-in busy polling: before parking in the kernel, an idle loop first hands what it started to the
  /// kernel, then watches its completion queue and mailbox for up to this long (0: park at once). A
  /// message, hand-off or post from another thread then costs no wake-up of a sleeping thread (the ~3-30 us
  /// that dominate a ping-pong) — at the price of a core spinning while idle: for threads on dedicated
  /// cores. It sees MSG_RING messages and completions the kernel posts directly; those that need task work
  /// (COOP_TASKRUN, DEFER_TASKRUN: socket and pipe reads) are seen when the window ends and the loop enters.
  std::chrono::microseconds busy_poll{0};
  /// NAPI busy polling (0: off): while the executor waits for completions, the kernel polls the network
  /// device queues of the sockets it serves for up to this long before it sleeps, trading a core's idle
  /// time for lower receive latency on a real NIC (loopback and virtual devices have no queue to poll, so
  /// it changes nothing there). Natively IORING_REGISTER_NAPI (kernel 6.9+); emulated, the same settings on
  /// its epoll fd (EPIOCSPARAMS, 6.9+, with the kernel's default budget of 8 packets). Where the kernel
  /// lacks it the executor runs without, and plan() says why. At most 4294 s.
  std::chrono::microseconds napi_busy_poll{0};
  /// With napi_busy_poll: ask the device to defer its interrupts while the executor polls (the kernel's
  /// prefer_busy_poll), for the least interrupt overhead under steady load.
  bool napi_prefer_busy_poll = false;
  /// A kernel thread polling the submission queue (native only, kernel 5.11+ without privileges). SQPOLL
  /// rings run task work on that thread, so the kernel refuses COOP_TASKRUN and DEFER_TASKRUN with it: the
  /// plan drops them, with a note. The emulated backend ignores it, with a note.
  sqpoll_options sqpoll;
  /// Slots in the executor's table of direct descriptors (uring/direct.hpp; io_uring's registered files),
  /// registered empty at start-up. 0: no table (install_direct fails with ENXIO). The kernel caps it at
  /// RLIMIT_NOFILE.
  unsigned direct_files = 0;
  /// The stuck-operation watchdog (0: off): an operation in flight for longer than this (a sleep or other
  /// timer excepted: its age is what it asked for) is reported once,
  /// through `on_stuck` on the executor's thread, or as a line on stderr when that is empty
  /// ("uring: operation in flight past 1000ms: read fd=7 age=1004ms"). The executor checks at a quarter
  /// of this period (at least every 10 ms) with a timer of its own, so an idle loop reports too, up to
  /// that much late. An executor whose allowlist refuses timeouts cannot run it: it says so once.
  std::chrono::milliseconds stuck_after{0};
  /// Called with the stuck operation, on the executor's thread; empty: a line on stderr.
  std::function<void(const inflight_op&)> on_stuck;
  /// The stall watchdog (0: off): a loop that has been running coroutines for longer than this without
  /// coming back to the kernel (a coroutine blocks the thread, or computes without awaiting) is reported
  /// once per stall, from a monitor thread (the executor's own is busy): through `on_stall`, or as a line
  /// on stderr when that is empty. Checked every quarter of the period (at least every 5 ms). busy_poll
  /// spinning counts as running: keep it shorter than this.
  std::chrono::milliseconds stall_after{0};
  /// Called with the stall, from the monitor thread; empty: a line on stderr.
  std::function<void(const stall_report&)> on_stall;
  /// Histograms (executor::histograms, uring/executor_histograms.hpp): SQEs per submit, CQEs per reap,
  /// time asleep and running coroutines, hops from other executors, and each operation's latency by kind.
  /// Off by default: they cost clock reads per turn and per reap and a bucket increment per operation
  /// (bench/README.md, "Histograms").
  bool histograms = false;
};

}  // namespace uring
