// fixed_buffers.cpp — registered buffers (uring/fixed_buffers.hpp): the set's memory and table, its
// leases and waiters, updates that wait for the kernel's tag, and the executor's registration calls.
#include "uring/fixed_buffers.hpp"
#include "executor/executor_state.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace uring {

int detail::executor_core::register_buffers(executor& ex, const iovec* iovs, const std::uint64_t* tags,
                                            unsigned n) {
  return ex.impl_->backend->register_buffers(iovs, tags, n);
}
int detail::executor_core::update_buffers(executor& ex, unsigned offset, const iovec* iovs,
                                          const std::uint64_t* tags, unsigned n) {
  return ex.impl_->backend->update_buffers(offset, iovs, tags, n);
}
int detail::executor_core::unregister_buffers(executor& ex) {
  return ex.impl_->backend ? ex.impl_->backend->unregister_buffers() : 0;
}

namespace detail {

struct fixed_set {
  executor* ex = nullptr;
  std::byte* base = nullptr;  // the library's memory: `count` buffers, one every `stride` bytes
  std::size_t mapped = 0;
  std::size_t stride = 0;
  std::size_t size = 0;
  std::vector<iovec> holds;         // what each slot holds now (its own buffer, or caller memory)
  std::vector<std::uint64_t> tags;  // each slot's tag id (0: its own buffer, untagged)
  std::vector<std::uint32_t> free;  // slots not leased
  std::vector<bool> updating;       // an update of the slot waits for the kernel
  fixed_waiter* head = nullptr;     // lease() waiters, oldest first
  fixed_waiter* tail = nullptr;
  std::size_t refs = 1;  // the owner, each lease, each update in progress
  bool registered = true;
  std::unordered_map<std::uint64_t, std::coroutine_handle<>> tag_waiters;
  std::unordered_set<std::uint64_t> released;  // tags the kernel posted before anyone waited

  ~fixed_set() {
    if (base != nullptr) ::munmap(base, mapped);
  }
};

namespace {

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::system_category(), "uring::" + what);
}

// What the kernel's refusal of a registration means, and what to change.
[[noreturn]] void fail_registration(int err, const std::string& call, std::size_t bytes) {
  std::string what = call;
  if (err == ENOMEM) {
    rlimit lim{};
    ::getrlimit(RLIMIT_MEMLOCK, &lim);
    const std::string now =
        lim.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_cur / 1024) + " KiB";
    what += ": the kernel could not pin " + std::to_string((bytes + 1023) / 1024) +
            " KiB of registered buffers: the locked-memory limit RLIMIT_MEMLOCK (ulimit -l) is " + now +
            "; raise it by at least that much (it also counts the process's other locked memory), or run "
            "with CAP_IPC_LOCK";
  } else if (err == EBUSY) {
    what += ": this executor has registered buffers already (one set per executor: unregister it first)";
  }
  fail(err, what);
}

void on_released(void* p, std::uint64_t id) noexcept {
  auto* set = static_cast<fixed_set*>(p);
  if (auto it = set->tag_waiters.find(id); it != set->tag_waiters.end()) {
    if (executor_core::accepting(*set->ex)) executor_access::schedule(*set->ex, it->second);
    set->tag_waiters.erase(it);
  } else {
    set->released.insert(id);
  }
}

constexpr std::uint64_t tag_value(std::uint64_t id) noexcept { return id << 3 | kBufferTag; }
// Tag ids are never reused in the process: a tag of an unregistered set that comes after another set
// registered on the same executor must not match one of the new set's.
std::atomic<std::uint64_t> g_last_tag{0};

// Waits for the kernel's completion of tag `id` (or the set's unregistration).
struct tag_release {
  fixed_set* set;
  std::uint64_t id;
  bool waiting = false;
  bool await_ready() const noexcept { return !set->registered || set->released.erase(id) != 0; }
  void await_suspend(std::coroutine_handle<> h) {
    set->tag_waiters.emplace(id, h);
    waiting = true;
  }
  void await_resume() const noexcept {}
  ~tag_release() {
    if (waiting) set->tag_waiters.erase(id);
  }
};

}  // namespace

