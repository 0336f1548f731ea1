// setup/kernel_features.cpp — the kernel probe: each feature tried for real on a throw-away ring
// (the report, as a table and as JSON, is in features_report.cpp).
#include "uring/kernel_features.hpp"

#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/native/ring_mapping.hpp"
#include "setup/liburing_compat.hpp"
#include "setup/setup_error.hpp"
#include "uring/plan.hpp"

namespace uring {

namespace {

// IORING_REGISTER_SEND_MSG_RING is a "blind" register opcode, issued with fd -1, that posts a MSG_RING's
// CQE to the target ring without needing a ring of the sender's own (liburing_compat.hpp).
using detail::kMsgRingFlagsPass;
using detail::kRegisterSendMsgRing;
constexpr std::uint32_t kProbeCqeFlags = 0x5a5a0000;  // flags no kernel would set on its own

// What the messaging probes send: values no other CQE on a fresh ring could carry by accident.
constexpr std::uint64_t kProbeUserData = 0x7572'696e'6750'5242ULL;
constexpr unsigned kProbeLen = 0x5a17;
// user_data of the probes' own operations.
constexpr std::uint64_t kOpTag = 1;
constexpr std::uint64_t kCancelTag = 2;
// Every CQE the probe waits for is due within microseconds; the limit only keeps a broken kernel from
// hanging the process that probes.
constexpr long long kCqeWaitNs = 200'000'000;

// A CQE's fixed part, copied out so that its CQ slot is released at once.
struct completion {
  std::uint64_t user_data = 0;
  std::int32_t res = 0;
  std::uint32_t flags = 0;

  [[nodiscard]] bool more() const noexcept { return (flags & IORING_CQE_F_MORE) != 0; }
};

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool ok() const noexcept { return fd_ >= 0; }

 private:
  int fd_;
};

// A small ring that lives for one probe and is torn down on every path.
class scratch_ring {
 public:
  explicit scratch_ring(unsigned setup_flags = 0) {
    params_.flags = setup_flags;
    error_ = -detail::init_ring(4, &ring_, &params_);
  }
  scratch_ring(const scratch_ring&) = delete;
  scratch_ring& operator=(const scratch_ring&) = delete;
  ~scratch_ring() {
    if (ok()) detail::exit_ring(&ring_);
  }

  [[nodiscard]] bool ok() const noexcept { return error_ == 0; }
  [[nodiscard]] int error() const noexcept { return error_; }  // io_uring_setup's errno, positive
  [[nodiscard]] const io_uring_params& params() const noexcept { return params_; }
  [[nodiscard]] io_uring* get() noexcept { return &ring_; }
  [[nodiscard]] int fd() const noexcept { return ring_.ring_fd; }

  // Never null here: a probe queues at most two SQEs on a ring of four.
  io_uring_sqe* sqe(std::uint64_t user_data) noexcept {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    io_uring_sqe_set_data64(s, user_data);
    return s;
  }

  // Submits what is queued and returns the next completion; nothing if none came within kCqeWaitNs.
  std::optional<completion> submit_and_wait() {
    if (io_uring_submit(&ring_) < 0) return std::nullopt;
    return wait();
  }
  // The next completion, for CQEs that another ring or the kernel posts here.
  std::optional<completion> wait() {
    __kernel_timespec limit{0, kCqeWaitNs};
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_timeout(&ring_, &cqe, &limit) != 0 || cqe == nullptr) return std::nullopt;
    completion c{cqe->user_data, cqe->res, cqe->flags};
    io_uring_cqe_seen(&ring_, cqe);
    return c;
  }

  // Cancels the armed multishot operation kOpTag and reaps until both its last CQE (no F_MORE) and the
  // cancel's CQE are in, so nothing of it is in flight when its buffers and fds go away.
  void cancel_and_drain() {
    io_uring_prep_cancel64(sqe(kCancelTag), kOpTag, 0);
    if (io_uring_submit(&ring_) < 0) return;  // the ring's teardown cancels it instead
    bool op_done = false, cancel_done = false;
    while (!op_done || !cancel_done) {
      std::optional<completion> c = wait();
      if (!c) return;
      if (c->user_data == kCancelTag) cancel_done = true;
      if (c->user_data == kOpTag && !c->more()) op_done = true;
    }
  }

