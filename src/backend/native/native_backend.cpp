// native_backend.cpp — the backend on a real io_uring, through liburing.
//
// The ring fd is registered right after setup, so every enter passes IORING_ENTER_REGISTERED_RING with
// the registered index (liburing keeps it in ring.enter_ring_fd). Completions the kernel cannot take while
// its CQ is busy are parked in backlog_ so that a flush forced by a full SQ never has to resume
// coroutines from inside prepare().
//
// An executor with an op allowlist gets a ring created disabled, restricted (IORING_REGISTER_RESTRICTIONS)
// and only then enabled: restrict_and_enable() says what the kernel is told and why.
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cerrno>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "backend/backend.hpp"
#include "backend/native/ring_mapping.hpp"
#include "ops/op_table.hpp"
#include "setup/liburing_compat.hpp"
#include "setup/setup_error.hpp"
#include "uring/error.hpp"

namespace uring::detail {

namespace {

static_assert(kCqeMore == IORING_CQE_F_MORE);
static_assert(kCqeBuffer == IORING_CQE_F_BUFFER && kCqeBufferShift == IORING_CQE_BUFFER_SHIFT);
static_assert(kCqeNotif == IORING_CQE_F_NOTIF);

unsigned to_kernel(ring_flags f) {
  unsigned k = 0;
  if (any(f & ring_flags::submit_all)) k |= IORING_SETUP_SUBMIT_ALL;
  if (any(f & ring_flags::coop_taskrun)) k |= IORING_SETUP_COOP_TASKRUN;
  if (any(f & ring_flags::single_issuer)) k |= IORING_SETUP_SINGLE_ISSUER;
  if (any(f & ring_flags::defer_taskrun)) k |= IORING_SETUP_DEFER_TASKRUN;
  return k;
}

// Drops the newest flag (the highest bit) so that an older kernel gets a ring it understands. DEFER_TASKRUN
// goes with SINGLE_ISSUER, which it requires.
ring_flags drop_newest(ring_flags f) {
  for (unsigned bit = 31; bit < 32; --bit) {
    auto one = ring_flags(1u << bit);
    if (any(f & one)) {
      f = f & ~one;
      if (one == ring_flags::single_issuer) f = f & ~ring_flags::defer_taskrun;
      return f;
    }
  }
  return f;
}

// op_queue::start_inline writes SQEs through sqe_image, and the executor reads CQEs through
// completion: both must be the kernel's layout.
static_assert(sizeof(sqe_image) == sizeof(io_uring_sqe));
static_assert(offsetof(sqe_image, fd) == offsetof(io_uring_sqe, fd) &&
              offsetof(sqe_image, off) == offsetof(io_uring_sqe, off) &&
              offsetof(sqe_image, addr) == offsetof(io_uring_sqe, addr) &&
              offsetof(sqe_image, len) == offsetof(io_uring_sqe, len) &&
              offsetof(sqe_image, rw_flags) == offsetof(io_uring_sqe, rw_flags) &&
              offsetof(sqe_image, user_data) == offsetof(io_uring_sqe, user_data));
static_assert(IORING_OP_NOP == 0 && IORING_OP_READ == 22 && IORING_OP_WRITE == 23);
// write_raw_message's SQE: the words' fields and numbers (IORING_MSG_RING_FLAGS_PASS is checked by the
// probe and the tests: liburing 2.3 has no name for it).
static_assert(IORING_OP_MSG_RING == kOpMsgRing && IOSQE_CQE_SKIP_SUCCESS == kSqeCqeSkipSuccess &&
              IORING_MSG_DATA == 0 && offsetof(io_uring_sqe, msg_ring_flags) == 28 &&
              offsetof(io_uring_sqe, file_index) == 44 && offsetof(io_uring_sqe, addr3) == 48);
static_assert(sizeof(completion) == sizeof(io_uring_cqe) &&
              offsetof(completion, res) == offsetof(io_uring_cqe, res) &&
              offsetof(completion, flags) == offsetof(io_uring_cqe, flags));

class native_backend final : public backend, public native_ring {
 public:
  native_backend(const executor_options& opts, executor_plan& plan, executor_stats& stats) : stats_(stats) {
    ring_flags want = plan.flags;
    if (any(want & ring_flags::defer_taskrun)) want = want | ring_flags::single_issuer;
    // A restricted ring starts disabled: restrictions can only be registered before the ring is enabled.
    const bool restricted = plan.allowed_ops.restricts();
    sqpoll_ = plan.sqpoll;
    for (;;) {
      io_uring_params params{};
      params.flags = IORING_SETUP_CQSIZE | to_kernel(want) | (restricted ? IORING_SETUP_R_DISABLED : 0u);
      params.cq_entries = opts.cq_entries != 0 ? opts.cq_entries : 4 * opts.sq_entries;
      if (sqpoll_) set_sqpoll(params, opts.sqpoll);
      int r = init_ring(opts.sq_entries, &ring_, &params);
      if (r == 0) {
        features_ = params.features;
        break;
      }
      // The probe found SQPOLL working, so a refusal here is about these options (a CPU that is not
      // online, say): said as such rather than hidden by dropping flags.
      if (sqpoll_) throw std::system_error(-r, std::system_category(), explain_sqpoll_error(opts.sqpoll, -r));
      if (r == -EINVAL && any(want)) {
        want = drop_newest(want);
        continue;
      }
      throw std::system_error(-r, std::system_category(), explain_setup_error(-r));
    }
    active_ = want;
    dropped_ = opts.flags & ~want;  // whatever the plan or the kernel took away
    defer_taskrun_ = any(want & ring_flags::defer_taskrun);
    if (!(features_ & IORING_FEAT_NODROP)) {
      exit_ring(&ring_);
      throw std::system_error(
          ENOTSUP, std::system_category(),
          "io_uring: the kernel lacks IORING_FEAT_NODROP (5.5+), so completions could be lost");
    }
    // A forked child must not share the SQ/CQ mappings: the kernel would let two processes issue on one
    // ring, and the child's copy-on-write pages would shadow the parent's. Excluded from fork, they are
    // simply absent in the child, which builds an executor (a ring) of its own. Failing to exclude them
    // costs only that protection, so the ring is kept either way.
    (void)io_uring_ring_dontfork(&ring_);
    if (plan.register_ring_fd) {
      // Returns 1 on success; -EBUSY when this thread's 16 slots are taken: then we keep the plain fd.
      // Before restricting: restrictions limit io_uring_register too, and this needs no permission then.
      int r = io_uring_register_ring_fd(&ring_);
      registered_ = r == 1;
      if (!registered_) {
        ++stats_.registered_ring_fallbacks;
        plan.register_ring_fd = false;
        plan.notes.push_back(
            "registered ring fd: " +
            explain_call_error("io_uring_register(IORING_REGISTER_RING_FDS)", r < 0 ? -r : EIO) +
            "; the plain ring fd instead");
      }
    }
    if (opts.direct_files > 0) {
      // The table of direct descriptors, empty (sparse). Before restricting, as the ring fd.
      if (int r = io_uring_register_files_sparse(&ring_, opts.direct_files); r < 0) {
        exit_ring(&ring_);
        const std::string call = "io_uring_register(IORING_REGISTER_FILES2, " +
                                 std::to_string(opts.direct_files) +
                                 " empty slots) for executor_options::direct_files";
        throw std::system_error(-r, std::system_category(), explain_call_error(call.c_str(), -r));
      }
    }
    if (restricted) restrict_and_enable(plan.allowed_ops);
    cq_ = cq_view{.cqes = reinterpret_cast<const completion*>(ring_.cq.cqes),
                  .khead = ring_.cq.khead,
                  .ktail = ring_.cq.ktail,
                  .kflags = ring_.sq.kflags,
                  .mask = ring_.cq.ring_mask,
                  .more_flags = IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN,
                  .overflow_flag = IORING_SQ_CQ_OVERFLOW,
                  .backlog = &backlog_};
  }

