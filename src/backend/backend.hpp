// backend.hpp — the private interface between an executor and "a ring".
//
// Provides: detail::backend, detail::completion, detail::make_native_backend,
// detail::send_msg_ring_from_anywhere.
// Threads: a backend is used only by its executor's owner thread.
//
// A backend accepts prepared operations, hands them to the kernel (or its emulation) in batches, and
// delivers CQE-shaped completions. user_data is the operation's address; 0 marks the library's own
// fire-and-forget requests (a cancel), whose completions the executor ignores.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>

#include <sys/uio.h>

#include "backend/napi.hpp"
#include "setup/liburing_compat.hpp"
#include "uring/detail/op_queue.hpp"
#include "uring/executor.hpp"
#include "uring/plan.hpp"

namespace uring::detail {

struct completion {
  std::uint64_t user_data;
  std::int32_t res;
  std::uint32_t flags;

  // res and flags as the one word they are in the CQE (operation::store_result's form).
  [[nodiscard]] std::uint64_t res_and_flags() const noexcept {
    static_assert(offsetof(completion, flags) == offsetof(completion, res) + 4);
    std::uint64_t w;
    std::memcpy(&w, &res, sizeof w);
    return w;
  }
};

// A native ring's completion queue, read by the executor in place (backend::offer_inline_cq): the
// kernel's 16-byte CQEs (laid out as completion), its head (ours to advance) and tail, the SQ flags
// that say the kernel holds more than the ring shows, and the backend's parked completions (first).
struct cq_view {
  const completion* cqes = nullptr;  // the kernel's CQEs, which completion mirrors; null: reap() only
  unsigned* khead = nullptr;
  const unsigned* ktail = nullptr;
  const unsigned* kflags = nullptr;
  unsigned mask = 0;
  unsigned more_flags = 0;     // kflags bits that mean "the kernel holds completions the ring does not show"
  unsigned overflow_flag = 0;  // the kflags bit that means "the CQ overflowed" (executor_stats::cq_overflows)
  const std::deque<completion>* backlog = nullptr;

  [[nodiscard]] unsigned flags() const noexcept { return __atomic_load_n(kflags, __ATOMIC_RELAXED); }
  // The head is ours, but it lives in the ring's shared mapping: its reads are atomic (the same load on
  // x86) because a ring mapped where another thread's ring was unmapped looks to TSan like one object.
  [[nodiscard]] bool empty() const noexcept {
    return __atomic_load_n(khead, __ATOMIC_RELAXED) == __atomic_load_n(ktail, __ATOMIC_ACQUIRE);
  }
  // Copies up to `max` CQEs out of the ring and releases their slots in one store, before any of them is
  // completed: a completion may start work that enters the kernel, and an enter that finds the CQ full
  // parks what the ring holds (moving the head), which must not happen under a walk of the ring in place.
  // `each` sees every copied completion as it is taken (the executor prefetches their operations).
  unsigned take(completion* out, unsigned max) const noexcept {
    return take(out, max, [](const completion&) noexcept {});
  }
  template <class Each>
  unsigned take(completion* out, unsigned max, Each each) const noexcept {
    const unsigned head = __atomic_load_n(khead, __ATOMIC_RELAXED);
    const unsigned n = std::min(__atomic_load_n(ktail, __ATOMIC_ACQUIRE) - head, max);
    // At most two runs of the ring (up to its end, then from its start): no index arithmetic per CQE.
    const unsigned at = head & mask;
    const unsigned first = std::min(n, mask + 1 - at);
    for (const completion *c = cqes + at, *end = c + first; c != end; ++c, ++out) {
      *out = *c;
      each(*out);
    }
    for (const completion *c = cqes, *end = c + (n - first); c != end; ++c, ++out) {
      *out = *c;
      each(*out);
    }
    __atomic_store_n(khead, head + n, __ATOMIC_RELEASE);
    return n;
  }
};

// What only a real ring offers: messages to other rings (IORING_OP_MSG_RING), its SQ and CQ for the
// executor's inline paths, and provided-buffer rings. A native backend is also a native_ring.
class native_ring {
 public:
  virtual ~native_ring() = default;