 private:
  io_uring ring_{};
  io_uring_params params_{};
  int error_ = 0;
};

// A provided-buffer ring (IORING_REGISTER_PBUF_RING) of a few small buffers, filled and registered as
// group kGroup. One private mapping holds both: the ring in the first page (the kernel wants it page
// aligned), the buffers in the second. liburing 2.3 has no io_uring_setup_buf_ring, so this is its
// hand-made equivalent.
class buffer_ring {
 public:
  static constexpr unsigned kEntries = 4;  // a power of two, as the kernel requires
  static constexpr unsigned kBufferSize = 256;
  static constexpr std::uint16_t kGroup = 7;

  explicit buffer_ring(io_uring& ring)
      : ring_(ring), page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    void* mem = ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      error_ = detail::explain_call_error("mmap of the buffer ring", errno);
      return;
    }
    mem_ = static_cast<char*>(mem);
    auto* br = reinterpret_cast<io_uring_buf_ring*>(mem_);
    io_uring_buf_ring_init(br);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem_);
    reg.ring_entries = kEntries;
    reg.bgid = kGroup;
    if (int r = io_uring_register_buf_ring(&ring_, &reg, 0); r != 0) {
      error_ = detail::explain_call_error("io_uring_register(IORING_REGISTER_PBUF_RING)", -r);
      return;
    }
    registered_ = true;
    for (unsigned i = 0; i < kEntries; ++i) {
      io_uring_buf_ring_add(br, mem_ + page_ + i * kBufferSize, kBufferSize, static_cast<unsigned short>(i),
                            io_uring_buf_ring_mask(kEntries), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(br, kEntries);
  }
  buffer_ring(const buffer_ring&) = delete;
  buffer_ring& operator=(const buffer_ring&) = delete;
  ~buffer_ring() {
    unregister();
    if (mem_ != nullptr) ::munmap(mem_, 2 * page_);
  }

  [[nodiscard]] bool registered() const noexcept { return registered_; }
  // Why the registration failed ("" when it did not).
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // True when the kernel took the registration back.
  bool unregister() {
    if (!registered_) return false;
    registered_ = false;
    return io_uring_unregister_buf_ring(&ring_, kGroup) == 0;
  }

 private:
  io_uring& ring_;
  std::size_t page_;
  char* mem_ = nullptr;
  bool registered_ = false;
  std::string error_;
};