  ~native_backend() override { exit_ring(&ring_); }

  static void set_sqpoll(io_uring_params& params, const sqpoll_options& o) {
    params.flags |= IORING_SETUP_SQPOLL;
    // 0 would mean the kernel's default of a second.
    params.sq_thread_idle = static_cast<unsigned>(std::clamp<std::int64_t>(o.idle.count(), 1, 1'000'000));
    if (o.cpu >= 0) {
      params.flags |= IORING_SETUP_SQ_AFF;
      params.sq_thread_cpu = static_cast<unsigned>(o.cpu);
    }
  }

  static std::string explain_sqpoll_error(const sqpoll_options& o, int err) {
    std::string call = "io_uring_setup(IORING_SETUP_SQPOLL";
    if (o.cpu >= 0) call += " on CPU " + std::to_string(o.cpu);
    call += ") for executor_options::sqpoll";
    std::string why = explain_call_error(call.c_str(), err);
    if (err == EINVAL && o.cpu >= 0) why += " (is that CPU online and in this process's cpuset?)";
    return why;
  }

  // The ring's restrictions: the kernel opcodes of the allowed operations plus those the executor needs
  // itself, the register operations the library performs after start-up, and the SQE flags it sets.
  // Then the ring is enabled, and no io_uring_register call can change the list again.
  void restrict_and_enable(const op_allowlist& allowed) {
    std::vector<io_uring_restriction> list;
    std::bitset<256> ops;
    auto add = [&list](std::uint16_t kind, std::uint8_t value) {
      io_uring_restriction r{};
      r.opcode = kind;
      r.sqe_op = value;  // one byte of a union: register_op and sqe_flags share it
      list.push_back(r);
    };
    auto allow_op = [&](std::uint8_t op) {
      if (!ops.test(op)) add(IORING_RESTRICTION_SQE_OP, op);
      ops.set(op);
    };
    for (const op_row& row : kOpTable) {
      if (allowed.allows(row.code)) allow_op(row.kernel_opcode);
    }
    // The executor's own (and linked timeouts): its wake-up read of its eventfd,
    // cancellation (also the shutdown that drains every operation before frames are freed) and
    // with_timeout. User operations of these kinds are still refused by the executor unless listed.
    allow_op(IORING_OP_READ);
    allow_op(IORING_OP_ASYNC_CANCEL);
    allow_op(IORING_OP_LINK_TIMEOUT);
    if (allowed.allows_msg_ring()) allow_op(IORING_OP_MSG_RING);
    // Register operations after start-up: the eventfd slot (register_eventfd, notify_fd), the ring fd's
    // unregistration at exit (or the thread's slot would keep the ring alive), provided buffer rings,
    // registered buffers, emptying a direct slot nobody took (empty_slot: a dropped accept_all_direct
    // stream's), and NAPI busy polling (registered once the executor has its ring).
    for (unsigned op : std::initializer_list<unsigned>{
             IORING_REGISTER_EVENTFD, IORING_REGISTER_EVENTFD_ASYNC, IORING_UNREGISTER_EVENTFD,
             IORING_UNREGISTER_RING_FDS, IORING_REGISTER_PBUF_RING, IORING_UNREGISTER_PBUF_RING,
             IORING_REGISTER_FILES_UPDATE, IORING_REGISTER_BUFFERS2, IORING_REGISTER_BUFFERS_UPDATE,
             IORING_UNREGISTER_BUFFERS, detail::kRegisterNapi}) {
      add(IORING_RESTRICTION_REGISTER_OP, static_cast<std::uint8_t>(op));
    }
    // Without this every SQE carrying a flag is refused: links (with_timeout, chains), skipped success CQEs
    // (cancel, MSG_RING), provided-buffer selection and forced async are what the library sets.
    add(IORING_RESTRICTION_SQE_FLAGS_ALLOWED,
        IOSQE_IO_LINK | IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS | IOSQE_BUFFER_SELECT | IOSQE_ASYNC);
    if (register_raw(IORING_REGISTER_RESTRICTIONS, list.data(), static_cast<unsigned>(list.size())) != 0) {
      fail_setup(errno,
                 "io_uring_register(IORING_REGISTER_RESTRICTIONS) for the executor's op allowlist "
                 "(ring restrictions need kernel 5.10+)");
    }
    if (register_raw(IORING_REGISTER_ENABLE_RINGS, nullptr, 0) != 0) {
      fail_setup(errno, "io_uring_register(IORING_REGISTER_ENABLE_RINGS) after restricting the ring");
    }
  }

