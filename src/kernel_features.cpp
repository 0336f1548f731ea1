#include "uring/kernel_features.hpp"

#include <liburing.h>
#include <sys/utsname.h>

#include <array>
#include <utility>
#include <cstdio>

#include "setup_error.hpp"

namespace uring {

namespace {

// Kernel names of IORING_OP_* in value order (include/uapi/linux/io_uring.h, up to 6.18).
constexpr std::array<std::string_view, 63> kOpcodeNames = {
    "NOP",          "READV",         "WRITEV",        "FSYNC",          "READ_FIXED",     "WRITE_FIXED",
    "POLL_ADD",     "POLL_REMOVE",   "SYNC_FILE_RANGE", "SENDMSG",      "RECVMSG",        "TIMEOUT",
    "TIMEOUT_REMOVE", "ACCEPT",      "ASYNC_CANCEL",  "LINK_TIMEOUT",   "CONNECT",        "FALLOCATE",
    "OPENAT",       "CLOSE",         "FILES_UPDATE",  "STATX",          "READ",           "WRITE",
    "FADVISE",      "MADVISE",       "SEND",          "RECV",           "OPENAT2",        "EPOLL_CTL",
    "SPLICE",       "PROVIDE_BUFFERS", "REMOVE_BUFFERS", "TEE",         "SHUTDOWN",       "RENAMEAT",
    "UNLINKAT",     "MKDIRAT",       "SYMLINKAT",     "LINKAT",         "MSG_RING",       "FSETXATTR",
    "SETXATTR",     "FGETXATTR",     "GETXATTR",      "SOCKET",         "URING_CMD",      "SEND_ZC",
    "SENDMSG_ZC",   "READ_MULTISHOT", "WAITID",       "FUTEX_WAIT",     "FUTEX_WAKE",     "FUTEX_WAITV",
    "FIXED_FD_INSTALL", "FTRUNCATE", "BIND",          "LISTEN",         "RECV_ZC",        "EPOLL_WAIT",
    "READV_FIXED",  "WRITEV_FIXED",  "PIPE",
};

// Kernel names of the IORING_FEAT_* bits, by bit number.
constexpr std::array<std::string_view, 18> kFeatureNames = {
    "SINGLE_MMAP", "NODROP",        "SUBMIT_STABLE", "RW_CUR_POS",  "CUR_PERSONALITY", "FAST_POLL",
    "POLL_32BITS", "SQPOLL_NONFIXED", "EXT_ARG",     "NATIVE_WORKERS", "RSRC_TAGS",    "CQE_SKIP",
    "LINKED_FILE", "REG_REG_RING",  "RECVSEND_BUNDLE", "MIN_TIMEOUT", "RW_ATTR",       "NO_IOWAIT",
};

}  // namespace

std::string opcode_name(unsigned opcode) {
  if (opcode < kOpcodeNames.size()) return std::string(kOpcodeNames[opcode]);
  return "op" + std::to_string(opcode);
}

std::string feature_name(unsigned bit) {
  if (bit < kFeatureNames.size()) return std::string(kFeatureNames[bit]);
  return "bit" + std::to_string(bit);
}

kernel_features probe_kernel() {
  kernel_features f;
  utsname u{};
  if (uname(&u) == 0) f.kernel_release = u.release;

  io_uring ring{};
  io_uring_params params{};
  int r = io_uring_queue_init_params(4, &ring, &params);
  if (r < 0) {
    f.setup_errno = -r;
    f.reason = detail::explain_setup_error(-r);
    return f;
  }
  f.io_uring_usable = true;
  f.feature_bits = params.features;
  if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
    for (unsigned op = 0; op <= probe->last_op && op < f.opcodes.size(); ++op) {
      if (io_uring_opcode_supported(probe, static_cast<int>(op))) f.opcodes.set(op);
    }
    io_uring_free_probe(probe);
  }
  f.registered_ring_fd = io_uring_register_ring_fd(&ring) == 1;
  io_uring_queue_exit(&ring);

  // Each setup flag on a ring of its own: a kernel that refuses one says EINVAL.
  constexpr std::pair<ring_flags, unsigned> kSetup[] = {
      {ring_flags::submit_all, IORING_SETUP_SUBMIT_ALL},
      {ring_flags::coop_taskrun, IORING_SETUP_COOP_TASKRUN},
      {ring_flags::single_issuer, IORING_SETUP_SINGLE_ISSUER},
      {ring_flags::defer_taskrun, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN},
  };
  for (auto [flag, bits] : kSetup) {
    io_uring probe_ring{};
    io_uring_params p{};
    p.flags = bits;
    if (io_uring_queue_init_params(2, &probe_ring, &p) == 0) {
      f.setup_flags = f.setup_flags | flag;
      io_uring_queue_exit(&probe_ring);
    }
  }
  f.msg_ring = f.supports(IORING_OP_MSG_RING);
  f.send_zc = f.supports(IORING_OP_SEND_ZC);
  return f;
}

const kernel_features& probed_kernel() {
  static const kernel_features features = probe_kernel();
  return features;
}

std::string to_string(const kernel_features& f) {
  std::string out;
  out += "kernel            " + f.kernel_release + "\n";
  if (!f.io_uring_usable) {
    out += "io_uring          unusable\n";
    out += "reason            " + f.reason + "\n";
    return out;
  }
  out += "io_uring          usable\n";
  out += std::string("registered ring   ") + (f.registered_ring_fd ? "yes" : "no") + "\n";
  out += "setup flags       " + to_string(f.setup_flags) + "\n";
  out += std::string("msg_ring          ") + (f.msg_ring ? "yes" : "no") + "\n";
  out += "features         ";
  for (unsigned bit = 0; bit < 32; ++bit) {
    if (f.feature_bits & (1u << bit)) out += " " + feature_name(bit);
  }
  out += "\nopcodes           " + std::to_string(f.opcodes.count()) + " supported\n";
  std::string line;
  for (unsigned op = 0; op < f.opcodes.size(); ++op) {
    if (!f.opcodes.test(op) && op >= kOpcodeNames.size()) continue;
    char cell[40];
    std::snprintf(cell, sizeof cell, "  %-3u %-18s %-4s", op, opcode_name(op).c_str(), f.opcodes.test(op) ? "yes" : "no");
    line += cell;
    if (line.size() >= 3 * 29) {
      out += line + "\n";
      line.clear();
    }
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

}  // namespace uring
