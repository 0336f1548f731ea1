// message_hub.cpp — raw messages: the registry of live executors, credit windows, the inbox.
#include "messaging/message_hub.hpp"
#include "executor/executor_state.hpp"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace uring::detail {

namespace {

// Live executors by key (an index into `slots`), so that credits travel by number and a credit for an
// executor that is gone is dropped instead of touching freed memory. Keys are reused only after 65536
// others were handed out since (a FIFO of free keys), so a late credit cannot reach a newcomer in practice.
// Each join also takes a generation number that is never reused: an executor_handle names key and
// generation, so a handle to an executor that is gone names nothing, even once its key is reused.
class registry {
 public:
  static registry& instance() {
    static registry r;
    return r;
  }
  // The executor's id: its key in the low 16 bits, its generation above.
  std::uint64_t join(executor& ex) {
    std::lock_guard lock(mutex_);
    std::uint32_t key;
    if (slots_.size() < kMaxKeys) {
      key = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    } else if (!free_.empty()) {
      key = free_.front();
      free_.erase(free_.begin());
    } else {
      throw std::length_error("uring: more than 65536 executors alive at once");
    }
    slots_[key] = slot{&ex, next_generation_++};
    return (slots_[key].generation << kKeyBits) | key;
  }
  void leave(std::uint32_t key) noexcept {
    std::lock_guard lock(mutex_);
    slots_[key] = slot{};
    free_.push_back(key);
  }
  // Runs fn(executor&) under the lock if `key` names a live executor. The lock keeps that executor from
  // leaving (its destructor leaves before it frees anything fn may touch) until fn returns.
  template <class F>
  bool with(std::uint32_t key, F&& fn) {
    std::lock_guard lock(mutex_);
    if (key >= slots_.size() || slots_[key].ex == nullptr) return false;
    fn(*slots_[key].ex);
    return true;
  }
  // The same for a full id: the generation must match too.
  template <class F>
  bool with_id(std::uint64_t id, F&& fn) {
    const auto key = static_cast<std::uint32_t>(id & (kMaxKeys - 1));
    std::lock_guard lock(mutex_);
    if (key >= slots_.size() || slots_[key].ex == nullptr || slots_[key].generation != id >> kKeyBits)
      return false;
    fn(*slots_[key].ex);
    return true;
  }

 private:
  static constexpr unsigned kKeyBits = 16;
  static constexpr std::size_t kMaxKeys = std::size_t{1} << kKeyBits;
  struct slot {
    executor* ex = nullptr;
    std::uint64_t generation = 0;
  };
  std::mutex mutex_;
  std::vector<slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint64_t next_generation_ = 1;  // 48 bits of it go into an id: never exhausted in practice
};

struct credit_node final : remote_node {
  credit_node(std::uint32_t receiver, std::uint32_t count, bool is_closed)
      : receiver_key(receiver), n(count), closed(is_closed) {
    run = [](remote_node* node) noexcept {
      auto* self = static_cast<credit_node*>(node);
      message_hub& sender = executor_core::hub(*self->target);
      if (self->closed) {
        sender.on_closed(self->receiver_key, self->n);
      } else {
        sender.on_credit(self->receiver_key, self->n);
      }
      delete self;
    };
    discard = [](remote_node* node) noexcept { delete static_cast<credit_node*>(node); };
  }
  std::uint32_t receiver_key;
  std::uint32_t n;
  bool closed;
};

void resume(message_waiter& w) { w.handle.resume(); }

// std::errc has no ESHUTDOWN.
std::error_code shutdown_error() noexcept { return {ESHUTDOWN, std::system_category()}; }

}  // namespace

message_hub::message_hub(executor& self, executor_stats& stats, unsigned window, raw_route route)
    : self_(self),
      stats_(stats),
      window_(std::max(window, 2u)),
      id_(registry::instance().join(self)),
      key_(static_cast<std::uint32_t>(id_ & 0xffff)),
      route_(route) {}

message_hub::~message_hub() { leave_registry(); }

void message_hub::leave_registry() noexcept {
  if (left_) return;
  left_ = true;
  registry::instance().leave(key_);
}

message_hub::peer& message_hub::peer_for(executor& target) {
  if (&target == last_target_) return *last_peer_;
  message_hub& receiver = executor_core::hub(target);
  peer& p = peers_[receiver.key()];
  if (p.introduced_to != &target) {
    receiver.add_sender(key_);  // before our first message, so that its settle() knows us
    p.introduced_to = &target;
  }
  p.target = &target;
  p.window = receiver.window();
  p.by_ring = route_.by_ring && receiver.route_.by_ring;
  p.ring_fd = receiver.route_.ring_fd;
  p.failed_tag = (std::uint64_t{receiver.key()} << 3) | kRawSendFailedTag;
  p.refusing = receiver.route_.refusing;
  last_target_ = &target;
  last_peer_ = &p;
  return p;
}

