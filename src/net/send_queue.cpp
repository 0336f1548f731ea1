// send_queue.cpp — a connection's send queue: pushes copy into the queue's buffers, and one send at a time
// takes every buffer queued so far (a bundled send from the queue's own buffer ring, or one sendmsg).
//
// The buffers go out in the order they were filled. Pushes fill the *open* buffer; it is queued (put in
// the ring, natively) once full, or when a send can start. A send's completion says how many bytes left,
// which always cover queued buffers from the front: natively the kernel consumes its ring from the head in
// the order the buffers were put in, and a sendmsg takes them in that order too. A send that stops inside
// a buffer (a sendmsg's short send; a bundle cut short, whose partial buffer the kernel has consumed
// from the ring all the same) leaves the rest of that buffer at the front, and the next send starts with
// it: a plain send of the rest natively, before the ring's next bundle.
//
// The state is flagged multishot, so that its completion function sees every completion: a bundle that
// could not take every buffer at once goes on (kCqeMore), and the request in flight holds a reference to
// the state (`self`) until its final completion, so that the buffers outlive a queue destroyed meanwhile.
#include "uring/net/send_queue.hpp"

#include <liburing.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "executor/executor_state.hpp"
#include "net/buffer_pool_state.hpp"
#include "uring/error.hpp"
#include "uring/net/tcp_stream.hpp"

namespace uring::detail {

namespace {
constexpr std::uint32_t kMaxBuffers = 32768;  // the kernel's limit on a buffer ring's slots
constexpr std::size_t kMaxIov = 1024;         // IOV_MAX: the most buffers one sendmsg takes
}  // namespace

struct send_queue_state final : operation, std::enable_shared_from_this<send_queue_state> {
  send_queue_state(executor& e, int socket_fd, const net::send_queue::options& o)
      : ex(&e), fd(socket_fd), direct(o.direct), count(o.count), size(o.size) {
    if (count == 0 || count > kMaxBuffers) {
      throw std::invalid_argument("send_queue: count must be 1 to 32768, not " + std::to_string(count));
    }
    if (size == 0) throw std::invalid_argument("send_queue: size must not be 0");
    map = map_ring(count, size, "send_queue");
    lens.assign(count, 0);
    queue.resize(count);
    free_ids.reserve(count);
    for (std::uint32_t i = count; i-- > 0;) free_ids.push_back(static_cast<std::uint16_t>(i));
    if (o.use_ring && executor_core::send_bundle(e)) {
      io_uring_buf_ring_init(map.slots);
      const int r = register_ring(e, map, group);
      if (r == 0) {
        ring = true;
      } else if (r != -EOPNOTSUPP && r != -EINVAL) {
        ::munmap(map.memory, map.mapped);
        throw std::system_error(-r, std::system_category(), "send_queue: io_uring_register_buf_ring");
      }
    }
    complete = &on_complete;
    multishot = true;
  }
  send_queue_state(const send_queue_state&) = delete;
  send_queue_state& operator=(const send_queue_state&) = delete;
  ~send_queue_state() {
    if (ring) (void)executor_core::unregister_buf_ring(*ex, group);
    ::munmap(map.memory, map.mapped);
  }

  executor* ex;
  int fd;
  bool direct;
  std::uint32_t count;
  std::uint32_t size;
  ring_mapping map;
  bool ring = false;                // the buffers are a provided-buffer ring (bundled sends)
  std::uint16_t group = 0;          // its buffer group, while ring
  std::vector<std::uint32_t> lens;  // by buffer: the bytes in it
  // Queued buffers, oldest first (a circle of `count`): natively those in the ring, after the front one
  // when it is out of the ring with bytes still to send (`rest_out`).
  std::vector<std::uint16_t> queue;
  std::uint32_t head = 0, queued_n = 0;
  std::uint32_t front_sent = 0;  // bytes of the front buffer already sent
  bool rest_out = false;         // ring: the front buffer was consumed by a bundle that stopped inside it
  int open = -1;                 // the buffer pushes fill, not queued yet
  std::vector<std::uint16_t> free_ids;
  std::uint64_t pushed = 0, sent = 0, sends = 0;
  int error = 0;  // sticky: every later push and flush fails with it
  bool sending = false, abandoned = false, cancelling = false;
  std::vector<send_wait*> waiters;   // pushes (and flushes not yet at the front), in order
  std::vector<send_wait*> flushers;  // flushes at the front: each waits for `until` bytes to be sent
  std::uint64_t waits = 0;
  std::vector<iovec> iovs;  // the sendmsg in flight
  msghdr msg{};
  std::shared_ptr<send_queue_state> self;  // while a send is in flight

