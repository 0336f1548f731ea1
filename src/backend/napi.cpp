// backend/napi.cpp — the kernel's NAPI busy-polling interfaces, by their numbers and layouts.
#include "backend/napi.hpp"

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "setup/liburing_compat.hpp"

namespace uring::detail {

namespace {

// struct io_uring_napi (6.9; 6.13 gave two of its pad bytes meanings whose zero is the 6.9 behaviour:
// dynamic tracking of the sockets the ring serves).
struct kernel_napi {
  std::uint32_t busy_poll_to;
  std::uint8_t prefer_busy_poll;
  std::uint8_t opcode;  // IO_URING_NAPI_REGISTER_OP
  std::uint8_t pad[2];
  std::uint32_t op_param;  // IO_URING_NAPI_TRACKING_DYNAMIC
  std::uint32_t resv;
};
static_assert(sizeof(kernel_napi) == 16);

// struct epoll_params and its ioctls (6.9).
struct epoll_params {
  std::uint32_t busy_poll_usecs;
  std::uint16_t busy_poll_budget;
  std::uint8_t prefer_busy_poll;
  std::uint8_t pad;
};
static_assert(sizeof(epoll_params) == 8);
constexpr unsigned long kEpollSetParams = _IOW(0x8A, 0x01, epoll_params);  // EPIOCSPARAMS
constexpr unsigned long kEpollGetParams = _IOR(0x8A, 0x02, epoll_params);  // EPIOCGPARAMS
// The kernel's BUSY_POLL_BUDGET: what epoll_wait polls per round by default; more needs CAP_NET_ADMIN.
constexpr std::uint16_t kBudget = 8;

int result(long rc) noexcept { return rc < 0 ? -errno : 0; }

}  // namespace

int register_napi(int ring_fd, napi_settings s) noexcept {
  kernel_napi n{};
  n.busy_poll_to = s.busy_poll_us;
  n.prefer_busy_poll = s.prefer_busy_poll ? 1 : 0;
  return result(::syscall(SYS_io_uring_register, ring_fd, kRegisterNapi, &n, 1));
}

int unregister_napi(int ring_fd, napi_settings& was) noexcept {
  kernel_napi n{};
  const int r = result(::syscall(SYS_io_uring_register, ring_fd, kUnregisterNapi, &n, 1));
  was = {n.busy_poll_to, n.prefer_busy_poll != 0};
  return r;
}

int set_epoll_busy_poll(int epoll_fd, napi_settings s) noexcept {
  epoll_params p{};
  p.busy_poll_usecs = s.busy_poll_us;
  p.busy_poll_budget = s.busy_poll_us > 0 ? kBudget : 0;
  p.prefer_busy_poll = s.prefer_busy_poll ? 1 : 0;
  return result(::ioctl(epoll_fd, kEpollSetParams, &p));
}

int get_epoll_busy_poll(int epoll_fd, napi_settings& now) noexcept {
  epoll_params p{};
  const int r = result(::ioctl(epoll_fd, kEpollGetParams, &p));
  now = {p.busy_poll_usecs, p.prefer_busy_poll != 0};
  return r;
}

}  // namespace uring::detail
