/// @file
/// uring/fixed_buffers.hpp — registered buffers: memory the kernel has pinned once, so that a read, write
/// or send from it skips the per-operation page lookup and pinning (IORING_OP_READ_FIXED / WRITE_FIXED,
/// IORING_RECVSEND_FIXED_BUF).
///
/// Provides: uring::register_buffers, uring::fixed_buffers, uring::fixed_buffer, uring::fixed_slice,
/// uring::read_fixed, uring::write_fixed, uring::send_fixed, uring::send_zc_fixed.
/// Threads: a set belongs to the executor it was registered on: lease, update, use and destroy it (and
/// its leases) on that executor's thread, and destroy it before the executor.
///
/// `co_await register_buffers(count, size)` maps count × size bytes (each buffer page-aligned), registers
/// them as the running executor's table of registered buffers (IORING_REGISTER_BUFFERS2) and yields the
/// owner, which unregisters them when destroyed (or unregister()). One set per executor at a time (EBUSY).
/// Limits: count 1..16384, size 1 byte..1 GiB (the kernel's); the kernel counts the pinned pages against
/// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK: a limit too low fails with ENOMEM and a message
/// saying what to raise (`ulimit -l`).
///
/// Leasing: `co_await bufs.lease()` yields a free buffer, waiting (first come, first served) while all are
/// out; `bufs.try_lease()` never waits (nullopt when all are out). A lease goes back when destroyed or
/// reset(). Unregistering wakes the waiters with ECANCELED (try_lease then fails ENXIO); leases still out
/// stay valid memory (the set's memory lives until the last of them goes), but operations on them fail
/// EFAULT, as the kernel fails an index its table lacks.
///
/// Operations take a fixed_slice: a lease (its whole buffer) or lease.slice(offset, length), which checks
/// the bounds before anything is submitted (std::system_error EINVAL). A slice made by hand is checked by
/// the kernel (and the same way by the emulation): an index the table lacks, or bytes outside that buffer,
/// fail EFAULT.
///
/// update(index, memory) puts the caller's memory in slot `index` (IORING_REGISTER_BUFFERS_UPDATE, tagged)
/// in place of what it held; an empty span gives the slot its own buffer back. The slot must not be leased
/// (EBUSY); a lease of it afterwards is that memory. It completes once the kernel no longer uses what the
/// slot held before (the tag's completion): caller memory replaced by an update may be freed then.
///
/// Natively registration needs kernel 5.13 (tags), read_fixed/write_fixed 5.1, send_zc_fixed 6.0; a plain
/// send_fixed needs a kernel whose IORING_OP_SEND takes a registered buffer, which none up to 6.18 does
/// (EINVAL; the probe's send_fixed_buf says). The emulation keeps the same table (indexes, bounds, EFAULT,
/// EBUSY, mlock()ed memory for the same RLIMIT_MEMLOCK error) and runs pread/pwrite/send on the buffer.
/// docs/registered_buffers.md says more.
#pragma once

#include <sys/socket.h>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "uring/detail/io_awaitable.hpp"
#include "uring/detail/send_zc.hpp"
#include "uring/io.hpp"
#include "uring/task.hpp"