  // liburing 2.3 declares io_uring_register_restrictions and io_uring_enable_rings, but Debian's
  // liburing.so.2.3 does not export them (they are missing from its symbol map): the syscall itself.
  long register_raw(unsigned opcode, void* arg, unsigned nr) {
    return ::syscall(__NR_io_uring_register, ring_.ring_fd, opcode, arg, nr);
  }

  [[noreturn]] void fail_setup(int err, const std::string& what) {
    exit_ring(&ring_);  // the constructor throws: no destructor will
    throw std::system_error(err, std::system_category(), what);
  }

  native_backend(const native_backend&) = delete;
  native_backend& operator=(const native_backend&) = delete;

  void submit(operation* first, bool wait) override {
    if (first != nullptr) take_list(first);  // a turn whose operations all went inline has none
    // Completions already parked here (an operation cancelled before it reached the kernel) are ready:
    // waiting for the kernel now could wait forever. Nor is there a wait when the CQ already holds
    // completions (posted since the last reap, e.g. another thread's messages): liburing enters for any
    // wait, and on this VM that syscall (~1.4 us) was most of a streaming receiver's time; with nothing
    // to submit either, no syscall is made at all.
    enter(wait && backlog_.empty() && io_uring_cq_ready(&ring_) == 0 ? 1 : 0);
  }

