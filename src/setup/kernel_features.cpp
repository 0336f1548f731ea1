// setup/kernel_features.cpp — the kernel probe: each feature tried for real on a throw-away ring
// (the report, as a table and as JSON, is in features_report.cpp).
#include "uring/kernel_features.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <sys/epoll.h>
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

#include "backend/napi.hpp"
#include "backend/native/ring_mapping.hpp"
#include "setup/liburing_compat.hpp"
#include "setup/scratch_ring.hpp"
#include "setup/setup_error.hpp"
#include "uring/detail/operation.hpp"
#include "uring/plan.hpp"

namespace uring {

namespace {

using namespace probe;

// IORING_REGISTER_SEND_MSG_RING is a "blind" register opcode, issued with fd -1, that posts a MSG_RING's
// CQE to the target ring without needing a ring of the sender's own (liburing_compat.hpp).
using detail::kMsgRingFlagsPass;
using detail::kRegisterSendMsgRing;
constexpr std::uint32_t kProbeCqeFlags = 0x5a5a0000;  // flags no kernel would set on its own

// What the messaging probes send: values no other CQE on a fresh ring could carry by accident.
constexpr std::uint64_t kProbeUserData = 0x7572'696e'6750'5242ULL;
constexpr unsigned kProbeLen = 0x5a17;
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

// One request on `ours` after `data` was written to `peer`, selecting its buffer from a ring of
// buffer_ring's buffers: the SQE as `prep` makes it for the fd, buffer selection added. "" with the first
// completion in `got` (a multishot one cancelled after it), or why there was none; nullopt when the data
// could not be written, which says nothing about the kernel's io_uring.
template <class Prep>
std::optional<std::string> run_from_buffer_ring(int ours, int peer, std::string_view data, Prep prep,
                                                std::optional<completion>& got) {
  if (::write(peer, data.data(), data.size()) != static_cast<ssize_t>(data.size())) return std::nullopt;
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  buffer_ring buffers(*ring.get());
  if (!buffers.registered()) return "needs a provided-buffer ring: " + buffers.error();
  io_uring_sqe* s = ring.sqe(kOpTag);
  prep(s, ours);
  s->flags |= IOSQE_BUFFER_SELECT;
  s->buf_group = buffer_ring::kGroup;
  got = ring.submit_and_wait();
  if (got && got->more()) ring.cancel_and_drain();
  return std::string();
}

// A multishot request that selects a provided buffer (multishot recv and read require buffer selection):
// the CQE must carry a message written to `peer` in a provided buffer and say IORING_CQE_F_MORE. `op`
// names the request, `what` the feature, `since` its kernel.
template <class Prep>
std::optional<std::string> probe_multishot_into_buffer(int ours, int peer, const char* op, const char* what,
                                                       const char* since, Prep prep) {
  static constexpr char kMessage[] = "probe";
  std::optional<completion> got;
  std::optional<std::string> ran = run_from_buffer_ring(ours, peer, {kMessage, sizeof kMessage}, prep, got);
  if (!ran || !ran->empty()) return ran;
  if (!got || got->user_data != kOpTag || got->res < 0) return op_failure(op, got);
  if (got->res != static_cast<std::int32_t>(sizeof kMessage) || (got->flags & IORING_CQE_F_BUFFER) == 0) {
    return std::string(what) + ": the data did not arrive in a provided buffer";
  }
  return got->more() ? std::string()
                     : std::string(what) + ": the CQE lacked IORING_CQE_F_MORE (" + since + "+)";
}

// A multishot recv on a socket pair.
std::optional<std::string> probe_multishot_recv() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  unique_fd ours(sv[0]), peer(sv[1]);
  return probe_multishot_into_buffer(
      ours.get(), peer.get(), "IORING_OP_RECV (multishot)", "multishot recv", "6.0",
      [](io_uring_sqe* s, int fd) { io_uring_prep_recv_multishot(s, fd, nullptr, 0, 0); });
}

// A multishot read on a pipe (a kernel before 6.7 fails the opcode with EINVAL).
std::optional<std::string> probe_read_multishot() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
  unique_fd reader(p[0]), writer(p[1]);
  return probe_multishot_into_buffer(reader.get(), writer.get(), "IORING_OP_READ_MULTISHOT", "multishot read",
                                     "6.7", [](io_uring_sqe* s, int fd) {
                                       io_uring_prep_rw(detail::kOpReadMultishot, s, fd, nullptr, 0,
                                                        ~std::uint64_t{0});
                                     });
}

