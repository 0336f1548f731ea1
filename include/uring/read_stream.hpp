/// @file
/// uring/read_stream.hpp — the bytes of a pipe, FIFO or eventfd as a stream of chunks leased from a pool.
///
/// Provides: uring::read_stream.
/// Threads: use it from coroutines of the pool's executor; a stop request for next() may come from any
/// thread.
///
/// `co_await s.next()` yields the next chunk read from the fd, in a buffer leased from a net::buffer_pool
/// (uring/net/buffer_pool.hpp): the bytes in order, each chunk at most one buffer, an eventfd's counter as
/// one 8-byte chunk per read. An empty lease is end of file (every writer closed the pipe). The read is
/// armed by the first next() and stays armed between them: chunks that arrive before they are asked for
/// wait in the stream, up to the pool's per-stream share; beyond it, and whenever the pool is dry, the data
/// waits in the pipe and the read starts again when a buffer comes back, so nothing is lost.
///
/// Natively, with the pool's provided-buffer ring, one IORING_OP_READ_MULTISHOT (kernel 6.7) picks a
/// buffer per chunk where the stream's share is the whole pool (max_per_stream = count: the kernel fills
/// buffers for as long as the fd has data, so no smaller share could hold); otherwise, and where the probe
/// finds none (or URING_DISABLE=read_multishot), one IORING_OP_READ with buffer select per chunk. Without a
/// ring (the emulated backend, older kernels, URING_DISABLE=buf_ring) the stream waits for readability (the
/// emulation's epoll), then reads into a free pool buffer: the same chunks and the same guarantees.
///
/// next() throws std::system_error("read_stream: ..."); .nothrow() yields a net::recv_result instead.
/// with_stop_token(next(), t) and with_timeout(next(), d) apply (uring/net/leased_recv.hpp): a stop fails
/// the wait with ECANCELED, a timeout or the awaiting task's deadline with ETIMEDOUT, and neither takes a
/// byte: what arrives meanwhile is there for the next next().
#pragma once

#include <stop_token>

#include "uring/net/buffer_pool.hpp"
#include "uring/net/leased_recv.hpp"
#include "uring/owned_fd.hpp"

namespace uring {

/// The bytes of a pipe, FIFO or eventfd as a stream of chunks leased from a net::buffer_pool: `co_await
/// s.next()` yields the next chunk, empty at end of file. Natively one IORING_OP_READ_MULTISHOT (kernel
/// 6.7) or a read with buffer select per chunk; without a buffer ring, readability then a read (the file's
/// comment has the roads). next() throws std::system_error("read_stream: ..."); .nothrow(),
/// with_stop_token and with_timeout apply.
///
/// Threads: use it from coroutines of the pool's executor; a stop request for next() may come from any
/// thread.
class read_stream {
 public:
  /// Reads `fd` (owned: closed with the stream) into buffers of `pool`, which must outlive the stream.
  /// Throws std::system_error: EBADF for an invalid fd, EBADFD for one that cannot be polled (a regular
  /// file, a directory, a block device: read those with uring::read at an offset).
  read_stream(owned_fd fd, net::buffer_pool& pool);
  /// Moves the stream: the fd, the pool and the armed read.
  read_stream(read_stream&&) noexcept = default;
  read_stream& operator=(read_stream&&) = delete;
  /// Ends the armed read; chunks read but not taken go back to the pool, then the fd is closed.
  ~read_stream() = default;

  /// The next chunk; empty at end of file. See the top of this header.
  [[nodiscard]] net::recv_awaitable next(std::stop_token stop = {}) {
    return reader_.read(fd_.get(), *pool_, std::move(stop));
  }

  /// The fd read (owned by the stream).
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }

 private:
  owned_fd fd_;  ///< declared first: closed after the reader has ended its request
  net::buffer_pool* pool_;
  net::leased_receiver reader_;
};

}  // namespace uring