  [[nodiscard]] char* buffer(std::uint32_t id) const noexcept { return map.buffers + std::size_t{id} * size; }
  [[nodiscard]] std::size_t room() const noexcept {
    return (open >= 0 ? size - lens[static_cast<std::uint32_t>(open)] : 0) +
           free_ids.size() * std::size_t{size};
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return std::size_t{count} * size; }
  [[nodiscard]] std::uint16_t front() const noexcept { return queue[head]; }

  // Copies up to `w.left` bytes of `w` into the open buffer and free ones (as many as there is room for).
  void copy_in(send_wait& w) noexcept {
    while (w.left > 0) {
      if (open < 0) {
        if (free_ids.empty()) return;
        open = free_ids.back();
        free_ids.pop_back();
        lens[static_cast<std::uint32_t>(open)] = 0;
      }
      const auto id = static_cast<std::uint32_t>(open);
      const std::size_t n = std::min<std::size_t>(w.left, size - lens[id]);
      std::memcpy(buffer(id) + lens[id], w.data, n);
      lens[id] += static_cast<std::uint32_t>(n);
      w.data += n;
      w.left -= n;
      pushed += n;
      if (lens[id] == size) queue_open();
    }
  }

  // The open buffer joins the queue (natively: the ring, where a bundle may take it).
  void queue_open() noexcept {
    if (open < 0 || lens[static_cast<std::uint32_t>(open)] == 0) return;
    const auto id = static_cast<std::uint16_t>(std::exchange(open, -1));
    queue[(head + queued_n++) % count] = id;
    if (ring) {
      io_uring_buf_ring_add(map.slots, buffer(id), lens[id], id,
                            static_cast<int>(io_uring_buf_ring_mask(map.entries)), 0);
      io_uring_buf_ring_advance(map.slots, 1);
    }
  }

  // Starts the next send if none is in flight: everything pushed so far goes with it.
  void kick() noexcept {
    if (sending || error != 0 || abandoned) return;
    queue_open();
    if (queued_n == 0) return;
    if (!executor_core::accepting(*ex)) {
      error = ECANCELED;
      return;
    }
    const std::uint32_t flags = MSG_NOSIGNAL;
    if (ring && !rest_out) {
      request = {.code = op_code::send_bundle, .direct = direct, .fd = fd, .len = group, .op_flags = flags};
    } else if (ring) {
      request = {.code = op_code::send,
                 .direct = direct,
                 .fd = fd,
                 .len = lens[front()] - front_sent,
                 .op_flags = flags | MSG_WAITALL,
                 .addr = buffer(front()) + front_sent};
    } else {
      iovs.clear();
      for (std::uint32_t i = 0; i < queued_n && i < kMaxIov; ++i) {
        const std::uint16_t id = queue[(head + i) % count];
        const std::uint32_t skip = i == 0 ? front_sent : 0;
        iovs.push_back({buffer(id) + skip, lens[id] - skip});
      }
      msg = {};
      msg.msg_iov = iovs.data();
      msg.msg_iovlen = iovs.size();
      request = {.code = op_code::sendmsg, .direct = direct, .fd = fd, .op_flags = flags, .addr = &msg};
    }
    sending = true;
    ++sends;
    self = shared_from_this();
    executor_access::submit(*ex, *this);  // accepting() was checked: it does not throw
  }

  // `n` bytes left: they cover queued buffers from the front, in order.
  void consume(std::uint64_t n, bool bundle) noexcept {
    sent += n;
    while (n > 0 && queued_n > 0) {
      const std::uint16_t id = front();
      const std::uint32_t rest = lens[id] - front_sent;
      if (n < rest) {
        front_sent += static_cast<std::uint32_t>(n);
        rest_out = rest_out || (ring && bundle);  // the kernel took the buffer out of its ring anyway
        return;
      }
      n -= rest;
      front_sent = 0;
      rest_out = false;
      head = (head + 1) % count;
      --queued_n;
      free_ids.push_back(id);
    }
  }

  static void on_complete(operation* op) noexcept {
    auto* s = static_cast<send_queue_state*>(op);
    const bool final = (s->cqe_flags & kCqeMore) == 0;
    // The final completion drops the request's reference; held here, it frees *s at the end at the latest.
    std::shared_ptr<send_queue_state> keep = final ? std::move(s->self) : nullptr;
    s->on_sent(final);
  }

