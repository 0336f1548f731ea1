// backend/emulated/futex_registry.cpp — the process-wide list of emulated futex waits
// (futex_registry.hpp).
#include "backend/emulated/futex_registry.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace uring::detail {

namespace {

struct listed_wait {
  operation* op;
  std::uint32_t mask;
  futex_inbox* inbox;
};

struct registry {
  std::mutex mutex;
  std::unordered_map<const std::uint32_t*, std::deque<listed_wait>> waits;
  // How many waits are listed: a wake with none to find takes no lock.
  std::atomic<std::size_t> count{0};
};

// Never destroyed: executors on other threads may still wake or withdraw while the process exits.
registry& the_registry() {
  static registry* r = new registry;
  return *r;
}

const std::uint32_t* word_of(const operation& op) noexcept {
  return static_cast<const std::uint32_t*>(op.request.addr);
}

}  // namespace

futex_inbox::futex_inbox() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) throw std::system_error(errno, std::system_category(), "emulated futex wait: eventfd");
}

futex_inbox::~futex_inbox() {
  // A waker signals under mutex_: once we hold it, none is still writing to the fd.
  std::lock_guard lock(mutex_);
  ::close(fd_);
}

void futex_inbox::deliver(operation& op) noexcept {
  std::lock_guard lock(mutex_);
  woken_.push_back(&op);
  const std::uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof one);
}

std::vector<operation*> futex_inbox::take() {
  std::uint64_t v;
  (void)!::read(fd_, &v, sizeof v);
  std::lock_guard lock(mutex_);
  return std::exchange(woken_, {});
}

int futex_register(operation& op, futex_inbox& inbox) {
  const std::uint32_t* word = word_of(op);
  if (word == nullptr || reinterpret_cast<std::uintptr_t>(word) % alignof(std::uint32_t) != 0) return -EINVAL;
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  // Counted before the word is read: a waker that stores the word and then finds no wait listed must
  // have stored before this read (both sides order themselves with a full fence), so it sees EAGAIN.
  r.count.fetch_add(1, std::memory_order_seq_cst);
  if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != static_cast<std::uint32_t>(op.request.offset)) {
    r.count.fetch_sub(1, std::memory_order_relaxed);
    return -EAGAIN;
  }
  r.waits[word].push_back({&op, static_cast<std::uint32_t>(op.request.aux), &inbox});
  return 0;
}

bool futex_withdraw(operation& op) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.waits.find(word_of(op));
  if (it == r.waits.end()) return false;
  auto& list = it->second;
  for (auto i = list.begin(); i != list.end(); ++i) {
    if (i->op != &op) continue;
    list.erase(i);
    if (list.empty()) r.waits.erase(it);
    r.count.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

int futex_wake_listed(const std::uint32_t* word, std::uint32_t count, std::uint32_t mask) {
  registry& r = the_registry();
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the caller's store to the word comes first
  if (count == 0 || r.count.load(std::memory_order_seq_cst) == 0) return 0;
  std::lock_guard lock(r.mutex);
  auto it = r.waits.find(word);
  if (it == r.waits.end()) return 0;
  auto& list = it->second;
  std::uint32_t woken = 0;
  for (auto i = list.begin(); i != list.end() && woken < count;) {
    if ((i->mask & mask) == 0) {
      ++i;
      continue;
    }
    // Delivered under the registry's lock: a withdraw that finds the record gone knows it is in the inbox.
    i->inbox->deliver(*i->op);
    i = list.erase(i);
    ++woken;
  }
  if (list.empty()) r.waits.erase(it);
  r.count.fetch_sub(woken, std::memory_order_relaxed);
  return static_cast<int>(woken);
}

}  // namespace uring::detail
