// uring/kernel_features.hpp — what the running kernel's io_uring can do.
//
// Provides: uring::kernel_features, uring::probe_kernel, uring::opcode_name, uring::feature_name.
// Threads: probe_kernel() may be called from any thread; kernel_features is a plain value.
//
// The probe sets up a small throw-away ring once and asks it: whether io_uring is usable at all (and, if
// not, the errno and a sentence on why and what to do), which opcodes it supports (IORING_REGISTER_PROBE),
// the IORING_FEAT_* bits, and whether a ring fd can be registered. to_string() prints a readable table;
// samples/probe (uring-probe) shows it.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

#include "uring/executor_options.hpp"

namespace uring {

struct kernel_features {
  std::string kernel_release;   // uname -r
  bool io_uring_usable = false;  // io_uring_setup succeeded
  int setup_errno = 0;           // when not usable: the errno io_uring_setup returned
  std::string reason;            // when not usable: why, and what to do about it
  std::uint32_t feature_bits = 0;            // IORING_FEAT_* reported by io_uring_setup
  std::bitset<256> opcodes;                  // IORING_OP_* the kernel supports
  bool registered_ring_fd = false;           // io_uring_register_ring_fd works (kernel 5.18+)
  ring_flags setup_flags = ring_flags::none;  // setup flags the kernel accepted (defer_taskrun: with single_issuer)
  bool msg_ring = false;          // an IORING_OP_MSG_RING round trip between two rings worked (5.18+)
  bool send_msg_ring = false;     // IORING_REGISTER_SEND_MSG_RING (ring-less senders, 6.13+)
  bool eventfd_register = false;  // io_uring_register_eventfd
  bool buf_ring = false;          // io_uring_register_buf_ring (5.19+)
  bool multishot_accept = false;  // IORING_ACCEPT_MULTISHOT (5.19+)
  bool multishot_recv = false;    // IORING_RECV_MULTISHOT (6.0+)
  bool send_zc = false;           // IORING_OP_SEND_ZC (6.0+)

  [[nodiscard]] bool supports(unsigned opcode) const noexcept { return opcode < 256 && opcodes.test(opcode); }
  [[nodiscard]] bool has_feature(std::uint32_t feat_bit) const noexcept { return (feature_bits & feat_bit) != 0; }
};

// Probes the running kernel (a fresh answer each call).
kernel_features probe_kernel();
// The process's probe, run once on first use (thread-safe); what executors consult.
const kernel_features& probed_kernel();

// The kernel's name for an IORING_OP_* value ("READ", "MSG_RING"), or "op<N>" for one we do not know.
std::string opcode_name(unsigned opcode);
// The name of IORING_FEAT_* bit number `bit` ("NODROP"), or "bit<N>".
std::string feature_name(unsigned bit);

// A readable multi-line report of everything probed.
std::string to_string(const kernel_features& f);

}  // namespace uring
