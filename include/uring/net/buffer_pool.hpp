/// @file
/// uring/net/buffer_pool.hpp — receive buffers shared by many connections, lent out one chunk at a time.
///
/// Provides: uring::net::buffer_pool, uring::net::leased_buffer.
/// Threads: a pool belongs to the executor it was made on: make it, receive with it, destroy it and destroy
/// its leases on that executor's thread.
///
/// A pool holds `count` buffers of `size` bytes. `co_await stream.recv(pool)` (uring/net/tcp_stream.hpp)
/// yields a leased_buffer: one received chunk in one of the pool's buffers, which goes back to the pool
/// when the lease is destroyed (or reset()). A connection that is idle holds no buffer, so memory scales
/// with the data in flight, not with the number of connections.
///
/// Natively (kernel 6.0+: provided buffer rings) the buffers form a ring registered with the kernel
/// (IORING_REGISTER_PBUF_RING) under a buffer group of its own, and each stream keeps one receive armed
/// that picks a buffer from it when data comes: chunks that arrive before they are asked for wait in the
/// stream. When every buffer is out the kernel fails that receive with ENOBUFS and the data stays in the
/// socket; the stream tries again when a buffer is returned (not on a timer), so no byte is lost.
/// Elsewhere (the emulated backend, older kernels, URING_DISABLE=buf_ring or options::use_ring = false) a
/// receive waits for readability, then takes a free buffer (waiting for a return when there is none) and
/// receives into it, never ahead of a receive: the same API and the same guarantees.
///
/// Bundles (uses_bundles(); the plan's recv_bundle): one receive fills several buffers, in order, and each
/// still comes out as a chunk of its own, so a busy stream costs fewer completions per byte. Natively
/// (kernel 6.10+, probed) that is a bundled recv from the ring (IORING_RECVSEND_BUNDLE), whose length is
/// capped at what is left of the stream's share; emulated, a recvmsg into that many free buffers, the
/// unfilled ones going straight back. Off (URING_DISABLE=recv_bundle, or a kernel without them): one
/// buffer per receive, as before; the chunks and the guarantees are the same either way.
///
/// Incremental (options::incremental): a buffer holds many chunks, one after another, so a pool of large
/// buffers that receives small messages uses a buffer per `size` bytes received, not one per message. Each
/// chunk is a sub-range of its buffer and keeps the buffer out of circulation until the receive side is done
/// with it (it is full) and the chunk's lease is returned, whichever comes last. Natively (kernel 6.12+,
/// probed as recv_incremental) the ring is registered with IOU_PBUF_RING_INC and the kernel fills the buffer
/// at the ring's head across receives of every stream, flagging IORING_CQE_F_BUF_MORE while it keeps it;
/// elsewhere (emulated, URING_DISABLE=recv_incremental, an older kernel, use_ring = false) a receive goes
/// into the unfilled rest of a partly used buffer (or a fresh one), and a partly used buffer whose chunks are
/// all back starts over. Incremental pools take no bundles (a receive is at most one buffer's rest); see
/// docs/incremental_buffers.md.
///
/// Sharing: one stream holds at most options::max_per_stream buffers (chunks waiting in it plus its leases
/// not yet returned; in an incremental pool each chunk counts as a buffer, shared or not, which bounds the
/// buffers the stream pins). At the limit it receives nothing more (its data waits in the socket, and TCP
/// slows its peer) until one of them comes back, so a peer that sends without reading what it is sent cannot
/// drain the pool for every other connection. When the pool is dry, each returned buffer is offered first
/// to the streams that hold none, then to the others, oldest wait first. More such peers than buffers can
/// still hold them all while the server waits to write to them: a server ends a stream's receive armed
/// ahead (a receive with no time to wait, with_timeout 0) before a write that may wait on its peer
/// (tcp_stream::unacknowledged tells), as uring-http and uring-kv do.
///
/// Lifetime: a lease keeps the pool's memory alive, so leases may outlive the pool and the stream they came
/// from (they stay valid, and are freed when the last one goes). The pool object itself must be destroyed
/// before its executor; receives still waiting on it then fail with ECANCELED.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace uring {
class executor;
}

namespace uring::detail {
struct pool_state;  ///< src/net/buffer_pool_state.hpp
/// Gives buffer `id` back to `pool` and drops the lease's reference to it.
/// `id` is the buffer's id, or in an incremental pool the chunk's.
void release_lease(pool_state* pool, std::uint32_t id) noexcept;
}  // namespace uring::detail