  // Writes the list's operations into the SQ. The hot path claims SQ slots from a local cursor: one read
  // of the kernel's head per batch instead of liburing's checks per SQE. Anything unusual goes through
  // prepare() with the cursor put back. Out of line: most turns have no list (their operations went
  // straight into the SQ), and submit then needs no registers saved.
  [[gnu::noinline]] void take_list(operation* first) {
    unsigned tail = ring_.sq.sqe_tail;
    unsigned free = sq_free(tail);
    for (operation* op = first; op != nullptr; op = op->next) {
      op->state = op_state::submitted;
      const io_request& r = op->request;
      if (r.code <= op_code::write && r.link_timeout == nullptr && r.link == 0) [[likely]] {
        if (free == 0) [[unlikely]] {
          ring_.sq.sqe_tail = tail;
          flush_until_free(1);
          tail = ring_.sq.sqe_tail;
          free = sq_free(tail);
        }
        op_queue::encode_simple(reinterpret_cast<std::uint64_t*>(&ring_.sq.sqes[tail & ring_.sq.ring_mask]),
                                r, reinterpret_cast<std::uint64_t>(op));
        ++tail;
        --free;
      } else {
        ring_.sq.sqe_tail = tail;
        prepare(*op);
        tail = ring_.sq.sqe_tail;
        free = sq_free(tail);
      }
    }
    ring_.sq.sqe_tail = tail;
  }

  void flush() override {
    if (io_uring_sq_ready(&ring_) > 0) enter(0);
  }
  void flush_if_alone() override {
    if (io_uring_sq_ready(&ring_) == 1) enter(0);
  }

  void cancel(operation& target) override {
    ++stats_.cancels;
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(&target), 0);
    io_uring_sqe_set_data64(sqe, kOwnRequest);
    if (features_ & IORING_FEAT_CQE_SKIP) sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  }

  std::size_t reap(completion* out, std::size_t max) override {
    std::size_t n = 0;
    while (n < max && !backlog_.empty()) {
      out[n++] = backlog_.front();
      backlog_.pop_front();
    }
    n += take_cqes(out + n, max - n);
    return n;
  }

  void cancel_all() override {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, kOwnRequest);
  }

  void send_message(int target_fd, std::uint64_t data, std::uint64_t failed) override {
    // Success costs the sender no CQE.
    encode_msg_ring(reinterpret_cast<std::uint64_t*>(next_sqe()), target_fd, 0, data, 0, 0,
                    kSqeCqeSkipSuccess, failed);
  }
  void make_sq_room() override { flush_until_free(1); }
  int ring_fd() const noexcept override { return ring_.ring_fd; }
  int enable_napi(napi_settings s) override { return register_napi(ring_.ring_fd, s); }