  // Queues an IORING_OP_MSG_RING to the ring `target_fd` that posts a CQE with user_data `data` there;
  // if it fails, a CQE with user_data `failed` comes back here.
  virtual void send_message(int target_fd, std::uint64_t data, std::uint64_t failed) = 0;
  // Submits what the SQ holds until it has a free entry, for SQEs written in place (write_raw_message).
  virtual void make_sq_room() = 0;
  // This ring's fd, for other rings' messages.
  [[nodiscard]] virtual int ring_fd() const noexcept = 0;
  // Points `q`'s inline path (op_queue::start_inline) at this ring's submission queue.
  virtual void offer_inline_sq(op_queue& q) noexcept = 0;
  // Points `v` at this ring's completion queue, which the executor reads in place. Whenever v.backlog is
  // non-empty or the ring looks empty while *kflags has a more_flags bit, backend::reap() must be used.
  virtual void offer_inline_cq(cq_view& v) noexcept = 0;
  // A provided-buffer ring (IORING_REGISTER_PBUF_RING, kernel 5.19): `entries` (a power of two) slots at
  // `ring` (page-aligned, ours until unregistered) form buffer group `group`, which recv_multishot picks
  // from; `flags` go to the registration (kPbufRingInc: consumed incrementally). 0 or -errno (-EEXIST: the
  // group is taken).
  virtual int register_buf_ring(void* ring, unsigned entries, std::uint16_t group, std::uint16_t flags) = 0;
  virtual int unregister_buf_ring(std::uint16_t group) = 0;
};

class backend {
 public:
  virtual ~backend() = default;

  // Hands the operations of the list starting at `first` (linked by operation::next, in order) over in one
  // call, and with `wait` blocks until a completion is available (or a signal interrupts the wait). A list
  // longer than the submission queue costs extra submits, never a lost operation. Cheap when there is
  // nothing to do. One virtual call per turn, not per operation. Marks each operation submitted. The
  // executor keeps out of the list what completes without a backend (cancelled before its turn, refused
  // by the allowlist), and counts what it hands over.
  virtual void submit(operation* first, bool wait) = 0;
  // Hands over what the backend queued itself (messages, cancels) if anything; never waits, and costs no
  // syscall when there is nothing to hand over.
  virtual void flush() = 0;
  // As flush, but only where the SQ holds one request (the message just queued): a hand-off pushed out
  // early must not take along other messages, whose receivers would then wake for a few values each
  // (docs/messaging.md, channels).
  virtual void flush_if_alone() = 0;
  // Asks the backend to cancel a submitted operation: it completes soon, with -ECANCELED if it was still
  // waiting. The cancel request is the backend's own (user_data kOwnRequest): its answer never aliases the
  // target.
  virtual void cancel(operation& target) = 0;
  // Moves up to `max` completions into `out`, releasing their queue slots before anything is completed.
  virtual std::size_t reap(completion* out, std::size_t max) = 0;
  // Asks every submitted operation to complete soon (with -ECANCELED where it was still waiting); the
  // request goes out with the next submit.
  virtual void cancel_all() = 0;

  // The ring's one eventfd slot: 0 or -errno (-EBUSY when taken, -EBADF, -EINVAL for a non-eventfd).
  // The eventfd is signalled when completions are posted (with async_only: only those finished in an
  // io-wq worker, or what the emulation does in its place).
  virtual int register_eventfd(int fd, bool async_only) = 0;
  virtual int unregister_eventfd() = 0;
  // Stops (false) or resumes (true) the registered eventfd's signals, as io_uring_cq_eventfd_toggle.
  virtual int enable_eventfd(bool on) = 0;
  // For a foreign loop: the fd it should watch so that it wakes whenever this backend may have work,
  // given `notify`, the executor's eventfd, already registered in the slot.
  virtual int foreign_watch_fd(int notify) = 0;

  // Empties slot `index` of the table of direct descriptors now (no operation): for a slot nobody will
  // take, such as a connection a multishot accept put there after its stream was gone. 0 or -errno.
  virtual int empty_slot(unsigned index) = 0;
  // NAPI busy polling (executor_options::napi_busy_poll): natively registered on the ring, emulated set on
  // the epoll fd it waits in (backend/napi.hpp). 0 or -errno.
  virtual int enable_napi(napi_settings s) = 0;

  // The ring's table of registered buffers (uring/fixed_buffers.hpp), as IORING_REGISTER_BUFFERS2,
  // IORING_REGISTER_BUFFERS_UPDATE and IORING_UNREGISTER_BUFFERS: `n` buffers from `iovs` (a null base
  // with length 0: an empty slot), each with its tag (0: none). Once the kernel no longer uses a tagged
  // buffer that an update replaced or the unregistration dropped, it posts a CQE {user_data = tag, res =
  // 0}. 0 or -errno (-EBUSY: a table is registered already; -ENOMEM: RLIMIT_MEMLOCK).
  virtual int register_buffers(const iovec* iovs, const std::uint64_t* tags, unsigned n) = 0;
  virtual int update_buffers(unsigned offset, const iovec* iovs, const std::uint64_t* tags, unsigned n) = 0;
  virtual int unregister_buffers() = 0;

  // Busy polling: whether completions wait to be reaped. Never blocks; now and then (natively: on every
  // call for a DEFER_TASKRUN ring) it lets the kernel or the emulation make progress first.
  [[nodiscard]] virtual bool poll_completions() = 0;