// Everything but the inline case: errors, a full window, the mailbox, a full SQ (send_now makes room).
int message_hub::try_send_slow(peer& p, const message& m) noexcept {
  if (p.broken) return p.broken.value();
  if (p.head != nullptr || p.in_flight >= p.window) {
    return EAGAIN;
  }
  if (!send_now(p, m)) return ESHUTDOWN;
  ++p.in_flight;
  return 0;
}

bool message_hub::send_now(peer& p, const message& m) noexcept {
  if (p.by_ring && !route_.queue->closed) {  // closing: the ring may be gone, take the mailbox
    if (p.refusing->load(std::memory_order_acquire)) return false;
    while (!write_to_ring(p, m)) executor_core::make_sq_room(self_);  // counted in sq_full_flushes
  } else if (!executor_core::post_raw(self_, *p.target, m)) {
    return false;
  }
  ++stats_.raw_messages_sent;
  return true;
}

void message_hub::park_sender(executor& target, message_waiter& w) {
  peer& p = peer_for(target);
  w.next = nullptr;
  if (p.tail != nullptr) {
    p.tail->next = &w;
  } else {
    p.head = &w;
  }
  p.tail = &w;
}

void message_hub::on_credit(std::uint32_t receiver_key, std::uint32_t n) noexcept {
  auto it = peers_.find(receiver_key);
  if (it == peers_.end()) return;
  peer& p = it->second;
  p.in_flight -= std::min(p.in_flight, n);
  // Blocked senders go in the order they blocked; each resumes after its own message left.
  while (p.head != nullptr && !p.broken && p.in_flight < p.window) {
    message_waiter& w = *p.head;
    p.head = w.next;
    if (p.head == nullptr) p.tail = nullptr;
    if (send_now(p, w.msg)) {
      ++p.in_flight;
    } else {
      w.error = shutdown_error();
    }
    resume(w);
  }
}

void message_hub::on_failed(std::uint32_t receiver_key) noexcept {
  auto it = peers_.find(receiver_key);
  if (it == peers_.end()) return;
  peer& p = it->second;
  // Counted once: a target's settlement may have reported this message failed already (in_flight 0).
  if (p.in_flight > 0) {
    --p.in_flight;
    ++stats_.messages_failed;
  }
  p.broken = std::make_error_code(std::errc::broken_pipe);
  fail_waiters(p);
}

void message_hub::on_closed(std::uint32_t receiver_key, std::uint32_t delivered) noexcept {
  auto it = peers_.find(receiver_key);
  if (it == peers_.end()) return;
  peer& p = it->second;
  // Credits sent before this came first (one road, in order): what is still in flight and was not
  // delivered reached the receiver's ring after its last drain, or never will.
  p.in_flight -= std::min(p.in_flight, delivered);
  stats_.messages_failed += p.in_flight;
  p.in_flight = 0;
  if (!p.broken) p.broken = shutdown_error();
  fail_waiters(p);
}

void message_hub::fail_waiters(peer& p) noexcept {
  while (p.head != nullptr) {
    message_waiter& w = *p.head;
    p.head = w.next;
    if (p.head == nullptr) p.tail = nullptr;
    w.error = p.broken;
    resume(w);
  }
}

void message_hub::deliver(std::uint32_t sender_key, const message& m) noexcept {
  ++stats_.raw_messages_received;
  if (receivers_head_ != nullptr && !quiescing_) {
    message_waiter& w = *receivers_head_;
    receivers_head_ = w.next;
    if (receivers_head_ == nullptr) receivers_tail_ = nullptr;
    w.msg = m;
    consumed_from(sender_key);
    resume(w);
    return;
  }
  inbox_.push_back(queued{m, sender_key});
}

bool message_hub::try_receive(message& out) noexcept {
  if (inbox_.empty()) return false;
  const queued q = inbox_.front();
  inbox_.pop_front();
  out = q.m;
  consumed_from(q.sender);
  return true;
}

void message_hub::park_receiver(message_waiter& w) noexcept {
  w.next = nullptr;
  if (receivers_tail_ != nullptr) {
    receivers_tail_->next = &w;
  } else {
    receivers_head_ = &w;
  }
  receivers_tail_ = &w;
}

