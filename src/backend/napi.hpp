// backend/napi.hpp — NAPI busy polling as the kernel takes it: registered on a ring (IORING_REGISTER_NAPI)
// or set on an epoll fd (EPIOCSPARAMS), both kernel 6.9+, neither known to liburing 2.3 or Debian 12's
// headers.
//
// Provides: detail::napi_settings, detail::register_napi, detail::unregister_napi,
// detail::set_epoll_busy_poll, detail::get_epoll_busy_poll.
// Threads: plain calls on an fd; a ring's owner thread (SINGLE_ISSUER rings refuse others).
#pragma once

#include <cstdint>

namespace uring::detail {

struct napi_settings {
  std::uint32_t busy_poll_us = 0;
  bool prefer_busy_poll = false;
};

// Each: 0, or -errno (EINVAL from a kernel without it).
int register_napi(int ring_fd, napi_settings s) noexcept;
// Takes the ring's registration back, saying what it was (all zero: none).
int unregister_napi(int ring_fd, napi_settings& was) noexcept;
int set_epoll_busy_poll(int epoll_fd, napi_settings s) noexcept;
int get_epoll_busy_poll(int epoll_fd, napi_settings& now) noexcept;

}  // namespace uring::detail
