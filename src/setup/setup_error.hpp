// setup_error.hpp — turns an io_uring_setup (or io_uring_register) errno into a sentence a user can act on.
#pragma once

#include <string>

namespace uring::detail {

// Why io_uring_setup failed with `err` (a positive errno) and what to do about it.
std::string explain_setup_error(int err);

// Why a call the probe made (`call`, e.g. "io_uring_register(IORING_REGISTER_PROBE)") failed with `err`, with
// the usual cause where the errno has one: "io_uring_register(...): EPERM (Operation not permitted) — ...".
std::string explain_call_error(const char* call, int err);

}  // namespace uring::detail