// Whether a uname release such as "6.18.44-fc" is at least major.minor.
bool release_at_least(const std::string& release, int major, int minor) {
  int have_major = 0, have_minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

// The kernel's opcode list (IORING_REGISTER_PROBE), by hand rather than io_uring_get_probe_ring, which
// hides the errno: a sandbox that denies io_uring_register leaves the list empty, and says so in reasons.
void list_opcodes(scratch_ring& ring, kernel_features& f) {
  constexpr unsigned kOps = 256;
  // io_uring_probe is a header followed by its ops; the kernel wants it zeroed.
  std::vector<io_uring_probe_op> mem(kOps + (sizeof(io_uring_probe) + sizeof(io_uring_probe_op) - 1) /
                                                sizeof(io_uring_probe_op));
  auto* probe = reinterpret_cast<io_uring_probe*>(mem.data());
  if (int r = io_uring_register_probe(ring.get(), probe, kOps); r < 0) {
    f.reasons["opcodes"] = detail::explain_call_error("io_uring_register(IORING_REGISTER_PROBE)", -r);
    return;
  }
  for (unsigned op = 0; op <= probe->last_op && op < f.opcodes.size(); ++op) {
    if (io_uring_opcode_supported(probe, static_cast<int>(op))) f.opcodes.set(op);
  }
}

// The first ring: is io_uring usable at all, its IORING_FEAT_* bits, its opcodes, and whether its fd can
// be registered. False (with the errno and the reason filled in) when io_uring_setup fails.
bool probe_basics(kernel_features& f) {
  scratch_ring ring;
  if (!ring.ok()) {
    f.setup_errno = ring.error();
    f.reason = detail::explain_setup_error(ring.error());
    return false;
  }
  f.io_uring_usable = true;
  f.feature_bits = ring.params().features;
  list_opcodes(ring, f);
  int r = io_uring_register_ring_fd(ring.get());
  f.registered_ring_fd = r == 1;
  if (r < 0)
    f.reasons["registered_ring_fd"] =
        detail::explain_call_error("io_uring_register(IORING_REGISTER_RING_FDS)", -r);
  return true;
}

// Whether `opcode` may be supported: listed, or unknown because the list itself could not be read (then
// the feature's own trial decides).
bool maybe_supported(const kernel_features& f, unsigned opcode) {
  return f.supports(opcode) || f.reasons.count("opcodes") != 0;
}

// Each setup flag on a ring of its own: a kernel that does not know one says EINVAL. Any other failure
// (ENOMEM under a small RLIMIT_MEMLOCK) says nothing about the flag: it counts as accepted, with the
// reason recorded, and the native backend still drops a flag that its own setup finds refused.
ring_flags probe_setup_flags(kernel_features& f) {
  constexpr std::pair<ring_flags, unsigned> kSetup[] = {
      {ring_flags::submit_all, IORING_SETUP_SUBMIT_ALL},
      {ring_flags::coop_taskrun, IORING_SETUP_COOP_TASKRUN},
      {ring_flags::single_issuer, IORING_SETUP_SINGLE_ISSUER},
      {ring_flags::defer_taskrun, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN},
  };
  ring_flags accepted = ring_flags::none;
  for (auto [flag, bits] : kSetup) {
    scratch_ring ring(bits);
    if (ring.ok() || ring.error() != EINVAL) accepted = accepted | flag;
    if (!ring.ok() && ring.error() != EINVAL) {
      f.reasons["setup_flags"] =
          to_string(flag) + " not verified: " + detail::explain_call_error("io_uring_setup", ring.error());
    }
  }
  return accepted;
}

// Each probe below answers "" when the feature worked, or why it did not: the call that failed and its
// errno, or what was missing from the answer. probe_kernel files the answers in kernel_features::reasons.

// Why a scratch ring (or two) could not be set up: a small RLIMIT_MEMLOCK, rings closed a moment ago
// still counted, says ENOMEM here while the first ring worked.
std::string setup_failure(const scratch_ring& ring) {
  return detail::explain_call_error("io_uring_setup (a scratch ring for this probe)", ring.error());
}

// Why the answer to a probe's operation is not the success it should be.
std::string op_failure(const char* op, const std::optional<completion>& c) {
  if (!c || c->user_data != kOpTag) return std::string(op) + ": no completion";
  return detail::explain_call_error(op, -c->res);
}

// Whether `target` received the probe message with exactly the user_data and len that were sent.
bool received_probe_message(scratch_ring& target) {
  std::optional<completion> c = target.wait();
  return c && c->user_data == kProbeUserData && c->res == static_cast<std::int32_t>(kProbeLen);
}

// A MSG_RING round trip: ring A posts to ring B, and B must see the message.
std::string probe_msg_ring() {
  scratch_ring sender, target;
  if (!sender.ok()) return setup_failure(sender);
  if (!target.ok()) return setup_failure(target);
  io_uring_prep_msg_ring(sender.sqe(kOpTag), target.fd(), kProbeLen, kProbeUserData, 0);
  std::optional<completion> sent = sender.submit_and_wait();
  if (!sent || sent->user_data != kOpTag || sent->res != 0) return op_failure("IORING_OP_MSG_RING", sent);
  if (!received_probe_message(target)) return "IORING_OP_MSG_RING: the target ring did not get the message";
  return {};
}

// IORING_MSG_RING_FLAGS_PASS: the target's CQE carries the flags the sender chose (sqe->file_index).
std::string probe_msg_ring_flags_pass() {
  scratch_ring sender, target;
  if (!sender.ok()) return setup_failure(sender);
  if (!target.ok()) return setup_failure(target);
  io_uring_sqe* sqe = sender.sqe(kOpTag);
  io_uring_prep_msg_ring(sqe, target.fd(), kProbeLen, kProbeUserData, kMsgRingFlagsPass);
  sqe->file_index = kProbeCqeFlags;
  std::optional<completion> sent = sender.submit_and_wait();
  if (!sent || sent->user_data != kOpTag || sent->res != 0)
    return op_failure("IORING_OP_MSG_RING (FLAGS_PASS)", sent);
  std::optional<completion> got = target.wait();
  if (!got || got->user_data != kProbeUserData || got->flags != kProbeCqeFlags) {
    return "IORING_MSG_RING_FLAGS_PASS: the target's CQE did not carry the sender's flags (6.3+)";
  }
  return {};
}

// IORING_REGISTER_SEND_MSG_RING: the same message from no ring at all, by the blind register opcode.
// Kernels before 6.13 answer EBADF (fd -1) or EINVAL (unknown opcode).
std::string probe_send_msg_ring() {
  scratch_ring target;
  if (!target.ok()) return setup_failure(target);
  io_uring_sqe sqe{};
  io_uring_prep_msg_ring(&sqe, target.fd(), kProbeLen, kProbeUserData, 0);
  if (::syscall(__NR_io_uring_register, -1, kRegisterSendMsgRing, &sqe, 1) != 0) {
    return detail::explain_call_error("io_uring_register(IORING_REGISTER_SEND_MSG_RING)", errno);
  }
  if (!received_probe_message(target))
    return "IORING_REGISTER_SEND_MSG_RING: the target ring did not get the message";
  return {};
}

// Registers an eventfd, checks that a completion signals it (the point of registering one), unregisters.
std::string probe_eventfd_register() {
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  unique_fd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!efd.ok()) return detail::explain_call_error("eventfd", errno);
  if (int r = io_uring_register_eventfd(ring.get(), efd.get()); r != 0) {
    return detail::explain_call_error("io_uring_register(IORING_REGISTER_EVENTFD)", -r);
  }
  io_uring_prep_nop(ring.sqe(kOpTag));
  std::optional<completion> done = ring.submit_and_wait();
  eventfd_t count = 0;
  bool signalled = done && ::eventfd_read(efd.get(), &count) == 0 && count > 0;
  if (int r = io_uring_unregister_eventfd(ring.get()); r != 0) {
    return detail::explain_call_error("io_uring_register(IORING_UNREGISTER_EVENTFD)", -r);
  }
  return signalled ? std::string() : "a registered eventfd was not signalled by a completion";
}