namespace uring {

class fixed_buffer;

namespace detail {
struct fixed_set;  ///< src/executor/fixed_buffers.cpp
void fixed_release(fixed_set* set, std::uint32_t index) noexcept;
void fixed_unref(fixed_set* set) noexcept;
/// A coroutine waiting in fixed_buffers::lease(), in the set's queue until a buffer is handed to it.
struct fixed_waiter {
  fixed_waiter* prev = nullptr;
  fixed_waiter* next = nullptr;
  std::coroutine_handle<> handle;
  fixed_set* set = nullptr;
  int error = 0;
  bool queued = false;
  std::uint32_t index = 0;  ///< the buffer handed over
  bool handed = false;
};
bool fixed_take(fixed_set* set, fixed_buffer& out) noexcept;
void fixed_enqueue(fixed_waiter& w) noexcept;
void fixed_dequeue(fixed_waiter& w) noexcept;
fixed_buffer fixed_lease_of(fixed_set* set, std::uint32_t index) noexcept;
}  // namespace detail

/// Bytes in a registered buffer: its index in the executor's table and where they are.
struct fixed_slice {
  std::uint32_t index = 0;    ///< the buffer's index in the executor's table
  std::byte* data = nullptr;  ///< the first byte
  std::size_t size = 0;       ///< how many bytes
};

/// A leased registered buffer. Empty (no buffer) when default-made or moved from.
class fixed_buffer {
 public:
  /// An empty lease.
  fixed_buffer() noexcept = default;
  ///@{
  /// Moves the lease; `o` is left empty (an assigned-to lease first gives its own buffer back).
  fixed_buffer(fixed_buffer&& o) noexcept
      : set_(std::exchange(o.set_, nullptr)), data_(o.data_), size_(o.size_), index_(o.index_) {}
  fixed_buffer& operator=(fixed_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      set_ = std::exchange(o.set_, nullptr);
      data_ = o.data_;
      size_ = o.size_;
      index_ = o.index_;
    }
    return *this;
  }
  ///@}
  /// Gives the buffer back (reset()).
  ~fixed_buffer() { reset(); }

  /// Gives the buffer back to its set (to the first waiter, if one waits).
  void reset() noexcept {
    if (set_ != nullptr) detail::fixed_release(std::exchange(set_, nullptr), index_);
  }
  /// True when the lease holds a buffer.
  explicit operator bool() const noexcept { return set_ != nullptr; }
  /// The buffer's index in the executor's table.
  [[nodiscard]] std::uint32_t index() const noexcept { return index_; }
  /// The buffer's first byte.
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// The buffer's size.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The buffer as a span.
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  /// The whole buffer.
  operator fixed_slice() const noexcept { return {index_, data_, size_}; }  // NOLINT: a view of it
  /// Bytes [offset, offset + length) of it; std::system_error(EINVAL) past its end, or on an empty lease.
  [[nodiscard]] fixed_slice slice(std::size_t offset, std::size_t length) const;

 private:
  friend fixed_buffer detail::fixed_lease_of(detail::fixed_set*, std::uint32_t) noexcept;
  detail::fixed_set* set_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t index_ = 0;
};

/// The owner of an executor's registered buffers (see the top of this file).
class fixed_buffers {
 public:
  /// An empty set (registered() is false); register_buffers makes real ones.
  fixed_buffers() noexcept = default;
  ///@{
  /// Moves the set; `o` is left empty (an assigned-to set first unregisters its own).
  fixed_buffers(fixed_buffers&& o) noexcept : set_(std::exchange(o.set_, nullptr)) {}
  fixed_buffers& operator=(fixed_buffers&& o) noexcept {
    if (this != &o) {
      unregister();
      set_ = std::exchange(o.set_, nullptr);
    }
    return *this;
  }
  ///@}
  /// Unregisters the buffers (unregister()).
  ~fixed_buffers() { unregister(); }

  /// Unregisters the buffers from the ring now (the destructor's work); waiting leases fail ECANCELED.
  void unregister() noexcept;
  /// True while the set holds registered buffers.
  [[nodiscard]] bool registered() const noexcept { return set_ != nullptr; }
  /// How many buffers.
  [[nodiscard]] std::size_t count() const noexcept;
  /// The bytes of each buffer.
  [[nodiscard]] std::size_t buffer_size() const noexcept;
  [[nodiscard]] std::size_t available() const noexcept;  ///< buffers not leased
  [[nodiscard]] std::size_t waiting() const noexcept;    ///< lease() callers waiting for one

  /// A free buffer now, or nullopt when every one is leased.
  [[nodiscard]] std::optional<fixed_buffer> try_lease();

