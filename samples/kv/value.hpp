// samples/kv/value.hpp — a stored value: a string shared by its keyspace entry and the replies that send it.
//
// Provides: kv::value_ptr, kv::make_value. Threads: a value_ptr may be copied, moved and dropped on any
// thread; the string is changed only by its shard, under its lock, while unique() (nothing else holds it).
//
// Why not std::shared_ptr<const std::string>: its use_count() is a relaxed load, so a change made after it
// reads 1 is not ordered after another thread's last read of the string (the reply that just sent it); and
// it is two pointers in every entry and a control block with a vtable in every value. Here one counter sits
// before the string, unique() loads it with acquire, and the handle is one pointer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace kv {

class value_ptr {
 public:
  value_ptr() noexcept = default;
  value_ptr(std::nullptr_t) noexcept {}  // NOLINT: a null value, as the null bulk string
  explicit value_ptr(std::string s) : v_(new shared{{1}, std::move(s)}) {}
  value_ptr(const value_ptr& o) noexcept : v_(o.v_) {
    if (v_ != nullptr) v_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  value_ptr(value_ptr&& o) noexcept : v_(std::exchange(o.v_, nullptr)) {}
  value_ptr& operator=(value_ptr o) noexcept {
    std::swap(v_, o.v_);
    return *this;
  }
  ~value_ptr() {
    // acq_rel: every holder's reads of the string happen before the last one frees it.
    if (v_ != nullptr && v_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete v_;
  }

  const std::string& operator*() const noexcept { return v_->s; }
  const std::string* operator->() const noexcept { return &v_->s; }
  explicit operator bool() const noexcept { return v_ != nullptr; }
  friend bool operator==(const value_ptr& a, std::nullptr_t) noexcept { return a.v_ == nullptr; }
  // The same value: unchanged since `b` was taken, as nothing writes over a value two hold.
  friend bool operator==(const value_ptr& a, const value_ptr& b) noexcept { return a.v_ == b.v_; }

  // True when nothing else holds the value. Acquire: every other holder's reads of it (a reply on another
  // thread that sent it and let go) happen before what the caller writes next. The count cannot rise behind
  // this check while the caller holds the shard's lock: only a holder copies a value, and the keyspace's
  // entry is copied only under that lock.
  [[nodiscard]] bool unique() const noexcept { return v_->refs.load(std::memory_order_acquire) == 1; }
  // The string to change in place: only while unique(), under the shard's lock.
  [[nodiscard]] std::string& unshared() const noexcept { return v_->s; }

 private:
  struct shared {
    std::atomic<std::uint32_t> refs;
    std::string s;
  };
  shared* v_ = nullptr;
};

inline value_ptr make_value(std::string_view v) { return value_ptr(std::string(v)); }

}  // namespace kv
