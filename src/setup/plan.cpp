// plan.cpp — the pure mapping (kernel, request, overrides) -> executor_plan, and the names it parses.
#include "uring/plan.hpp"

#include <cstdlib>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "setup/text.hpp"

namespace uring {

namespace {

// The ring flag each disable-able setup feature stands for.
constexpr std::pair<feature, ring_flags> kFlagFeatures[] = {
    {feature::submit_all, ring_flags::submit_all},
    {feature::coop_taskrun, ring_flags::coop_taskrun},
    {feature::single_issuer, ring_flags::single_issuer},
    {feature::defer_taskrun, ring_flags::defer_taskrun},
};

backend_kind parse_backend(const std::string& v) {
  if (v.empty() || v == "auto" || v == "automatic") return backend_kind::automatic;
  if (v == "native") return backend_kind::native;
  if (v == "emulated") return backend_kind::emulated;
  throw std::invalid_argument("URING_BACKEND: unknown value '" + v + "' (expected auto, native or emulated)");
}

// What an allowlist means on `backend`, for the plan's notes.
std::string restriction_note(const op_allowlist& allowed, backend_kind backend) {
  std::string note = "restrictions: operations limited to " + to_string(allowed);
  if (backend == backend_kind::native) {
    note +=
        " (the ring is restricted by the kernel, which also allows READ, ASYNC_CANCEL and LINK_TIMEOUT "
        "for the executor's own use)";
  } else {
    note += " (enforced by the emulation)";
  }
  return note;
}

// ": <the probe's reason>" where it recorded one for `feature`, else "".
std::string because(const kernel_features& kernel, const std::string& feature) {
  std::string why = kernel.reason_for(feature);
  return why.empty() ? why : ": " + why;
}

// executor_options::napi_busy_poll on `plan`'s backend: on where asked for and the kernel has it, else a
// note saying why not.
void plan_napi(const kernel_features& kernel, const executor_options& request, feature_set disabled,
               executor_plan& plan) {
  if (request.napi_busy_poll.count() <= 0) return;
  const bool native = plan.backend == backend_kind::native;
  const char* feature = native ? "napi" : "epoll_busy_poll";
  if (disabled.contains(feature::napi)) {
    plan.notes.push_back("napi: disabled by request");
  } else if (!(native ? kernel.napi : kernel.epoll_busy_poll)) {
    plan.notes.push_back(std::string("napi: ") + (native ? "IORING_REGISTER_NAPI" : "epoll's EPIOCSPARAMS") +
                         " unavailable on kernel " + kernel.kernel_release + " (6.9+)" +
                         because(kernel, feature) + "; no busy polling");
  } else {
    plan.napi = true;
  }
}

// executor_options::sqpoll on a native plan: on where asked for and the kernel has it, else a note. The
// kernel refuses COOP_TASKRUN and DEFER_TASKRUN on an SQPOLL ring (its poller runs the task work), so
// they go, with a note each. So does MSG_RING: the poller would send a message after the sender's turn,
// when the target may already have closed its ring (and its fd number may name another), while the
// messaging protocol checks the target at the send; the mailbox road checks and delivers in one step.
void plan_sqpoll(const kernel_features& kernel, const executor_options& request, feature_set disabled,
                 executor_plan& plan) {
  if (!request.sqpoll.enabled) return;
  if (disabled.contains(feature::sqpoll)) {
    plan.notes.push_back("sqpoll: disabled by request");
    return;
  }
  if (!kernel.sqpoll) {
    plan.notes.push_back("sqpoll: IORING_SETUP_SQPOLL unavailable on kernel " + kernel.kernel_release +
                         because(kernel, "sqpoll") + "; the executor submits by io_uring_enter");
    return;
  }
  plan.sqpoll = true;
  if (plan.msg_ring) {
    plan.msg_ring = plan.send_msg_ring = false;
    plan.notes.push_back(
        "messaging: mailbox + eventfd, because an SQPOLL ring's poller would send MSG_RING after the turn "
        "that checked its target");
  }
  for (ring_flags flag : {ring_flags::coop_taskrun, ring_flags::defer_taskrun}) {
    if (any(plan.flags & flag)) {
      plan.flags = plan.flags & ~flag;
      plan.notes.push_back("setup: " + to_string(flag) +
                           " dropped, because SQPOLL's thread runs the ring's task work");
    }
  }
}

void plan_recv_bundle(const kernel_features& kernel, feature_set disabled, executor_plan& plan);
void plan_recv_incremental(const kernel_features& kernel, feature_set disabled, executor_plan& plan);
void plan_send_bundle(const kernel_features& kernel, feature_set disabled, executor_plan& plan);

// The rest of an emulated plan: its notes on the options that mean something else there.
void plan_emulated(const kernel_features& kernel, const executor_options& request, feature_set disabled,
                   executor_plan& plan) {
  if (request.allowed_ops.restricts())
    plan.notes.push_back(restriction_note(request.allowed_ops, plan.backend));
  plan_recv_bundle(kernel, disabled, plan);
  plan_recv_incremental(kernel, disabled, plan);
  plan_send_bundle(kernel, disabled, plan);
  plan_napi(kernel, request, disabled, plan);
  if (request.sqpoll.enabled) plan.notes.push_back("sqpoll: native only; the emulation submits in-process");
}

// Bundled leased receives: natively a recv that takes several ring buffers (which needs the ring and a
// kernel whose bundles keep to their length); emulated a readv into several pool buffers.
void plan_recv_bundle(const kernel_features& kernel, feature_set disabled, executor_plan& plan) {
  if (disabled.contains(feature::recv_bundle)) {
    plan.notes.push_back("leased recv: bundles disabled by request; one buffer per receive");
  } else if (plan.backend == backend_kind::emulated) {
    plan.recv_bundle = true;
  } else if (plan.buf_ring && !kernel.recv_bundle) {
    plan.notes.push_back("leased recv: bundled recv unavailable on kernel " + kernel.kernel_release +
                         " (6.10+)" + because(kernel, "recv_bundle") + "; one buffer per receive");
  } else {
    plan.recv_bundle = plan.buf_ring;  // without the ring, its own note says why
  }
}

// Incremental pools' rings (buffer_pool::options::incremental): natively a ring registered with
// IOU_PBUF_RING_INC. Without it such a pool carves its buffers in-process, as the emulation always does,
// so the note says what changes: the ring, not the memory behaviour.
void plan_recv_incremental(const kernel_features& kernel, feature_set disabled, executor_plan& plan) {
  if (plan.backend == backend_kind::emulated) return;  // in-process by nature: nothing to plan
  if (disabled.contains(feature::recv_incremental)) {
    plan.notes.push_back(
        "leased recv: incremental buffer rings disabled by request; incremental pools carve "
        "their buffers in-process, without a ring");
  } else if (plan.buf_ring && !kernel.recv_incremental) {
    plan.notes.push_back("leased recv: incremental buffer rings unavailable on kernel " +
                         kernel.kernel_release + " (6.12+)" + because(kernel, "recv_incremental") +
                         "; incremental pools carve their buffers in-process, without a ring");
  } else {
    plan.recv_incremental = plan.buf_ring;  // without the ring, its own note says why
  }
}

// Bundled sends of a send_queue: natively one send takes every buffer queued in the queue's own buffer
// ring; else (emulated too) one sendmsg of the queued buffers, with the same order and bounds.
void plan_send_bundle(const kernel_features& kernel, feature_set disabled, executor_plan& plan) {
  if (disabled.contains(feature::send_bundle)) {
    plan.notes.push_back(
        "send_queue: bundled send disabled by request; one sendmsg of the queued buffers each");
  } else if (plan.backend == backend_kind::emulated) {
    // No buffer rings there, as for every ring feature (docs/emulation.md): no note of its own.
  } else if (plan.buf_ring && !kernel.send_bundle) {
    plan.notes.push_back("send_queue: bundled send unavailable on kernel " + kernel.kernel_release +
                         " (6.10+)" + because(kernel, "send_bundle") +
                         "; one sendmsg of the queued buffers each");
  } else {
    plan.send_bundle = plan.buf_ring;  // without the ring, its own note says why
  }
}

}  // namespace

plan_overrides plan_overrides::from_environment() {
  plan_overrides o;
  if (const char* b = std::getenv("URING_BACKEND")) o.backend = parse_backend(detail::trim(b));
  if (const char* d = std::getenv("URING_DISABLE")) {
    try {
      o.disable = parse_feature_set(d);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("URING_DISABLE: ") + e.what());
    }
  }
  return o;
}