fixed_buffer fixed_lease_of(fixed_set* set, std::uint32_t index) noexcept {
  fixed_buffer b;
  b.set_ = set;
  b.data_ = static_cast<std::byte*>(set->holds[index].iov_base);
  b.size_ = set->holds[index].iov_len;
  b.index_ = index;
  return b;
}

void fixed_unref(fixed_set* set) noexcept {
  if (--set->refs == 0) delete set;
}

void fixed_release(fixed_set* set, std::uint32_t index) noexcept {
  // A shutting-down executor resumes nothing: its frames, the waiters' among them, are being freed.
  if (set->registered && set->head != nullptr && executor_core::accepting(*set->ex)) {
    // The lease's reference passes to the waiter.
    fixed_waiter& w = *set->head;
    fixed_dequeue(w);
    w.handed = true;
    w.index = index;
    executor_access::schedule(*set->ex, w.handle);
    return;
  }
  if (set->registered) set->free.push_back(index);
  fixed_unref(set);
}

bool fixed_take(fixed_set* set, fixed_buffer& out) noexcept {
  if (!set->registered || set->free.empty()) return false;
  const std::uint32_t index = set->free.back();
  set->free.pop_back();
  ++set->refs;
  out = fixed_lease_of(set, index);
  return true;
}

void fixed_enqueue(fixed_waiter& w) noexcept {
  w.prev = w.set->tail;
  w.next = nullptr;
  (w.set->tail != nullptr ? w.set->tail->next : w.set->head) = &w;
  w.set->tail = &w;
  w.queued = true;
}

void fixed_dequeue(fixed_waiter& w) noexcept {
  (w.prev != nullptr ? w.prev->next : w.set->head) = w.next;
  (w.next != nullptr ? w.next->prev : w.set->tail) = w.prev;
  w.prev = w.next = nullptr;
  w.queued = false;
}

}  // namespace detail

fixed_slice fixed_buffer::slice(std::size_t offset, std::size_t length) const {
  if (set_ == nullptr) detail::fail(EINVAL, "fixed_buffer::slice: an empty lease");
  if (offset > size_ || length > size_ - offset) {
    detail::fail(EINVAL, "fixed_buffer::slice(" + std::to_string(offset) + ", " + std::to_string(length) +
                             "): past the end of buffer " + std::to_string(index_) + " (" +
                             std::to_string(size_) + " bytes)");
  }
  return {index_, data_ + offset, length};
}

std::size_t fixed_buffers::count() const noexcept { return set_ != nullptr ? set_->holds.size() : 0; }
std::size_t fixed_buffers::buffer_size() const noexcept { return set_ != nullptr ? set_->size : 0; }
std::size_t fixed_buffers::available() const noexcept { return set_ != nullptr ? set_->free.size() : 0; }
std::size_t fixed_buffers::waiting() const noexcept {
  std::size_t n = 0;
  for (const detail::fixed_waiter* w = set_ != nullptr ? set_->head : nullptr; w != nullptr; w = w->next) ++n;
  return n;
}

std::optional<fixed_buffer> fixed_buffers::try_lease() {
  if (set_ == nullptr) detail::fail(ENXIO, "fixed_buffers::try_lease: not registered");
  fixed_buffer b;
  if (!detail::fixed_take(set_, b)) return std::nullopt;
  return b;
}

fixed_buffer fixed_buffers::lease_awaitable::await_resume() {
  if (got_) return std::move(got_);
  if (w_.handed) {
    w_.handed = false;
    return detail::fixed_lease_of(w_.set, w_.index);
  }
  if (w_.set == nullptr) detail::fail(ENXIO, "fixed_buffers::lease: not registered");
  detail::fail(w_.error != 0 ? w_.error : ECANCELED, "fixed_buffers::lease: the buffers were unregistered");
}

