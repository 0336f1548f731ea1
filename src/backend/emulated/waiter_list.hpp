// backend/emulated/waiter_list.hpp — the operations waiting on one fd in one direction, oldest first.
//
// Provides: detail::waiter_list.
// Threads: its backend's owner thread only.
//
// Linked through operation::next: the executor links an operation there only while it is queued for the
// turn's submission, and submit() has read the link before it starts (and may park) the operation, so a
// parked operation's link is the backend's. An empty list is two null pointers and owns no memory, which
// is what every idle connection's fd holds in its other directions.
#pragma once

#include "uring/detail/operation.hpp"

namespace uring::detail {

class waiter_list {
 public:
  [[nodiscard]] bool empty() const noexcept { return head_ == nullptr; }
  [[nodiscard]] operation* front() const noexcept { return head_; }

  void push_back(operation& op) noexcept {
    op.next = nullptr;
    (tail_ != nullptr ? tail_->next : head_) = &op;
    tail_ = &op;
  }
  void pop_front() noexcept {
    head_ = head_->next;
    if (head_ == nullptr) tail_ = nullptr;
  }
  // Unlinks `op`, wherever it stands; nothing if it is not listed.
  void remove(const operation& op) noexcept {
    operation* prev = nullptr;
    for (operation* p = head_; p != nullptr; prev = p, p = p->next) {
      if (p == &op) return unlink(prev, p, p->next);
    }
  }
  // Unlinks, in order, every operation `take` returns true for; `take` may complete the operation: its
  // link is read before.
  template <class Take>
  void remove_if(Take take) {
    operation* prev = nullptr;
    for (operation* p = head_; p != nullptr;) {
      operation* next = p->next;
      if (take(*p)) {
        unlink(prev, p, next);
      } else {
        prev = p;
      }
      p = next;
    }
  }
  template <class Fn>
  void for_each(Fn fn) const {
    for (const operation* p = head_; p != nullptr; p = p->next) fn(*p);
  }

 private:
  void unlink(operation* prev, const operation* p, operation* next) noexcept {
    (prev != nullptr ? prev->next : head_) = next;
    if (tail_ == p) tail_ = prev;
  }

  operation* head_ = nullptr;
  operation* tail_ = nullptr;
};

}  // namespace uring::detail