std::string probe_buf_ring() {
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  buffer_ring buffers(*ring.get());
  if (!buffers.registered()) return buffers.error();
  return buffers.unregister() ? std::string() : "io_uring_register(IORING_UNREGISTER_PBUF_RING) failed";
}

// A multishot accept on a listening socket with a connection waiting: the CQE that accepts it must say
// IORING_CQE_F_MORE (still armed). AF_UNIX with an autobound abstract address rather than TCP loopback:
// the kernel's accept path is the same, and it needs neither a file nor a configured network.
// nullopt when the sockets could not be set up, which says nothing about the kernel's io_uring.
std::optional<std::string> probe_multishot_accept() {
  unique_fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  unique_fd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener.ok() || !client.ok()) return std::nullopt;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socklen_t len = sizeof(sa_family_t);  // a bind with the family alone autobinds
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if (::bind(listener.get(), sa, len) != 0 || ::listen(listener.get(), 4) != 0) return std::nullopt;
  len = sizeof addr;
  if (::getsockname(listener.get(), sa, &len) != 0 || ::connect(client.get(), sa, len) != 0)
    return std::nullopt;

  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  io_uring_prep_multishot_accept(ring.sqe(kOpTag), listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
  std::optional<completion> accepted = ring.submit_and_wait();
  if (accepted && accepted->res >= 0) ::close(accepted->res);
  if (accepted && accepted->more()) ring.cancel_and_drain();
  if (!accepted || accepted->user_data != kOpTag || accepted->res < 0) {
    return op_failure("IORING_OP_ACCEPT (multishot)", accepted);
  }
  return accepted->more() ? std::string() : "multishot accept: the CQE lacked IORING_CQE_F_MORE (5.19+)";
}

