// setup/scratch_ring.hpp — the throw-away rings the kernel probe tries features on: a small ring torn
// down on every path, a provided-buffer ring on it, and the CQEs they answer with.
//
// Provides: uring::probe::completion, unique_fd, scratch_ring, buffer_ring, kOpTag, kCancelTag.
// Threads: one probe at a time, on the thread that runs it.
#pragma once

#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "setup/setup_error.hpp"

namespace uring::probe {

// user_data of the probes' own operations.
constexpr std::uint64_t kOpTag = 1;
constexpr std::uint64_t kCancelTag = 2;
// Every CQE the probe waits for is due within microseconds; the limit only keeps a broken kernel from
// hanging the process that probes.
constexpr long long kCqeWaitNs = 200'000'000;

// A CQE's fixed part, copied out so that its CQ slot is released at once.
struct completion {
  std::uint64_t user_data = 0;
  std::int32_t res = 0;
  std::uint32_t flags = 0;

  [[nodiscard]] bool more() const noexcept { return (flags & IORING_CQE_F_MORE) != 0; }
};

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool ok() const noexcept { return fd_ >= 0; }

 private:
  int fd_;
};

// A small ring that lives for one probe and is torn down on every path.
class scratch_ring {
 public:
  explicit scratch_ring(unsigned setup_flags = 0) {
    params_.flags = setup_flags;
    error_ = -detail::init_ring(4, &ring_, &params_);
  }
  scratch_ring(const scratch_ring&) = delete;
  scratch_ring& operator=(const scratch_ring&) = delete;
  ~scratch_ring() {
    if (ok()) detail::exit_ring(&ring_);
  }

  [[nodiscard]] bool ok() const noexcept { return error_ == 0; }
  [[nodiscard]] int error() const noexcept { return error_; }  // io_uring_setup's errno, positive
  [[nodiscard]] const io_uring_params& params() const noexcept { return params_; }
  [[nodiscard]] io_uring* get() noexcept { return &ring_; }
  [[nodiscard]] int fd() const noexcept { return ring_.ring_fd; }

  // Never null here: a probe queues at most two SQEs on a ring of four.
  io_uring_sqe* sqe(std::uint64_t user_data) noexcept {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    io_uring_sqe_set_data64(s, user_data);
    return s;
  }

  // Submits what is queued and returns the next completion; nothing if none came within kCqeWaitNs.
  std::optional<completion> submit_and_wait() {
    if (io_uring_submit(&ring_) < 0) return std::nullopt;
    return wait();
  }
  // The next completion, for CQEs that another ring or the kernel posts here.
  std::optional<completion> wait() {
    __kernel_timespec limit{0, kCqeWaitNs};
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_timeout(&ring_, &cqe, &limit) != 0 || cqe == nullptr) return std::nullopt;
    completion c{cqe->user_data, cqe->res, cqe->flags};
    io_uring_cqe_seen(&ring_, cqe);
    return c;
  }

  // Cancels the armed multishot operation kOpTag and reaps until both its last CQE (no F_MORE) and the
  // cancel's CQE are in, so nothing of it is in flight when its buffers and fds go away.
  void cancel_and_drain() {
    io_uring_prep_cancel64(sqe(kCancelTag), kOpTag, 0);
    if (io_uring_submit(&ring_) < 0) return;  // the ring's teardown cancels it instead
    bool op_done = false, cancel_done = false;
    while (!op_done || !cancel_done) {
      std::optional<completion> c = wait();
      if (!c) return;
      if (c->user_data == kCancelTag) cancel_done = true;
      if (c->user_data == kOpTag && !c->more()) op_done = true;
    }
  }

 private:
  io_uring ring_{};
  io_uring_params params_{};
  int error_ = 0;
};

// A provided-buffer ring (IORING_REGISTER_PBUF_RING) of a few small buffers, filled and registered as
// group kGroup. One private mapping holds both: the ring in the first page (the kernel wants it page
// aligned), the buffers in the second. liburing 2.3 has no io_uring_setup_buf_ring, so this is its
// hand-made equivalent.
class buffer_ring {
 public:
  static constexpr unsigned kEntries = 4;  // a power of two, as the kernel requires
  static constexpr unsigned kBufferSize = 256;
  static constexpr std::uint16_t kGroup = 7;

  // `flags`: the registration's (io_uring_buf_reg::flags, liburing 2.3's pad), e.g. IOU_PBUF_RING_INC.
  explicit buffer_ring(io_uring& ring, std::uint16_t flags = 0)
      : ring_(ring), page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    void* mem = ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      error_ = detail::explain_call_error("mmap of the buffer ring", errno);
      return;
    }
    mem_ = static_cast<char*>(mem);
    auto* br = reinterpret_cast<io_uring_buf_ring*>(mem_);
    io_uring_buf_ring_init(br);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(mem_);
    reg.ring_entries = kEntries;
    reg.bgid = kGroup;
    reg.pad = flags;
    if (int r = io_uring_register_buf_ring(&ring_, &reg, 0); r != 0) {
      error_ = detail::explain_call_error("io_uring_register(IORING_REGISTER_PBUF_RING)", -r);
      return;
    }
    registered_ = true;
    for (unsigned i = 0; i < kEntries; ++i) {
      io_uring_buf_ring_add(br, mem_ + page_ + i * kBufferSize, kBufferSize, static_cast<unsigned short>(i),
                            io_uring_buf_ring_mask(kEntries), static_cast<int>(i));
    }
    io_uring_buf_ring_advance(br, kEntries);
  }
  buffer_ring(const buffer_ring&) = delete;
  buffer_ring& operator=(const buffer_ring&) = delete;
  ~buffer_ring() {
    unregister();
    if (mem_ != nullptr) ::munmap(mem_, 2 * page_);
  }

  [[nodiscard]] bool registered() const noexcept { return registered_; }
  // Buffer `id`'s memory.
  [[nodiscard]] const char* buffer(unsigned id) const noexcept { return mem_ + page_ + id * kBufferSize; }
  // Why the registration failed ("" when it did not).
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // True when the kernel took the registration back.
  bool unregister() {
    if (!registered_) return false;
    registered_ = false;
    return io_uring_unregister_buf_ring(&ring_, kGroup) == 0;
  }

 private:
  io_uring& ring_;
  std::size_t page_;
  char* mem_ = nullptr;
  bool registered_ = false;
  std::string error_;
};

}  // namespace uring::probe
