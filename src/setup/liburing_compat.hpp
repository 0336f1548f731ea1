// liburing_compat.hpp — kernel numbers newer than Debian's liburing 2.3, defined once for the probe and
// the backends (which use them only where the probe found the kernel supports them).
#pragma once

#include <cstdint>

namespace uring::detail {

inline constexpr std::uint32_t kMsgRingFlagsPass = 1u << 1;  // IORING_MSG_RING_FLAGS_PASS (6.3)
inline constexpr unsigned kRegisterSendMsgRing = 31;         // IORING_REGISTER_SEND_MSG_RING (6.13)
// IORING_OP_FIXED_FD_INSTALL (6.8): a plain fd for a direct descriptor. An older kernel fails it with
// EINVAL, which send_direct reports as such.
inline constexpr std::uint8_t kOpFixedFdInstall = 54;

}  // namespace uring::detail