// A bundled recv (IORING_RECVSEND_BUNDLE) from a buffer ring of 4 buffers, with 3 buffers' worth waiting and
// a length of 2 buffers and a byte: the one CQE must carry exactly 2 full buffers. More would break the
// per-stream share of leased receives (a kernel that appends a retry past the length), fewer means no
// bundling. The length is one byte past the buffers allowed so that the kernel maps a partial last buffer,
// drops it, and so does not append.
std::optional<std::string> probe_recv_bundle() {
  constexpr auto kTwo = static_cast<std::int32_t>(2 * buffer_ring::kBufferSize);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  unique_fd ours(sv[0]), peer(sv[1]);
  std::optional<completion> got;
  std::optional<std::string> ran = run_from_buffer_ring(
      ours.get(), peer.get(), std::string(3 * buffer_ring::kBufferSize, 'b'),
      [](io_uring_sqe* s, int fd) {
        io_uring_prep_recv(s, fd, nullptr, 2 * buffer_ring::kBufferSize + 1, 0);
        s->ioprio |= detail::kRecvsendBundle;
      },
      got);
  if (!ran || !ran->empty()) return ran;
  if (!got || got->user_data != kOpTag || got->res < 0) return op_failure("IORING_OP_RECV (bundle)", got);
  if (got->res > kTwo) return "bundled recv: took more buffers than its length allows";
  return got->res == kTwo ? std::string() : "bundled recv: one completion did not span several buffers";
}

// Two recvs from a buffer ring registered with IOU_PBUF_RING_INC, each after a message smaller than a
// buffer: both must land in the same buffer, flagged IORING_CQE_F_BUF_MORE, the second right after the
// first. A kernel before 6.12 refuses the flag (EINVAL); one that took it but used a buffer per completion
// would cost an incremental pool its point and, worse, its accounting of offsets.
std::optional<std::string> probe_recv_incremental() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  unique_fd ours(sv[0]), peer(sv[1]);
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  buffer_ring buffers(*ring.get(), detail::kPbufRingInc);
  if (!buffers.registered()) return "IOU_PBUF_RING_INC: " + buffers.error();
  std::optional<completion> got[2];
  for (std::string_view part : {std::string_view("inc-"), std::string_view("ring")}) {
    if (::write(peer.get(), part.data(), part.size()) != static_cast<ssize_t>(part.size()))
      return std::nullopt;
    io_uring_sqe* s = ring.sqe(kOpTag);
    io_uring_prep_recv(s, ours.get(), nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = buffer_ring::kGroup;
    std::optional<completion>& c = got[part == "inc-" ? 0 : 1];
    c = ring.submit_and_wait();
    if (!c || c->user_data != kOpTag || c->res != 4) return op_failure("IORING_OP_RECV (incremental)", c);
  }
  const auto bid = [](const completion& c) { return c.flags >> IORING_CQE_BUFFER_SHIFT; };
  if ((got[0]->flags & got[1]->flags & detail::kCqeBufMore) == 0)
    return "incremental recv: the CQEs lacked IORING_CQE_F_BUF_MORE (6.12+)";
  if (bid(*got[0]) != bid(*got[1]) || std::string_view(buffers.buffer(bid(*got[0])), 8) != "inc-ring")
    return "incremental recv: the second completion did not continue in the first one's buffer";
  return std::string();
}