  void on_sent(bool final) noexcept {
    if (res > 0) {
      consume(static_cast<std::uint64_t>(res), request.code == op_code::send_bundle);
    } else if (res < 0 && !(res == -ECANCELED && cancelling) && error == 0) {
      error = -res;
    }
    if (!final) return;
    sending = false;
    cancelling = false;
    if (abandoned) return;
    kick();
    serve();
  }

  void wake(send_wait& w, int err) noexcept {
    w.error = err;
    w.queued = false;
    executor_access::schedule(*ex, w.handle);
  }

  // Serves the waits that can go on now: pushes in order while there is room, flushes once sent.
  void serve() noexcept {
    std::size_t done = 0;
    for (; done < waiters.size(); ++done) {
      send_wait& w = *waiters[done];
      if (error != 0) {
        wake(w, error);
        continue;
      }
      if (w.flush) {
        w.until = pushed;
        flushers.push_back(&w);
        continue;
      }
      if (w.left <= capacity() && w.left > room()) break;  // whole or not at all
      copy_in(w);
      if (w.left > 0) break;  // larger than the queue: the rest as room comes
      wake(w, 0);
    }
    waiters.erase(waiters.begin(), waiters.begin() + static_cast<std::ptrdiff_t>(done));
    std::erase_if(flushers, [&](send_wait* f) {
      if (error == 0 && sent < f->until) return false;
      wake(*f, error);
      return true;
    });
    kick();
  }

  void cancel_wait(std::uint64_t id) noexcept {
    for (auto* list : {&waiters, &flushers}) {
      auto it = std::find_if(list->begin(), list->end(), [&](send_wait* w) { return w->id == id; });
      if (it == list->end()) continue;
      send_wait& w = **it;
      list->erase(it);
      wake(w, ECANCELED);
      serve();  // the pushes behind it may fit now
      return;
    }
  }

  void abandon() noexcept {
    abandoned = true;
    for (auto* list : {&waiters, &flushers}) {
      for (send_wait* w : std::exchange(*list, {})) wake(*w, ECANCELED);
    }
    if (sending && !cancelling) {
      cancelling = true;
      executor_access::cancel(*ex, *this);
    }
  }
};

bool send_queue_ready(send_queue_state& s, send_wait& w) noexcept {
  if (s.error != 0) {
    w.error = s.error;
    return true;
  }
  if (!s.waiters.empty()) return false;  // behind earlier waits: in order
  if (w.flush) {
    s.kick();
    if (s.sent >= s.pushed || s.error != 0) {
      w.error = s.error;
      return true;
    }
    return false;
  }
  if (w.left > s.room() && w.left <= s.capacity()) {
    s.kick();
    return false;
  }
  s.copy_in(w);
  s.kick();
  return w.left == 0;
}

executor* send_queue_suspend(send_queue_state& s, send_wait& w, std::coroutine_handle<> h) {
  executor& ex = executor_access::current("send_queue");
  if (&ex != s.ex) throw std::logic_error("send_queue: the queue belongs to another executor");
  w.handle = h;
  w.id = ++s.waits;
  w.queued = true;
  if (w.flush && s.waiters.empty()) {
    w.until = s.pushed;
    s.flushers.push_back(&w);
  } else {
    s.waiters.push_back(&w);
  }
  s.serve();  // a wait that an error ended meanwhile resumes on a later turn
  return &ex;
}

void state_cancel(send_queue_state& s, std::uint64_t wait) noexcept { s.cancel_wait(wait); }

void send_queue_forget(send_queue_state& s, send_wait& w) noexcept {
  std::erase(s.waiters, &w);
  std::erase(s.flushers, &w);
  w.queued = false;
}

void send_queue_throw(int error) { throw_errno(error, "send_queue"); }

}  // namespace uring::detail

namespace uring::net {

send_queue::send_queue(const tcp_stream& stream, options opts)
    : send_queue(detail::executor_access::current("send_queue"), stream.fd(), opts) {}

send_queue::send_queue(executor& ex, int fd, options opts)
    : state_(std::make_shared<detail::send_queue_state>(ex, fd, opts)) {}

send_queue::~send_queue() { state_->abandon(); }

std::size_t send_queue::capacity() const noexcept { return state_->capacity(); }
std::size_t send_queue::queued() const noexcept { return state_->pushed - state_->sent; }
std::uint64_t send_queue::sends() const noexcept { return state_->sends; }
bool send_queue::uses_bundles() const noexcept { return state_->ring; }

}  // namespace uring::net