  bool poll_completions() override {
    if (io_uring_cq_ready(&ring_) > 0 || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_CQ_OVERFLOW))
      return true;
    // Task work runs only inside an enter: every completion of a DEFER_TASKRUN ring (MSG_RINGs included),
    // socket and pipe reads on a COOP_TASKRUN one. So one GETEVENTS enter per call on the first, one
    // every 32 calls on the second (the CQ itself is watched in between).
    // An SQPOLL ring's task work runs on its poller thread, which posts the completions itself.
    if (sqpoll_ || (!defer_taskrun_ && ++polls_ % 32 != 0)) return false;
    ++stats_.enters;
    io_uring_get_events(&ring_);
    return io_uring_cq_ready(&ring_) > 0;
  }

  void offer_inline_sq(op_queue& q) noexcept override {
    q.sqes = ring_.sq.sqes;
    q.sqe_tail = &ring_.sq.sqe_tail;
    // submit_and_enter and sqpoll_submit keep sqe_head at the tail they publish.
    q.sqe_published = &ring_.sq.sqe_head;
    q.sq_khead = ring_.sq.khead;
    q.sq_mask = ring_.sq.ring_mask;
    q.sq_entries = ring_.sq.ring_entries;
    q.sq_limit = *ring_.sq.khead + ring_.sq.ring_entries;
  }

  void offer_inline_cq(cq_view& v) noexcept override { v = cq_; }

  int register_eventfd(int fd, bool async_only) override {
    return async_only ? io_uring_register_eventfd_async(&ring_, fd) : io_uring_register_eventfd(&ring_, fd);
  }
  int unregister_eventfd() override { return io_uring_unregister_eventfd(&ring_); }
  int enable_eventfd(bool on) override { return io_uring_cq_eventfd_toggle(&ring_, on); }
  // The kernel signals the registered eventfd itself: the loop watches it directly. With DEFER_TASKRUN
  // it signals when deferred work is queued, and the executor's poll() asks for those events.
  int foreign_watch_fd(int notify) override { return notify; }

  int register_buf_ring(void* ring, unsigned entries, std::uint16_t group, std::uint16_t flags) override {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(ring);
    reg.ring_entries = entries;
    reg.bgid = group;
    reg.pad = flags;  // the kernel's io_uring_buf_reg::flags, which liburing 2.3 still calls pad
    return io_uring_register_buf_ring(&ring_, &reg, 0);
  }
  int unregister_buf_ring(std::uint16_t group) override {
    return io_uring_unregister_buf_ring(&ring_, group);
  }
  int register_buffers(const iovec* iovs, const std::uint64_t* tags, unsigned n) override {
    return io_uring_register_buffers_tags(&ring_, iovs, reinterpret_cast<const __u64*>(tags), n);
  }
  int update_buffers(unsigned offset, const iovec* iovs, const std::uint64_t* tags, unsigned n) override {
    const int r =
        io_uring_register_buffers_update_tag(&ring_, offset, iovs, reinterpret_cast<const __u64*>(tags), n);
    return r < 0 ? r : 0;
  }
  int unregister_buffers() override { return io_uring_unregister_buffers(&ring_); }
  int empty_slot(unsigned index) override {
    int none = -1;
    const int r = io_uring_register_files_update(&ring_, index, &none, 1);
    return r < 0 ? r : 0;
  }

  native_ring* native() noexcept override { return this; }
  bool registered_ring() const noexcept override { return registered_; }
  ring_flags active_flags() const noexcept override { return active_; }
  ring_flags dropped_flags() const noexcept override { return dropped_; }

 private:
  void prepare(operation& op) {
    const io_request& r = op.request;
    // A linked pair must not be split across two submits: the kernel would run the operation unlinked.
    if (r.link_timeout != nullptr && sq_free(ring_.sq.sqe_tail) < 2) flush_until_free(2);
    // Nor a chain (its first step counts the chain's SQEs).
    if (r.chain_sqes > 1 && sq_free(ring_.sq.sqe_tail) < r.chain_sqes) flush_until_free(r.chain_sqes);
    io_uring_sqe* sqe = next_sqe();
    const op_row& row = op_info(r.code);
    row.native(sqe, r);
    if (r.direct && row.fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
    if (r.link != 0) sqe->flags |= r.link == kLinkHard ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK;
    io_uring_sqe_set_data(sqe, &op);
    if (r.link_timeout != nullptr) {
      sqe->flags |= IOSQE_IO_LINK;
      io_uring_sqe* link = next_sqe();
      // The kernel copies the timespec at submission (IORING_FEAT_SUBMIT_STABLE), and the timeout's own
      // completion (-ETIME or -ECANCELED) is ours to ignore: kOwnRequest.
      const link_time t = link_time_of(r);
      io_uring_prep_link_timeout(
          link, const_cast<__kernel_timespec*>(reinterpret_cast<const __kernel_timespec*>(t.time)),
          t.absolute ? IORING_TIMEOUT_ABS : 0);
      io_uring_sqe_set_data64(link, kOwnRequest);
    }
  }

  io_uring_sqe* next_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe != nullptr) return sqe;
    flush_until_free(1);
    return io_uring_get_sqe(&ring_);
  }

  unsigned sq_free(unsigned tail) const noexcept {
    return ring_.sq.ring_entries - (tail - io_uring_smp_load_acquire(ring_.sq.khead));
  }

  // Submits what is queued until the SQ has `needed` free entries (a linked pair needs two, and must not
  // be split across two submits). Takes no SQE itself.
  [[gnu::noinline]] void flush_until_free(unsigned needed) {
    if (needed > ring_.sq.ring_entries)
      throw std::length_error("io_uring: submission queue smaller than a linked pair");
    do {
      ++stats_.sq_full_flushes;
      enter(0);
      // An SQPOLL ring's entries free up as its poller takes them: sleep until it has, not spin.
      if (sqpoll_ && sq_free(ring_.sq.sqe_tail) < needed) {
        if (int r = sqpoll_submit(0, IORING_ENTER_SQ_WAIT); r < 0 && r != -EINTR)
          throw_errno(-r, "io_uring_enter");
      }
    } while (sq_free(ring_.sq.sqe_tail) < needed);
  }

  // One io_uring_enter, made as liburing's io_uring_submit_and_wait (and, for DEFER_TASKRUN without a
  // wait, io_uring_submit_and_get_events) make it: the SQ tail published, GETEVENTS to wait, for a
  // DEFER_TASKRUN ring, or when the kernel flags overflowed completions or pending task work, and the
  // registered ring's index. No syscall when there is nothing to submit and no events to get. Written
  // out because the generic path cost ~40 instructions a turn (callgrind, nop/uring/1).
  int submit_and_enter(unsigned wait_nr) {
    if (sqpoll_) [[unlikely]]
      return sqpoll_submit(wait_nr, 0);
    const unsigned tail = ring_.sq.sqe_tail;
    if (ring_.sq.sqe_head != tail) {
      ring_.sq.sqe_head = tail;
      IO_URING_WRITE_ONCE(*ring_.sq.ktail, tail);  // the syscall orders it (SQPOLL stores a release)
    }
    const unsigned queued = tail - IO_URING_READ_ONCE(*ring_.sq.khead);
    unsigned flags = registered_ ? IORING_ENTER_REGISTERED_RING : 0;
    if (wait_nr > 0 || defer_taskrun_ || (cq_.flags() & cq_.more_flags)) {
      flags |= IORING_ENTER_GETEVENTS;
    } else if (queued == 0) {
      return 0;
    }
    ++stats_.enters;
    if (wait_nr > 0) ++stats_.waits;
    return io_uring_enter(static_cast<unsigned>(ring_.enter_ring_fd), queued, wait_nr, flags, nullptr);
  }

  // SQPOLL: the poller takes SQEs as soon as the tail is published. An enter is needed only to wake a
  // poller that has gone to sleep, to wait (for completions, or with IORING_ENTER_SQ_WAIT in `extra` for
  // room in the SQ), or to flush overflowed completions. Counts the SQEs it publishes; returns 0 or -errno.
  [[gnu::noinline]] int sqpoll_submit(unsigned wait_nr, unsigned extra) {
    const unsigned tail = ring_.sq.sqe_tail;
    const unsigned published = tail - ring_.sq.sqe_head;
    if (published != 0) {
      ring_.sq.sqe_head = tail;
      io_uring_smp_store_release(ring_.sq.ktail, tail);
      stats_.sqes += published;
    }
    unsigned flags = extra;
    const unsigned head = io_uring_smp_load_acquire(ring_.sq.khead);
    // A poller woken once is not woken again until it has taken something: until it is scheduled the
    // kernel's flag stays up, and entering on every turn meanwhile would cost a syscall each.
    if (tail != head && (head != woken_at_ || wait_nr > 0 || extra != 0)) {
      // The full barrier orders the tail's store before the flag's load; the poller orders its flag's
      // store before its last look at the tail, so one of the two sees the other.
      io_uring_smp_mb();
      if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_NEED_WAKEUP) {
        flags |= IORING_ENTER_SQ_WAKEUP;
        woken_at_ = head;
      }
    }
    if (wait_nr > 0 || (cq_.flags() & cq_.more_flags)) flags |= IORING_ENTER_GETEVENTS;
    if (flags == 0) return 0;
    if (registered_) flags |= IORING_ENTER_REGISTERED_RING;
    ++stats_.enters;
    if (wait_nr > 0) ++stats_.waits;
    const int r = io_uring_enter(static_cast<unsigned>(ring_.enter_ring_fd), 0, wait_nr, flags, nullptr);
    return r < 0 ? r : 0;
  }

  // The turn's one enter. Its failures are handled out of line, so the common path keeps a small frame
  // (park_completions' batch is 1 KiB of stack).
  void enter(unsigned wait_nr) {
    int r = submit_and_enter(wait_nr);
    if (r < 0) [[unlikely]]
      r = enter_again(r, wait_nr);
    stats_.sqes += static_cast<unsigned>(r);
  }

  // After an enter failed with `r`: retries until one succeeds and returns what it submitted (0 when an
  // interrupted one left nothing queued), or throws.
  [[gnu::noinline]] int enter_again(int r, unsigned wait_nr) {
    for (;; r = submit_and_enter(wait_nr)) {
      if (r >= 0) return r;
      if (r == -EINTR) {
        // A signal interrupted the wait; whatever was queued went in (an SQPOLL ring's poller has it) or is
        // retried next turn.
        if (sqpoll_ || io_uring_sq_ready(&ring_) == 0) return 0;
        continue;
      }
      if (r == -EBUSY || r == -EAGAIN) {
        // The CQ (and the kernel's overflow list) is full: park completions to make room, then retry.
        park_completions();
        wait_nr = 0;
        continue;
      }
      throw_errno(-r, "io_uring_enter");
    }
  }

  // Copies up to `max` CQEs out of the ring (cq_view::take). When the ring looks empty but the kernel
  // holds overflowed completions (or deferred task work), one GETEVENTS enter brings them in; liburing's
  // peek helpers do the same, at a call and an array copy more per CQE.
  std::size_t take_cqes(completion* out, std::size_t max) {
    const unsigned kflags = cq_.flags();
    if (kflags & cq_.overflow_flag) ++stats_.cq_overflows;  // counted once per reap that sees it
    if (cq_.empty()) {
      if (!(kflags & cq_.more_flags)) return 0;
      ++stats_.enters;
      io_uring_get_events(&ring_);
    }
    return cq_.take(out, static_cast<unsigned>(max));  // max: a batch of at most 64
  }

  std::size_t park_completions() {
    completion batch[64];
    std::size_t total = 0;
    for (;;) {
      std::size_t n = take_cqes(batch, 64);
      backlog_.insert(backlog_.end(), batch, batch + n);
      total += n;
      if (n < 64) break;
    }
    stats_.cq_backlogged += total;
    return total;
  }

  io_uring ring_{};
  cq_view cq_;  // the ring's CQ, as the executor reads it too (offer_inline_cq)
  executor_stats& stats_;
  std::deque<completion> backlog_;
  unsigned features_ = 0;
  ring_flags active_ = ring_flags::none;
  ring_flags dropped_ = ring_flags::none;
  bool defer_taskrun_ = false;
  bool sqpoll_ = false;
  unsigned woken_at_ = ~0u;  // SQPOLL: the SQ head when the poller was last woken
  bool registered_ = false;
  unsigned polls_ = 0;  // poll_completions calls, to enter on every 32nd
};

}  // namespace

int send_msg_ring_from_anywhere(int ring_fd, std::uint64_t data) noexcept {
  io_uring_sqe sqe{};
  encode_msg_ring(reinterpret_cast<std::uint64_t*>(&sqe), ring_fd, 0, data, 0, 0, 0, 0);
  return ::syscall(__NR_io_uring_register, -1, kRegisterSendMsgRing, &sqe, 1) < 0 ? -errno : 0;
}

std::unique_ptr<backend> make_native_backend(const executor_options& opts, executor_plan& plan,
                                             executor_stats& stats) {
  return std::make_unique<native_backend>(opts, plan, stats);
}

}  // namespace uring::detail