void message_hub::consume_slow(std::uint32_t sender_key) noexcept {
  if (sender_key != last_sender_) {
    last_consumed_ = &consumed_[sender_key];
    last_sender_ = sender_key;
  }
  std::uint32_t& n = *last_consumed_;
  if (++n >= window_ / 2) {
    send_credit(sender_key, n);
    n = 0;
  }
}

void message_hub::send_credit(std::uint32_t sender_key, std::uint32_t n, bool closed) noexcept {
  try {
    auto* node = new credit_node(key_, n, closed);
    const bool sent = registry::instance().with(sender_key, [&](executor& sender) {
      node->target = &sender;
      if (!executor_access::try_post(sender, *node)) delete node;
    });
    if (!sent) delete node;
  } catch (const std::bad_alloc&) {
    // Without memory the credit is lost and the sender may block for good: nothing better to do here.
  }
}

void message_hub::forget_waiters() noexcept {
  receivers_head_ = receivers_tail_ = nullptr;
  for (auto& [key, p] : peers_) p.head = p.tail = nullptr;
  quiescing_ = false;
}

void message_hub::close() noexcept { closed_ = true; }

void message_hub::settle() noexcept {
  if (!closed_ || settled_) return;
  settled_ = true;
  // Delivered and not credited back, by sender: taken from the inbox (consumed_) or still in it.
  std::unordered_map<std::uint32_t, std::uint32_t> uncredited = consumed_;
  for (const queued& q : inbox_) ++uncredited[q.sender];
  {
    // Senders none of whose messages arrived are told too (0 delivered): what they sent is lost.
    std::lock_guard lock(senders_mutex_);
    for (std::uint32_t sender : senders_) uncredited.try_emplace(sender, 0);
  }
  for (const auto& [sender, n] : uncredited) send_credit(sender, n, true);
}

void message_hub::add_sender(std::uint32_t sender_key) noexcept {
  std::lock_guard lock(senders_mutex_);
  try {
    senders_.insert(sender_key);
  } catch (const std::bad_alloc&) {
    // Without memory this sender goes untold at settlement: its next send still fails ESHUTDOWN.
  }
}

// --- the functions behind uring/message.hpp -----------------------------------------------------------

void park_sender(executor& target, message_waiter& w) {
  executor_core::hub(executor_access::current("uring::send")).park_sender(target, w);
}

namespace {
// The hub behind an inbox of `owner`, which only owner's own thread may use.
message_hub& inbox_hub(executor& owner) {
  if (running_executor() != &owner) throw std::logic_error("uring::inbox: used off the inbox's executor");
  return executor_core::hub(owner);
}
}  // namespace

bool receive_or_park(executor& owner, message_waiter& w) {
  message_hub& hub = inbox_hub(owner);
  if (hub.try_receive(w.msg)) return false;
  hub.park_receiver(w);
  return true;
}

bool try_receive_message(executor& owner, message& out) { return inbox_hub(owner).try_receive(out); }

void throw_message_error(std::error_code e, const char* what) {
  if (e == std::errc::operation_not_permitted)
    throw std::logic_error(std::string(what) + ": no executor is running on this thread");
  const char* why = e == shutdown_error() ? ": the target executor no longer accepts work"
                    : e == std::errc::broken_pipe
                        ? ": an earlier message to this executor was refused by the kernel"
                        : "";
  throw std::system_error(e, std::string(what) + why);
}

// --- executor_handle (uring/executor_handle.hpp) -------------------------------------------------------

bool handle_alive(std::uint64_t id) noexcept {
  bool accepting = false;
  registry::instance().with_id(id, [&](executor& ex) { accepting = executor_core::accepts_posts(ex); });
  return accepting;
}

void throw_handle_refused(const char* what) {
  throw std::system_error(shutdown_error(),
                          std::string(what) + ": the target executor is gone or no longer accepts work");
}

bool post_to_handle(std::uint64_t id, remote_node& node, bool going_home) noexcept {
  bool posted = false;
  registry::instance().with_id(id, [&](executor& ex) {
    node.target = &ex;
    posted = going_home ? executor_access::try_post_home(ex, node) : executor_access::try_post(ex, node);
  });
  return posted;
}

int try_send_to_handle(std::uint64_t id, const message& m) noexcept {
  executor* from = running_executor();
  if (from == nullptr) return EPERM;
  int e = ESHUTDOWN;
  registry::instance().with_id(id, [&](executor& to) { e = executor_core::hub(*from).try_send(to, m); });
  return e;
}

bool park_sender_at_handle(std::uint64_t id, message_waiter& w) {
  message_hub& from = executor_core::hub(executor_access::current("uring::send"));
  return registry::instance().with_id(id, [&](executor& to) { from.park_sender(to, w); });
}

}  // namespace uring::detail
