// uring/detail/live_registry.hpp — the in-flight registry behind executor::inflight and the stuck-operation
// watchdog: every user operation from its start to its final completion, where a snapshot can find it.
//
// Provides: detail::live_registry. Threads: the owner thread of the executor whose op_queue holds it.
//
// Listing is on every operation's path, so it must cost a few instructions, not a structure's upkeep. An
// operation goes first to a small table indexed by its address: adding it is one store into an empty
// entry, removing it one store of null, and no other operation's record is touched. One whose entry is
// taken (another operation at a colliding address) goes to the back: an array whose free slots form a
// list (a free slot holds the next one as index << 1 | 1), so it too is added and removed without moving
// any other entry. A snapshot walks both.
#pragma once

#include <cstdint>

#include "uring/detail/operation.hpp"

namespace uring::detail {

struct live_registry {
  static constexpr std::uint32_t kFrontSlots = 256;

  live_registry() = default;
  live_registry(const live_registry&) = delete;  // `back` may point into it
  live_registry& operator=(const live_registry&) = delete;

  [[nodiscard]] bool contains(const operation& op) const noexcept {
    return front[front_index(op)] == &op || (op.live_slot < back_count && back[op.live_slot] == &op);
  }
  [[gnu::always_inline]] void add(operation& op) noexcept {
    operation*& entry = front[front_index(op)];
    if (entry == nullptr) [[likely]] {
      entry = &op;
      return;
    }
    add_back(op);
  }
  // An operation that is not listed (the executor's own, or one listed before a reset) is found in
  // neither place and left alone.
  [[gnu::always_inline]] void remove(operation& op) noexcept {
    operation*& entry = front[front_index(op)];
    if (entry == &op) [[likely]] {
      entry = nullptr;
      return;
    }
    remove_back(op);
  }
  // Every listed operation, in no particular order.
  template <class F>
  void for_each(F&& visit) const {
    for (operation* op : front) {
      if (op != nullptr) visit(*op);
    }
    for (std::uint32_t i = 1; i < back_count; ++i) {
      if (!is_free(back[i])) visit(*back[i]);
    }
  }
  // The shutdown: what is still listed may sit in a frame freed next. A completion still to come finds
  // its operation in neither place.
  void reset() noexcept;
  void release() noexcept;  // the executor's destructor

 private:
  // Records are at least 64 bytes long, so two live ones never share the address's bits from the 64s
  // up: frames allocated one after another take neighbouring entries, 16 KiB of them before the table
  // wraps (two instructions; by callgrind's count on the NOP benchmark, the 16s up wrapped every 4 KiB and
  // sent 9% of operations to the back, and mixing in higher bits cost more than it saved).
  static std::uint32_t front_index(const operation& op) noexcept {
    static_assert(sizeof(operation) >= 64);
    return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&op) >> 6) & (kFrontSlots - 1);
  }
  static operation* free_link(std::uint32_t next) noexcept {
    return reinterpret_cast<operation*>(std::uintptr_t{next} << 1 | 1u);
  }
  static bool is_free(const operation* entry) noexcept {
    return (reinterpret_cast<std::uintptr_t>(entry) & 1u) != 0;
  }
  // Defined in src/executor/inflight.cpp. Out of memory, the operation runs unlisted (live_slot 0).
  // Cold: the inline paths that call them keep fewer registers alive across the call.
  [[gnu::cold]] void add_back(operation& op) noexcept;
  [[gnu::cold]] void remove_back(operation& op) noexcept;
  bool grow_back() noexcept;

  operation* front[kFrontSlots] = {};
  // Slot 0 is never handed out: an operation with live_slot 0 is not in the back.
  operation* no_slot = free_link(0);
  operation** back = &no_slot;
  std::uint32_t back_count = 1;  // slots handed out so far, free ones included
  std::uint32_t back_capacity = 1;
  std::uint32_t free_slot = 0;  // the first free slot, 0 if none
};

}  // namespace uring::detail