// A multishot recv with a provided-buffer ring (multishot recv requires buffer selection) on a socket
// pair with data waiting: the CQE must carry the data in a provided buffer and say IORING_CQE_F_MORE.
std::optional<std::string> probe_multishot_recv() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  unique_fd ours(sv[0]), peer(sv[1]);
  static constexpr char kMessage[] = "probe";
  if (::write(peer.get(), kMessage, sizeof kMessage) != static_cast<ssize_t>(sizeof kMessage))
    return std::nullopt;

  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  buffer_ring buffers(*ring.get());
  if (!buffers.registered()) return "needs a provided-buffer ring: " + buffers.error();
  io_uring_sqe* s = ring.sqe(kOpTag);
  io_uring_prep_recv_multishot(s, ours.get(), nullptr, 0, 0);
  s->flags |= IOSQE_BUFFER_SELECT;
  s->buf_group = buffer_ring::kGroup;
  std::optional<completion> got = ring.submit_and_wait();
  if (got && got->more()) ring.cancel_and_drain();
  if (!got || got->user_data != kOpTag || got->res < 0) return op_failure("IORING_OP_RECV (multishot)", got);
  if (got->res != static_cast<std::int32_t>(sizeof kMessage) || (got->flags & IORING_CQE_F_BUFFER) == 0) {
    return "multishot recv: the data did not arrive in a provided buffer";
  }
  return got->more() ? std::string() : "multishot recv: the CQE lacked IORING_CQE_F_MORE (6.0+)";
}

// A multishot timeout of 1 us for two periods: the first CQE must say -ETIME and IORING_CQE_F_MORE.
std::string probe_multishot_timeout() {
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  __kernel_timespec period{0, 1000};
  io_uring_sqe* s = ring.sqe(kOpTag);
  io_uring_prep_timeout(s, &period, 2, 0);
  s->timeout_flags = detail::kTimeoutMultishot;
  std::optional<completion> tick = ring.submit_and_wait();
  if (tick && tick->more()) ring.cancel_and_drain();
  if (!tick || tick->user_data != kOpTag || tick->res != -ETIME)
    return op_failure("IORING_OP_TIMEOUT (multishot)", tick);
  return tick->more() ? std::string() : "multishot timeout: the CQE lacked IORING_CQE_F_MORE (6.4+)";
}

