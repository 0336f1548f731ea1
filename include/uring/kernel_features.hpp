/// @file
/// uring/kernel_features.hpp — what the running kernel's io_uring can do.
///
/// Provides: uring::kernel_features, uring::probe_kernel, uring::probed_kernel, uring::opcode_name,
/// uring::feature_name, and to_string / to_json for kernel_features (and to_json for executor_plan).
/// Threads: probe_kernel() may be called from any thread; kernel_features is a plain value.
///
/// The probe asks small throw-away rings, each closed again on every path: whether io_uring is usable at all
/// (and, if not, the errno and a sentence on why and what to do), which opcodes it supports
/// (IORING_REGISTER_PROBE), the IORING_FEAT_* bits, which setup flags it accepts, and it tries each feature
/// for real: a registered ring fd, a MSG_RING round trip, IORING_REGISTER_SEND_MSG_RING, eventfd
/// registration, a provided-buffer ring, multishot accept and recv on local sockets. The whole probe takes
/// about 0.3-0.8 ms on kernel 6.18. to_string() prints a readable table and to_json() the same as one JSON
/// object; samples/probe (uring-probe) shows both.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "uring/executor_options.hpp"

namespace uring {

struct executor_plan;  ///< uring/plan.hpp

struct kernel_features {
  std::string kernel_release;       ///< uname -r
  bool io_uring_usable = false;     ///< io_uring_setup succeeded
  int setup_errno = 0;              ///< when not usable: the errno io_uring_setup returned
  std::string reason;               ///< when not usable: why, and what to do about it
  std::uint32_t feature_bits = 0;   ///< IORING_FEAT_* reported by io_uring_setup
  std::bitset<256> opcodes;         ///< IORING_OP_* the kernel supports
  bool registered_ring_fd = false;  ///< io_uring_register_ring_fd works (kernel 5.18+)
  ring_flags setup_flags =
      ring_flags::none;        ///< setup flags the kernel accepted (defer_taskrun: with single_issuer)
  bool msg_ring = false;       ///< an IORING_OP_MSG_RING round trip between two rings worked (5.18+)
  bool send_msg_ring = false;  ///< IORING_REGISTER_SEND_MSG_RING (ring-less senders, 6.13+)
  bool msg_ring_flags_pass =
      false;  ///< IORING_MSG_RING_FLAGS_PASS: the sender sets the target CQE's flags (6.3+)
  bool eventfd_register = false;    ///< io_uring_register_eventfd
  bool buf_ring = false;            ///< io_uring_register_buf_ring (5.19+)
  bool multishot_accept = false;    ///< IORING_ACCEPT_MULTISHOT (5.19+)
  bool multishot_recv = false;      ///< IORING_RECV_MULTISHOT (6.0+)
  bool send_zc = false;             ///< IORING_OP_SEND_ZC (6.0+)
  bool multishot_timeout = false;   ///< IORING_TIMEOUT_MULTISHOT: a periodic timer in one request (6.4+)
  bool read_multishot = false;      ///< IORING_OP_READ_MULTISHOT on a pipe, into a provided buffer (6.7+)
  bool registered_buffers = false;  ///< IORING_REGISTER_BUFFERS2, buffers with tags (5.13+)
  /// a plain IORING_OP_SEND from a registered buffer (send_zc has it from 6.0)
  bool send_fixed_buf = false;
  bool napi = false;             ///< IORING_REGISTER_NAPI: NAPI busy polling for a ring (6.9+)
  bool epoll_busy_poll = false;  ///< EPIOCSPARAMS: the same for an epoll fd, the emulation's (6.9+)
  bool sqpoll = false;           ///< IORING_SETUP_SQPOLL: a NOP through a polled ring (5.11+ unprivileged)
  /// IORING_RECVSEND_BUNDLE on a recv from a buffer ring: one completion for several buffers, never more
  /// of them than its length allows (6.10+)
  bool recv_bundle = false;
  /// IOU_PBUF_RING_INC: a buffer ring consumed incrementally, each completion continuing where the last one
  /// from the same buffer ended, flagged IORING_CQE_F_BUF_MORE while the kernel keeps the buffer (6.12+)
  bool recv_incremental = false;
  /// IORING_RECVSEND_BUNDLE on a send with buffer selection: one send takes every buffer queued in a ring,
  /// in order, and completes once with the bytes of all of them (6.10+)
  bool send_bundle = false;
  /// Why a feature above is off, or the opcode list empty, where the probe learnt more than "this kernel
  /// lacks it": the call that failed, its errno and the usual cause, by the feature's name in to_json
  /// ("opcodes", "registered_ring_fd", "setup_flags", "msg_ring", "send_msg_ring", "msg_ring_flags_pass",
  /// "eventfd_register", "buf_ring", "multishot_accept", "multishot_recv", "send_zc", "multishot_timeout",
  /// "read_multishot", "registered_buffers", "send_fixed_buf", "napi", "epoll_busy_poll", "sqpoll",
  /// "recv_bundle", "recv_incremental", "send_bundle"). A sandbox that denies io_uring_register, or a small
  /// RLIMIT_MEMLOCK, shows up here feature by feature.
  std::map<std::string, std::string> reasons;

  /// Whether the probe found IORING_OP_* `opcode` supported.
  [[nodiscard]] bool supports(unsigned opcode) const noexcept { return opcode < 256 && opcodes.test(opcode); }
  /// Whether the ring reported IORING_FEAT_* `feat_bit` at setup.
  [[nodiscard]] bool has_feature(std::uint32_t feat_bit) const noexcept {
    return (feature_bits & feat_bit) != 0;
  }
  /// reasons[feature], or "" when the probe recorded none.
  [[nodiscard]] std::string reason_for(const std::string& feature) const {
    auto it = reasons.find(feature);
    return it == reasons.end() ? std::string() : it->second;
  }
};

/// Probes the running kernel (a fresh answer each call).
kernel_features probe_kernel();
/// The process's probe, run once on first use (thread-safe); what executors consult.
const kernel_features& probed_kernel();

/// The kernel's name for an IORING_OP_* value ("READ", "MSG_RING"), or "op<N>" for one we do not know.
std::string opcode_name(unsigned opcode);
/// The name of IORING_FEAT_* bit number `bit` ("NODROP"), or "bit<N>".
std::string feature_name(unsigned bit);

/// A readable multi-line report of everything probed.
std::string to_string(const kernel_features& f);

/// Everything probed as one JSON object on one line: the fields by their names above, `features` and
/// `opcodes` as arrays of the kernel's names, `setup_flags` as an array of flag names, `reasons` as an
/// object of strings.
std::string to_json(const kernel_features& f);
/// The plan as one JSON object: backend, flags (array of names), register_ring_fd, msg_ring, send_msg_ring,
/// allowed_ops (array of names, empty when unrestricted), notes (array of strings). Declared here rather
/// than in plan.hpp only so that plan.hpp need not change; plan.hpp includes this header, so it is
/// available wherever executor_plan is.
std::string to_json(const executor_plan& plan);

}  // namespace uring