  // The native ring's own capabilities, or null (the emulation has no ring). Queried once, at start-up.
  [[nodiscard]] virtual class native_ring* native() noexcept { return nullptr; }

  [[nodiscard]] virtual bool registered_ring() const noexcept = 0;
  [[nodiscard]] virtual ring_flags active_flags() const noexcept = 0;
  [[nodiscard]] virtual ring_flags dropped_flags() const noexcept = 0;
};

// A raw message written straight into a native ring's SQ (message_hub::write_to_ring; the one encoding
// of it): IORING_OP_MSG_RING posting {res = value, user_data = data, flags = cqe_flags} on the target
// ring (IORING_MSG_RING_FLAGS_PASS, 6.3; liburing 2.3 lacks it), with IOSQE_CQE_SKIP_SUCCESS, and a CQE
// with user_data `failed` back here if the kernel refuses it. native_backend.cpp checks these numbers
// against the kernel's. Requires q.sqes. False: the SQ is full (backend::make_sq_room, then again).
inline constexpr std::uint8_t kOpMsgRing = 40;
inline constexpr std::uint8_t kSqeCqeSkipSuccess = 1u << 6;
// At most this many raw messages wait in the SQ: the 65th submits them first. The kernel posts a stream
// of MSG_RINGs cheaper per message in batches of 64 than in larger ones, whose requests outgrow the
// cache (bench/README.md, "Raw messages"); raw liburing code is measured the same way.
inline constexpr unsigned kMessagesPerEnter = 64;
// The one encoding of an IORING_OP_MSG_RING (into the eight words of an SQE): it posts {res = value,
// user_data = data} on the ring `target_fd`, with CQE flags `cqe_flags` when `msg_flags` has
// kMsgRingFlagsPass; `sqe_flags` such as kSqeCqeSkipSuccess; a CQE with user_data `failed` comes back
// here if the kernel refuses it.
inline void encode_msg_ring(std::uint64_t* w, int target_fd, std::int32_t value, std::uint64_t data,
                            std::uint32_t msg_flags, std::uint32_t cqe_flags, std::uint8_t sqe_flags,
                            std::uint64_t failed) noexcept {
  w[0] =
      kOpMsgRing | std::uint64_t{sqe_flags} << 8 | std::uint64_t{static_cast<std::uint32_t>(target_fd)} << 32;
  w[1] = data;  // off: the target CQE's user_data
  w[2] = 0;     // addr: IORING_MSG_DATA
  w[3] = static_cast<std::uint32_t>(value) | std::uint64_t{msg_flags} << 32;  // len = res; msg_ring_flags
  w[4] = failed;
  w[5] = std::uint64_t{cqe_flags} << 32;  // file_index: the target CQE's flags
  w[6] = w[7] = 0;
}

inline bool write_raw_message(op_queue& q, int target_fd, std::int32_t value, std::uint64_t data,
                              std::uint32_t cqe_flags, std::uint64_t failed) noexcept {
  std::uint64_t* const w = q.claim_sqe(std::min(kMessagesPerEnter, q.sq_entries));
  if (w == nullptr) return false;
  encode_msg_ring(w, target_fd, value, data, kMsgRingFlagsPass, cqe_flags, kSqeCqeSkipSuccess, failed);
  q.commit_sqe();
  return true;
}

// From any thread, also one without a ring of its own: posts a CQE with user_data `data` on the ring
// `ring_fd` through IORING_REGISTER_SEND_MSG_RING (kernel 6.13+; the plan says whether it may be used).
// 0 or -errno.
int send_msg_ring_from_anywhere(int ring_fd, std::uint64_t data) noexcept;

// `plan` says which setup flags to ask for, whether to register the ring fd and which operations the
// kernel may run (plan.allowed_ops, with what the executor needs itself); `opts` gives the sizes. What
// the ring's setup could not do as planned (register its fd) is written back into `plan`, with a note.
std::unique_ptr<backend> make_native_backend(const executor_options& opts, executor_plan& plan,
                                             executor_stats& stats);

// What a restricted ring lets through besides the executor's allowlist, as op kinds: the executor's own
// wake-up read (IORING_OP_READ) and cancellation (IORING_OP_ASYNC_CANCEL, which cancel_fd also becomes).
// The executor still refuses user operations of these kinds unless the list names them.
inline constexpr op_set kExecutorOwnOps = op_set{}.add(op_code::read).add(op_code::cancel_fd);

// The in-process emulation of the same contract (epoll and non-blocking syscalls); as a restricted ring's
// kernel, it refuses operations outside opts.allowed_ops (plus kExecutorOwnOps) with -EACCES.
std::unique_ptr<backend> make_emulated_backend(const executor_options& opts, executor_stats& stats);

}  // namespace uring::detail
