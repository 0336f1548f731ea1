// liburing_compat.hpp — kernel numbers newer than Debian's liburing 2.3, defined once for the probe and
// the backends (which use them only where the probe found the kernel supports them).
#pragma once

#include <cstdint>

namespace uring::detail {

inline constexpr std::uint32_t kMsgRingFlagsPass = 1u << 1;  // IORING_MSG_RING_FLAGS_PASS (6.3)
inline constexpr unsigned kRegisterSendMsgRing = 31;         // IORING_REGISTER_SEND_MSG_RING (6.13)
inline constexpr unsigned kRegisterNapi = 27;                // IORING_REGISTER_NAPI (6.9)
inline constexpr unsigned kUnregisterNapi = 28;              // IORING_UNREGISTER_NAPI (6.9)
// IORING_OP_FIXED_FD_INSTALL (6.8): a plain fd for a direct descriptor. An older kernel fails it with
// EINVAL, which send_direct reports as such.
inline constexpr std::uint8_t kOpFixedFdInstall = 54;
// IORING_OP_WAITID (6.7); an older kernel fails it with EINVAL (uring::process waits by poll there).
inline constexpr std::uint8_t kOpWaitid = 50;
// IORING_OP_READ_MULTISHOT (6.7): reads a pollable fd into provided buffers, one CQE per chunk; an older
// kernel fails it with EINVAL (the probe's read_multishot).
inline constexpr std::uint8_t kOpReadMultishot = 49;
// IORING_OP_BIND and IORING_OP_LISTEN (6.11); an older kernel fails them with EINVAL.
inline constexpr std::uint8_t kOpBind = 56;
inline constexpr std::uint8_t kOpListen = 57;
// IORING_TIMEOUT_MULTISHOT (6.4): a timeout that completes every period, IORING_CQE_F_MORE while armed;
// the SQE's off is the count of completions (0: until cancelled).
inline constexpr std::uint32_t kTimeoutMultishot = 1u << 6;
// IORING_OP_FUTEX_WAIT and IORING_OP_FUTEX_WAKE (6.7), and the FUTEX2_* flags their SQE's fd carries.
inline constexpr std::uint8_t kOpFutexWait = 51;
inline constexpr std::uint8_t kOpFutexWake = 52;
inline constexpr std::uint32_t kFutex2SizeU32 = 0x02;
inline constexpr std::uint32_t kFutex2Private = 128;
// IORING_RECVSEND_BUNDLE (6.10), in a recv's ioprio: one completion for several consecutive ring buffers
// (the CQE names the first; res spans them in ring order).
inline constexpr std::uint16_t kRecvsendBundle = 1u << 4;
// io_uring_buf_reg::flags: a buffer ring consumed incrementally (IOU_PBUF_RING_INC, 6.12).
inline constexpr std::uint16_t kPbufRingInc = 2;

}  // namespace uring::detail