void fixed_buffers::unregister() noexcept {
  detail::fixed_set* set = std::exchange(set_, nullptr);
  if (set == nullptr) return;
  set->registered = false;
  set->free.clear();
  detail::executor_core::watch_buffer_tags(*set->ex, nullptr, nullptr);
  (void)detail::executor_core::unregister_buffers(*set->ex);
  // Waiters are resumed unless the executor is shutting down (then their frames are being freed).
  const bool resume = detail::executor_core::accepting(*set->ex);
  while (set->head != nullptr) {
    detail::fixed_waiter& w = *set->head;
    detail::fixed_dequeue(w);
    w.error = ECANCELED;
    if (resume) detail::executor_access::schedule(*set->ex, w.handle);
  }
  // The kernel lets go of the caller's memory as it unregisters (or once the operations using it end):
  // an update waiting for that is done.
  if (resume) {
    for (auto& [id, h] : set->tag_waiters) detail::executor_access::schedule(*set->ex, h);
  }
  set->tag_waiters.clear();
  detail::fixed_unref(set);
}

task<void> fixed_buffers::update(std::uint32_t index, std::span<std::byte> memory) {
  detail::fixed_set* set = set_;
  const std::string call = "fixed_buffers::update(" + std::to_string(index) + ")";
  if (set == nullptr) detail::fail(ENXIO, call + ": not registered");
  if (index >= set->holds.size()) {
    detail::fail(EINVAL, call + ": the set has " + std::to_string(set->holds.size()) + " buffers");
  }
  const bool leased = std::find(set->free.begin(), set->free.end(), index) == set->free.end();
  if (leased || set->updating[index]) detail::fail(EBUSY, call + ": the slot is leased or being updated");
  const iovec iov = memory.empty() ? iovec{set->base + index * set->stride, set->size}
                                   : iovec{memory.data(), memory.size()};
  const std::uint64_t id =
      memory.empty() ? 0 : detail::g_last_tag.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::uint64_t tag = id != 0 ? detail::tag_value(id) : 0;
  if (const int r = detail::executor_core::update_buffers(*set->ex, index, &iov, &tag, 1); r < 0)
    detail::fail_registration(-r, call, iov.iov_len);
  set->holds[index] = iov;
  const std::uint64_t old = std::exchange(set->tags[index], id);
  if (old == 0) co_return;  // the slot held its own buffer: nothing to wait for
  ++set->refs;
  set->updating[index] = true;
  struct done {
    detail::fixed_set* set;
    std::uint32_t index;
    ~done() {
      set->updating[index] = false;
      detail::fixed_unref(set);
    }
  } guard{set, index};
  co_await detail::tag_release{set, old};
}

task<fixed_buffers> register_buffers(std::size_t count, std::size_t size) {
  executor& ex = detail::executor_access::current("register_buffers");
  const std::string call = "register_buffers(" + std::to_string(count) + ", " + std::to_string(size) + ")";
  constexpr std::size_t kMaxCount = 1u << 14, kMaxSize = std::size_t{1} << 30;  // the kernel's limits
  if (count == 0 || count > kMaxCount || size == 0 || size > kMaxSize)
    detail::fail(EINVAL, call + ": 1 to 16384 buffers of 1 byte to 1 GiB each");
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto set = std::make_unique<detail::fixed_set>();
  set->ex = &ex;
  set->size = size;
  set->stride = (size + page - 1) / page * page;
  set->mapped = set->stride * count;
  void* mem = ::mmap(nullptr, set->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) detail::fail(errno, call + ": mmap of " + std::to_string(set->mapped) + " bytes");
  set->base = static_cast<std::byte*>(mem);
  set->holds.resize(count);
  set->tags.assign(count, 0);
  set->updating.assign(count, false);
  for (std::size_t i = 0; i < count; ++i) {
    set->holds[i] = iovec{set->base + i * set->stride, size};
    set->free.push_back(static_cast<std::uint32_t>(count - 1 - i));  // lent lowest index first
  }
  if (const int r = detail::executor_core::register_buffers(ex, set->holds.data(), set->tags.data(),
                                                            static_cast<unsigned>(count));
      r < 0)
    detail::fail_registration(-r, call, count * size);
  detail::executor_core::watch_buffer_tags(ex, &detail::on_released, set.get());
  fixed_buffers out;
  out.set_ = set.release();
  co_return out;
}

}  // namespace uring