// A one-page buffer registered with tags (IORING_REGISTER_BUFFERS2, 5.13), and with `plain_send` a plain
// IORING_OP_SEND from it over a socketpair (IORING_RECVSEND_FIXED_BUF, which send_zc took first).
std::string probe_registered_buffer(bool plain_send) {
  int sv[2];
  if (plain_send && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return "socketpair failed";
  unique_fd ours(plain_send ? sv[0] : -1), peer(plain_send ? sv[1] : -1);
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  alignas(4096) static char page[4096];
  const iovec iov{page, sizeof page};
  const __u64 tag = 0;
  if (int r = io_uring_register_buffers_tags(ring.get(), &iov, &tag, 1); r != 0)
    return detail::explain_call_error("io_uring_register(IORING_REGISTER_BUFFERS2)", -r);
  if (!plain_send) return {};
  io_uring_sqe* s = ring.sqe(kOpTag);
  io_uring_prep_send(s, ours.get(), page, 8, MSG_DONTWAIT);
  s->ioprio |= IORING_RECVSEND_FIXED_BUF;
  s->buf_index = 0;
  std::optional<completion> got = ring.submit_and_wait();
  return got && got->user_data == kOpTag && got->res == 8 ? std::string()
                                                          : op_failure("IORING_OP_SEND (fixed buffer)", got);
}

// Files a probe's answer: true when it worked, else false with its reason in f.reasons[feature].
bool worked(kernel_features& f, const char* feature, std::string why_not) {
  if (why_not.empty()) return true;
  f.reasons[feature] = std::move(why_not);
  return false;
}

// A feature that needs `prerequisite`, which is off: off too, for that one's reason where it has one (a
// ring refused under RLIMIT_MEMLOCK, say), so that every feature the probe found off says why.
bool has(kernel_features& f, const char* feature, const char* prerequisite, bool on) {
  if (on) return true;
  if (auto it = f.reasons.find(prerequisite); it != f.reasons.end()) {
    f.reasons[feature] = std::string("needs ") + prerequisite + ", which is off: " + it->second;
  }
  return false;
}

}  // namespace

kernel_features probe_kernel() {
  kernel_features f;
  utsname u{};
  if (::uname(&u) == 0) f.kernel_release = u.release;
  if (!probe_basics(f)) return f;
  f.setup_flags = probe_setup_flags(f);
  // Where the opcode list says an opcode is missing, the feature is off without a trial (and without a
  // reason: the kernel is simply older). Where the list itself could not be read, the trial decides.
  f.msg_ring = maybe_supported(f, IORING_OP_MSG_RING) && worked(f, "msg_ring", probe_msg_ring());
  f.send_msg_ring = worked(f, "send_msg_ring", probe_send_msg_ring());
  f.msg_ring_flags_pass = has(f, "msg_ring_flags_pass", "msg_ring", f.msg_ring) &&
                          worked(f, "msg_ring_flags_pass", probe_msg_ring_flags_pass());
  f.eventfd_register = worked(f, "eventfd_register", probe_eventfd_register());
  f.buf_ring = worked(f, "buf_ring", probe_buf_ring());
  // Where the sockets themselves cannot be made (out of fds, a sandbox without AF_UNIX), the kernel release
  // decides: multishot accept came in 5.19, multishot recv in 6.0.
  if (maybe_supported(f, IORING_OP_ACCEPT)) {
    std::optional<std::string> why_not = probe_multishot_accept();
    f.multishot_accept =
        why_not ? worked(f, "multishot_accept", *why_not) : release_at_least(f.kernel_release, 5, 19);
  }
  if (maybe_supported(f, IORING_OP_RECV)) {
    std::optional<std::string> why_not = probe_multishot_recv();
    f.multishot_recv = why_not ? worked(f, "multishot_recv", *why_not)
                               : has(f, "multishot_recv", "buf_ring", f.buf_ring) &&
                                     release_at_least(f.kernel_release, 6, 0);
  }
  f.multishot_timeout = worked(f, "multishot_timeout", probe_multishot_timeout());
  // No trial for SEND_ZC (it would need a connected TCP socket): without the opcode list it stays off.
  f.send_zc = f.supports(IORING_OP_SEND_ZC);
  if (f.reasons.count("opcodes") != 0)
    f.reasons["send_zc"] = "unknown, because the opcode list is unavailable";
  f.registered_buffers = worked(f, "registered_buffers", probe_registered_buffer(false));
  f.send_fixed_buf = has(f, "send_fixed_buf", "registered_buffers", f.registered_buffers) &&
                     worked(f, "send_fixed_buf", probe_registered_buffer(true));
  return f;
}

const kernel_features& probed_kernel() {
  static const kernel_features features = probe_kernel();
  return features;
}

}  // namespace uring