  /// What lease() returns: awaited, it yields a free buffer, waiting for a return while every one is leased.
  class [[nodiscard]] lease_awaitable {
   public:
    /// For lease(): a lease of set `set`.
    explicit lease_awaitable(detail::fixed_set* set) noexcept { w_.set = set; }
    lease_awaitable(lease_awaitable&& o) noexcept { w_.set = o.w_.set; }  ///< before it is awaited
    lease_awaitable& operator=(lease_awaitable&&) = delete;
    ~lease_awaitable() {
      if (w_.queued) detail::fixed_dequeue(w_);
      if (w_.handed) detail::fixed_release(w_.set, w_.index);
    }
    ///@{
    /// The awaiter protocol, called by `co_await`.
    bool await_ready() noexcept { return w_.set == nullptr || detail::fixed_take(w_.set, got_); }
    void await_suspend(std::coroutine_handle<> h) noexcept {
      w_.handle = h;
      detail::fixed_enqueue(w_);
    }
    ///@}
    /// The lease; std::system_error ENXIO on an unregistered set, ECANCELED if it was unregistered meanwhile.
    fixed_buffer await_resume();

   private:
    detail::fixed_waiter w_;
    fixed_buffer got_;
  };
  /// A free buffer, waiting for a return while every one is leased.
  lease_awaitable lease() noexcept { return lease_awaitable(set_); }

  /// Puts `memory` (empty: the slot's own buffer) in slot `index`; see the top of this file.
  task<void> update(std::uint32_t index, std::span<std::byte> memory);

 private:
  friend task<fixed_buffers> register_buffers(std::size_t count, std::size_t size);
  detail::fixed_set* set_ = nullptr;
};

/// Registers `count` buffers of `size` bytes with the running executor (see the top of this file).
task<fixed_buffers> register_buffers(std::size_t count, std::size_t size);

///@{
/// Reads into / writes from a registered buffer at `offset` in the file (detail::current_position: the
/// file's position, as for pipes), as read_at / write_at. The byte count.
inline detail::io_awaitable<std::size_t> read_fixed(
    int fd, fixed_slice s, std::uint64_t offset = detail::current_position) noexcept {
  return {"read_fixed",
          {.code = detail::op_code::read_fixed,
           .fd = fd,
           .len = detail::clamp_len(s.size),
           .offset = offset,
           .addr = s.data,
           .aux = s.index}};
}
inline detail::io_awaitable<std::size_t> write_fixed(
    int fd, fixed_slice s, std::uint64_t offset = detail::current_position) noexcept {
  return {"write_fixed",
          {.code = detail::op_code::write_fixed,
           .fd = fd,
           .len = detail::clamp_len(s.size),
           .offset = offset,
           .addr = s.data,
           .aux = s.index}};
}
///@}

/// send(2) from a registered buffer, with its MSG_* flags (MSG_NOSIGNAL always added). The byte count.
inline detail::io_awaitable<std::size_t> send_fixed(int fd, fixed_slice s, int flags = 0) noexcept {
  return {"send_fixed",
          {.code = detail::op_code::send_fixed,
           .fd = fd,
           .len = detail::clamp_len(s.size),
           .op_flags = static_cast<std::uint32_t>(flags | MSG_NOSIGNAL),
           .addr = s.data,
           .aux = s.index}};
}
/// As send_fixed, zero-copy (IORING_OP_SEND_ZC): resumes once the kernel has let go of the bytes, as
/// tcp_stream::send_zc. Where the executor has no zero-copy send (emulated, URING_DISABLE=send_zc) it is
/// send_fixed.
inline detail::send_zc_awaitable send_zc_fixed(int fd, fixed_slice s, int flags = 0) noexcept {
  return {fd, const_buffer(s.data, s.size), static_cast<std::uint32_t>(flags | MSG_NOSIGNAL), s.index};
}

}  // namespace uring