namespace uring::net {

/// One received chunk in a buffer lent by a buffer_pool. Empty (size 0, no buffer) at end of stream or
/// when moved from. Contiguous bytes: it converts to uring::const_buffer, so `co_await s.write_all(lease)`
/// sends it on.
class leased_buffer {
 public:
  /// An empty lease.
  leased_buffer() noexcept = default;
  ///@{
  /// Moves the lease; `o` is left empty (an assigned-to lease first returns its own buffer).
  leased_buffer(leased_buffer&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)),
        data_(o.data_),
        size_(std::exchange(o.size_, 0)),
        id_(o.id_) {}
  leased_buffer& operator=(leased_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::exchange(o.pool_, nullptr);
      data_ = o.data_;
      size_ = std::exchange(o.size_, 0);
      id_ = o.id_;
    }
    return *this;
  }
  ///@}
  /// Returns the buffer to its pool (on the pool's thread).
  ~leased_buffer() { reset(); }

  /// The received bytes.
  [[nodiscard]] const char* data() const noexcept { return data_; }
  /// Writable: the bytes are the holder's until the lease goes (to parse in place, say).
  [[nodiscard]] char* mutable_data() noexcept { return data_; }
  /// How many bytes were received (0: end of stream, or an empty lease).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// True when size() is 0.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  ///@{
  /// The bytes as a range.
  [[nodiscard]] const char* begin() const noexcept { return data_; }
  [[nodiscard]] const char* end() const noexcept { return data_ + size_; }
  ///@}
  /// The bytes as std::byte.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {reinterpret_cast<const std::byte*>(data_), size_};
  }
  /// The bytes as text.
  [[nodiscard]] std::string_view view() const noexcept { return {data_, size_}; }

  /// Returns the buffer to its pool now (on the pool's thread); the lease is empty afterwards.
  void reset() noexcept {
    if (pool_ != nullptr) detail::release_lease(std::exchange(pool_, nullptr), id_);
    size_ = 0;
  }

  /// For the library: the lease of buffer (or incremental chunk) `id` of `pool` (whose reference it takes
  /// over), holding `size` bytes at `data`.
  leased_buffer(detail::pool_state* pool, std::uint32_t id, char* data, std::size_t size) noexcept
      : pool_(pool), data_(data), size_(size), id_(id) {}

 private:
  detail::pool_state* pool_ = nullptr;
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t id_ = 0;
};

/// Receive buffers shared by many connections, lent out one chunk at a time: `co_await
/// stream.recv(pool)` yields a leased_buffer, which goes back to the pool when it is destroyed. Natively
/// a provided-buffer ring (kernel 6.0+), with bundles from 6.10 and incremental buffers where the probe
/// finds them; elsewhere the same API and guarantees by plain receives (the file's comment has each road).
///
/// Threads: a pool belongs to the executor it was made on: make it, receive with it, destroy it and
/// destroy its leases on that executor's thread.
class buffer_pool {
 public:
  /// The pool's shape and roads.
  struct options {
    std::uint32_t count = 256;  ///< buffers, 1 to 32768
    std::uint32_t size = 4096;  ///< bytes each
    /// Register the buffers with the kernel as a provided-buffer ring where the executor can. False:
    /// always the one-recv-per-call path, to compare or to test it.
    bool use_ring = true;
    /// The most buffers one stream holds at once; a receive of a stream at the limit waits for one of
    /// them to be returned (an application that keeps more chunks than this before returning any waits
    /// forever: raise it). 0: count / 4, at most 16 (at least 1). At most count, except in an incremental
    /// pool, where it counts chunks (each as a buffer) and several share a buffer.
    std::uint32_t max_per_stream = 0;
    /// Many chunks share a buffer (see above). Off by default: it pays where buffers are large and messages
    /// small, and costs a little bookkeeping per chunk and bundles (one receive per chunk) everywhere.
    bool incremental = false;
  };

  ///@{
  /// A pool on the running executor (a std::logic_error if none runs on this thread).
  buffer_pool() : buffer_pool(options{}) {}
  explicit buffer_pool(options opts);
  ///@}
  /// A pool on `ex`, from its owner thread. Throws std::system_error if the kernel refuses the ring for a
  /// reason other than lacking the feature (then the pool simply receives without one).
  buffer_pool(executor& ex, options opts);
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
  ~buffer_pool();

  /// options::count: the number of buffers.
  [[nodiscard]] std::uint32_t count() const noexcept;
  /// options::size: the bytes of each buffer.
  [[nodiscard]] std::uint32_t buffer_size() const noexcept;
  /// Buffers neither leased nor holding received data that waits in a stream.
  [[nodiscard]] std::uint32_t available() const noexcept;
  /// How many times a receive found every buffer out and had to wait for one to come back.
  [[nodiscard]] std::uint64_t exhausted() const noexcept;
  /// Receives that brought data. Chunks per receive above 1 is bundling at work (uses_bundles()).
  [[nodiscard]] std::uint64_t receives() const noexcept;
  /// Whether one receive may fill several buffers (each still its own chunk), as the executor's plan says.
  [[nodiscard]] bool uses_bundles() const noexcept;
  /// options::max_per_stream as resolved (never 0).
  [[nodiscard]] std::uint32_t max_per_stream() const noexcept;
  /// Whether the buffers are a provided-buffer ring in the kernel or not.
  [[nodiscard]] bool uses_ring() const noexcept;
  /// options::incremental: whether chunks share buffers (on every backend; natively the ring is then one
  /// the kernel consumes incrementally, where uses_ring()).
  [[nodiscard]] bool incremental() const noexcept;
  /// Times a buffer began receiving from its start: one per chunk, unless incremental.
  [[nodiscard]] std::uint64_t buffers_filled() const noexcept;

  [[nodiscard]] detail::pool_state& state() const noexcept { return *state_; }  ///< for the library

 private:
  detail::pool_state* state_;
};

}  // namespace uring::net