executor_plan make_plan(const kernel_features& kernel, const executor_options& request,
                        const plan_overrides& overrides) {
  executor_plan plan;
  backend_kind wanted = overrides.backend != backend_kind::automatic ? overrides.backend : request.backend;
  feature_set disabled = request.disable | overrides.disable;
  if (overrides.backend != backend_kind::automatic) {
    plan.notes.push_back("backend: URING_BACKEND=" + to_string(overrides.backend));
  }
  plan.allowed_ops = request.allowed_ops;
  if (wanted == backend_kind::emulated) {
    plan.backend = backend_kind::emulated;
    if (overrides.backend == backend_kind::automatic) plan.notes.push_back("backend: emulated as requested");
    plan_emulated(kernel, request, disabled, plan);
    return plan;
  }
  if (!kernel.io_uring_usable) {
    if (wanted == backend_kind::native) {
      throw std::system_error(kernel.setup_errno, std::system_category(),
                              kernel.reason + "; the native backend was demanded");
    }
    plan.backend = backend_kind::emulated;
    plan.notes.push_back("backend: emulated, because " + kernel.reason);
    plan_emulated(kernel, request, disabled, plan);
    return plan;
  }
  plan.backend = backend_kind::native;
  plan.linked_chains = true;
  if (request.allowed_ops.restricts())
    plan.notes.push_back(restriction_note(request.allowed_ops, plan.backend));

  ring_flags flags = request.flags;
  for (auto [f, flag] : kFlagFeatures) {
    if (any(flags & flag) && disabled.contains(f)) {
      flags = flags & ~flag;
      plan.notes.push_back("setup: " + to_string(flag) + " disabled by request");
    }
  }
  if (any(flags & ring_flags::defer_taskrun) && !any(flags & ring_flags::single_issuer)) {
    if (disabled.contains(feature::single_issuer)) {
      flags = flags & ~ring_flags::defer_taskrun;
      plan.notes.push_back("setup: DEFER_TASKRUN dropped, because it requires the disabled SINGLE_ISSUER");
    } else {
      flags = flags | ring_flags::single_issuer;
      plan.notes.push_back("setup: SINGLE_ISSUER added, because DEFER_TASKRUN requires it");
    }
  }
  ring_flags refused = flags & ~kernel.setup_flags;
  if (any(refused)) {
    flags = flags & kernel.setup_flags;
    plan.notes.push_back("setup: " + to_string(refused) + " refused by kernel " + kernel.kernel_release);
  }
  plan.flags = flags;

  if (request.register_ring_fd) {
    if (disabled.contains(feature::registered_ring)) {
      plan.notes.push_back("registered ring fd: disabled by request");
    } else if (!kernel.registered_ring_fd) {
      std::string why = kernel.reason_for("registered_ring_fd");
      plan.notes.push_back("registered ring fd: " +
                           (why.empty() ? "not supported by kernel " + kernel.kernel_release + " (5.18+)"
                                        : "refused on kernel " + kernel.kernel_release + ": " + why));
    } else {
      plan.register_ring_fd = true;
    }
  }
  if (disabled.contains(feature::msg_ring)) {
    plan.notes.push_back("messaging: MSG_RING disabled by request; mailbox + eventfd instead");
  } else if (!kernel.msg_ring) {
    plan.notes.push_back("messaging: MSG_RING unavailable on kernel " + kernel.kernel_release +
                         because(kernel, "msg_ring") + "; mailbox + eventfd instead");
  } else if (!request.allowed_ops.allows_msg_ring()) {
    plan.notes.push_back(
        "messaging: MSG_RING not in the allowlist: messages to and from this executor use the "
        "mailbox + eventfd");
  } else {
    plan.msg_ring = true;
  }
  if (plan.msg_ring && !disabled.contains(feature::send_msg_ring) && kernel.send_msg_ring) {
    plan.send_msg_ring = true;
  }
  // Leased receives (net::buffer_pool) need both; without them they receive into the pool by plain recv.
  if (disabled.contains(feature::buf_ring) || disabled.contains(feature::multishot)) {
    plan.notes.push_back(
        "leased recv: provided buffer rings or multishot disabled by request; one recv per call");
  } else if (!kernel.buf_ring || !kernel.multishot_recv) {
    plan.notes.push_back("leased recv: buffer rings or multishot recv unavailable on kernel " +
                         kernel.kernel_release + " (6.0+); one recv per call");
  } else {
    plan.buf_ring = true;
  }
  // A read_stream reads a chunk per request without it (still from the provided-buffer ring).
  if (plan.buf_ring) {
    if (disabled.contains(feature::read_multishot)) {
      plan.notes.push_back("read_stream: multishot read disabled by request; one read per chunk");
    } else if (!kernel.read_multishot) {
      plan.notes.push_back("read_stream: IORING_OP_READ_MULTISHOT unavailable on kernel " +
                           kernel.kernel_release + " (6.7+)" + because(kernel, "read_multishot") +
                           "; one read per chunk");
    } else {
      plan.read_multishot = true;
    }
  }
  // A ticker keeps its ticks either way: one timeout per tick, at the same deadlines, costs one SQE each.
  plan.multishot_timeout = kernel.multishot_timeout && !disabled.contains(feature::multishot);
  // Zero-copy sends fall back to plain sends without a note: the bytes on the wire are the same.
  plan.send_zc = kernel.send_zc && !disabled.contains(feature::send_zc);
  plan_recv_bundle(kernel, disabled, plan);
  plan_recv_incremental(kernel, disabled, plan);
  plan_send_bundle(kernel, disabled, plan);
  plan_napi(kernel, request, disabled, plan);
  plan_sqpoll(kernel, request, disabled, plan);
  return plan;
}

std::string to_string(const executor_plan& plan) {
  std::string out = "backend " + to_string(plan.backend);
  if (plan.backend == backend_kind::native) {
    out += ", flags " + to_string(plan.flags);
    if (plan.sqpoll) out += ", SQPOLL";
    out += std::string(", registered ring fd ") + (plan.register_ring_fd ? "yes" : "no");
  }
  out += std::string(", messaging ") + (plan.msg_ring ? "MSG_RING" : "mailbox");
  if (plan.send_msg_ring) out += " (+SEND_MSG_RING)";
  if (plan.allowed_ops.restricts()) out += ", ops " + to_string(plan.allowed_ops);
  for (const auto& n : plan.notes) out += "\n  - " + n;
  return out;
}

}  // namespace uring