// A bundled send (IORING_RECVSEND_BUNDLE with buffer selection) from a ring of 4 buffers: the one CQE must
// carry all of them, in order from the first, and the peer must read exactly their bytes. A kernel before
// 6.10 refuses the flag (EINVAL).
std::optional<std::string> probe_send_bundle() {
  constexpr auto kAll = static_cast<std::int32_t>(buffer_ring::kEntries * buffer_ring::kBufferSize);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
  unique_fd ours(sv[0]), peer(sv[1]);
  std::optional<completion> got;
  std::optional<std::string> ran = run_from_buffer_ring(
      ours.get(), peer.get(), {},
      [](io_uring_sqe* s, int fd) {
        io_uring_prep_send(s, fd, nullptr, 0, MSG_NOSIGNAL);
        s->ioprio |= detail::kRecvsendBundle;
      },
      got);
  if (!ran || !ran->empty()) return ran;
  if (!got || got->user_data != kOpTag || got->res < 0) return op_failure("IORING_OP_SEND (bundle)", got);
  char sink[kAll + 1];
  const ssize_t n = ::recv(peer.get(), sink, sizeof sink, MSG_DONTWAIT);
  if (got->res != kAll || n != kAll || (got->flags >> IORING_CQE_BUFFER_SHIFT) != 0)
    return "bundled send: one completion did not send every queued buffer";
  return std::string();
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

// IORING_REGISTER_NAPI (6.9): registered on a ring (with no busy polling) and taken back.
std::string probe_napi() {
  scratch_ring ring;
  if (!ring.ok()) return setup_failure(ring);
  if (int r = detail::register_napi(ring.fd(), {}); r < 0)
    return detail::explain_call_error("io_uring_register(IORING_REGISTER_NAPI)", -r);
  detail::napi_settings was;
  if (int r = detail::unregister_napi(ring.fd(), was); r < 0)
    return detail::explain_call_error("io_uring_register(IORING_UNREGISTER_NAPI)", -r);
  return {};
}

// IORING_SETUP_SQPOLL: a NOP taken from the SQ by the ring's poller thread. Unprivileged since 5.11;
// a sandbox may still refuse the thread (EPERM).
std::string probe_sqpoll() {
  scratch_ring ring(IORING_SETUP_SQPOLL);
  if (!ring.ok()) return detail::explain_call_error("io_uring_setup(IORING_SETUP_SQPOLL)", ring.error());
  io_uring_prep_nop(ring.sqe(kOpTag));
  std::optional<completion> got = ring.submit_and_wait();
  return got && got->user_data == kOpTag && got->res == 0 ? std::string()
                                                          : op_failure("IORING_OP_NOP (SQPOLL)", got);
}

// EPIOCSPARAMS (6.9): the emulation's epoll fd takes the same settings.
std::string probe_epoll_busy_poll() {
  unique_fd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (ep.get() < 0) return detail::explain_call_error("epoll_create1", errno);
  if (int r = detail::set_epoll_busy_poll(ep.get(), {}); r < 0)
    return detail::explain_call_error("ioctl(EPIOCSPARAMS)", -r);
  return {};
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
  // The emulation's, so asked whether io_uring works or not.
  f.epoll_busy_poll = worked(f, "epoll_busy_poll", probe_epoll_busy_poll());
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
  if (maybe_supported(f, IORING_OP_RECV)) {
    // Untried is off: what it tests (the length kept) differs between kernels that have bundles.
    std::optional<std::string> why_not = probe_recv_bundle();
    f.recv_bundle = worked(f, "recv_bundle", why_not ? *why_not : "untried: no socket pair for the probe");
  }
  if (maybe_supported(f, IORING_OP_RECV)) {
    std::optional<std::string> why_not = probe_recv_incremental();
    f.recv_incremental =
        has(f, "recv_incremental", "buf_ring", f.buf_ring) &&
        worked(f, "recv_incremental", why_not ? *why_not : "untried: no socket pair for the probe");
  }
  if (maybe_supported(f, IORING_OP_SEND)) {
    std::optional<std::string> why_not = probe_send_bundle();
    f.send_bundle = worked(f, "send_bundle", why_not ? *why_not : "untried: no socket pair for the probe");
  }
  f.multishot_timeout = worked(f, "multishot_timeout", probe_multishot_timeout());
  if (maybe_supported(f, detail::kOpReadMultishot)) {
    std::optional<std::string> why_not = probe_read_multishot();
    f.read_multishot = why_not ? worked(f, "read_multishot", *why_not)
                               : has(f, "read_multishot", "buf_ring", f.buf_ring) &&
                                     release_at_least(f.kernel_release, 6, 7);
  }
  // No trial for SEND_ZC (it would need a connected TCP socket): without the opcode list it stays off.
  f.send_zc = f.supports(IORING_OP_SEND_ZC);
  if (f.reasons.count("opcodes") != 0)
    f.reasons["send_zc"] = "unknown, because the opcode list is unavailable";
  f.registered_buffers = worked(f, "registered_buffers", probe_registered_buffer(false));
  f.send_fixed_buf = has(f, "send_fixed_buf", "registered_buffers", f.registered_buffers) &&
                     worked(f, "send_fixed_buf", probe_registered_buffer(true));
  f.napi = worked(f, "napi", probe_napi());
  f.sqpoll = worked(f, "sqpoll", probe_sqpoll());
  return f;
}

const kernel_features& probed_kernel() {
  static const kernel_features features = probe_kernel();
  return features;
}

}  // namespace uring
