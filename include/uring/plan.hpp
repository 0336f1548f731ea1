/// @file
/// uring/plan.hpp — how an executor will run, decided from the kernel's answers and the user's wishes.
///
/// Provides: uring::executor_plan, uring::plan_overrides, uring::make_plan.
/// Threads: pure functions and plain values; any thread.
///
/// make_plan is a pure function of (kernel_features, executor_options, overrides): tests feed it fake
/// kernels. Every decision that differs from what was asked is written into `notes` with its reason, so
/// `uring-probe` (and executor::plan()) can tell a user why a fallback was chosen.
#pragma once

#include <string>
#include <vector>

#include "uring/executor_options.hpp"
#include "uring/kernel_features.hpp"

namespace uring {

/// Operator overrides, normally read from the environment:
///   URING_BACKEND=auto|native|emulated   overrides executor_options::backend (auto leaves it alone)
///   URING_DISABLE=msg_ring,defer_taskrun  adds to executor_options::disable
struct plan_overrides {
  /// From URING_BACKEND: automatic leaves executor_options::backend alone.
  backend_kind backend = backend_kind::automatic;
  /// From URING_DISABLE: added to executor_options::disable.
  feature_set disable;

  /// Parses the two variables; throws std::invalid_argument naming a value it does not know.
  static plan_overrides from_environment();
};

/// How an executor will run: what make_plan decided from the kernel's answers and the user's wishes, each
/// decision that differs from the request written into `notes` with its reason. Threads: a plain value.
struct executor_plan {
  backend_kind backend = backend_kind::native;  ///< native or emulated, never automatic
  ring_flags flags = ring_flags::none;          ///< setup flags to ask for (native)
  bool register_ring_fd = false;                ///< native: register the ring fd
  bool msg_ring = false;           ///< cross-executor messages by MSG_RING (else mailbox + eventfd)
  bool send_msg_ring = false;      ///< ring-less threads post by IORING_REGISTER_SEND_MSG_RING
  bool buf_ring = false;           ///< leased recv by provided buffer ring + multishot recv
  bool send_zc = false;            ///< send_zc by IORING_OP_SEND_ZC (else a plain send)
  bool linked_chains = false;      ///< chain() by linked SQEs in one submit (else one step at a time)
  bool multishot_timeout = false;  ///< ticker by one multishot timeout (else one timeout per tick)
  bool read_multishot = false;     ///< read_stream by one multishot read (else one read per chunk)
  bool napi = false;               ///< executor_options::napi_busy_poll applied (ring, or emulated: epoll)
  bool sqpoll = false;             ///< native: executor_options::sqpoll applied (IORING_SETUP_SQPOLL)
  bool recv_bundle = false;        ///< a leased receive may fill several pool buffers at once
  /// an incremental pool's ring is consumed by the kernel (IOU_PBUF_RING_INC)
  bool recv_incremental = false;
  bool send_bundle = false;        ///< send_queue by bundled sends from a buffer ring (else one sendmsg each)
  op_allowlist allowed_ops;        ///< executor_options::allowed_ops (native: also the kernel's)
  std::vector<std::string> notes;  ///< each fallback or override, with its reason
};

/// Throws std::system_error (with the kernel's reason) when native is demanded but io_uring is unusable.
executor_plan make_plan(const kernel_features& kernel, const executor_options& request,
                        const plan_overrides& overrides);

/// The plan as text: backend, setup flags and messaging road on one line, then a line per note.
std::string to_string(const executor_plan& plan);

}  // namespace uring
