// executor/inflight.cpp — the in-flight registry's storage and its snapshot, on the owner thread or
// fetched from another one.
#include "uring/inflight.hpp"

#include <time.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "executor/executor_state.hpp"
#include "uring/executor_group.hpp"

namespace uring {

namespace detail {

void live_registry::add_back(operation& op) noexcept {
  std::uint32_t at = free_slot;
  if (at != 0) {
    free_slot = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(back[at]) >> 1);
  } else {
    if (back_count == back_capacity && !grow_back()) {
      op.live_slot = 0;  // out of memory: the operation runs unlisted
      return;
    }
    at = back_count++;
  }
  op.live_slot = at;
  back[at] = &op;
}

// A stale slot (the operation went to the front since, or the registry was reset) holds another entry
// or a free link: left alone, so no slot is freed twice.
void live_registry::remove_back(operation& op) noexcept {
  const std::uint32_t at = op.live_slot;
  if (at >= back_count || back[at] != &op) return;
  back[at] = free_link(free_slot);
  free_slot = at;
}

bool live_registry::grow_back() noexcept {
  const std::uint32_t capacity = back_capacity < 64 ? 64 : back_capacity * 2;
  if (capacity <= back_capacity) return false;
  void* old = back == &no_slot ? nullptr : static_cast<void*>(back);
  void* grown = std::realloc(old, std::size_t{capacity} * sizeof(operation*));
  if (grown == nullptr) return false;
  back = static_cast<operation**>(grown);
  if (old == nullptr) back[0] = no_slot;
  back_capacity = capacity;
  return true;
}

void live_registry::reset() noexcept {
  for (operation*& entry : front) entry = nullptr;
  back_count = 1;
  free_slot = 0;
}

void live_registry::release() noexcept {
  reset();
  if (back != &no_slot) std::free(static_cast<void*>(back));
  back = &no_slot;
  back_capacity = 1;
}

inflight_op describe(const operation& op, std::uint32_t now) {
  return inflight_op{
      .kind = op.request.code,
      .fd = op.request.fd,
      .direct = op.request.direct,
      .age = std::chrono::milliseconds(static_cast<std::int32_t>(now - op.since_ms)),
      .tag = op.label != nullptr ? std::string(op.label) : std::string(),
      .cancel_requested = op.cancel_sent,
  };
}

namespace {

std::vector<inflight_op> snapshot(const op_queue& q) {
  const std::uint32_t now = coarse_now_ms();
  std::vector<inflight_op> out;
  q.live.for_each([&](const operation& op) { out.push_back(describe(op, now)); });
  return out;
}

// A snapshot asked for from another thread: the asker may give up (its limit), so what both sides
// share is owned by both.
struct snapshot_reply {
  std::mutex m;
  std::condition_variable done_cv;
  bool done = false;
  std::vector<inflight_op> ops;
  int error = 0;

  void finish(std::vector<inflight_op> v, int err) {
    {
      std::lock_guard lock(m);
      ops = std::move(v);
      error = err;
      done = true;
    }
    done_cv.notify_all();
  }
};

struct snapshot_node final : remote_node {
  std::shared_ptr<snapshot_reply> reply;
  const op_queue* queue;

  snapshot_node(std::shared_ptr<snapshot_reply> r, const op_queue& q) : reply(std::move(r)), queue(&q) {
    run = [](remote_node* n) noexcept {
      auto* self = static_cast<snapshot_node*>(n);
      try {
        self->reply->finish(snapshot(*self->queue), 0);
      } catch (const std::bad_alloc&) {
        self->reply->finish({}, ENOMEM);
      }
      delete self;
    };
    discard = [](remote_node* n) noexcept {
      auto* self = static_cast<snapshot_node*>(n);
      self->reply->finish({}, ESHUTDOWN);
      delete self;
    };
  }
};

}  // namespace
}  // namespace detail

std::vector<inflight_op> executor::inflight(std::chrono::milliseconds limit) const {
  if (detail::executor_core::on_owner_thread(*this)) return detail::snapshot(queue_);
  auto reply = std::make_shared<detail::snapshot_reply>();
  auto* node = new detail::snapshot_node(reply, queue_);
  if (!detail::executor_access::try_post(const_cast<executor&>(*this), *node)) {
    delete node;
    throw std::system_error(ESHUTDOWN, std::system_category(),
                            "executor::inflight: the executor no longer accepts work");
  }
  std::unique_lock lock(reply->m);
  if (!reply->done_cv.wait_for(lock, limit, [&] { return reply->done; }))
    throw std::system_error(ETIMEDOUT, std::system_category(),
                            "executor::inflight: the executor's loop did not take the request in time");
  if (reply->error != 0) throw std::system_error(reply->error, std::system_category(), "executor::inflight");
  return std::move(reply->ops);
}

std::vector<std::vector<inflight_op>> executor_group::inflight(std::chrono::milliseconds limit) {
  std::vector<std::vector<inflight_op>> out;
  out.reserve(size());
  for (std::size_t i = 0; i < size(); ++i) out.push_back(at(i).inflight(limit));
  return out;
}

std::string to_string(const inflight_op& op) {
  std::string s = to_string(op.kind);
  if (op.fd >= 0) s += (op.direct ? " slot=" : " fd=") + std::to_string(op.fd);
  s += " age=" + std::to_string(op.age.count()) + "ms";
  if (!op.tag.empty()) s += " tag=\"" + op.tag + "\"";
  if (op.cancel_requested) s += " cancelling";
  return s;
}

}  // namespace uring
