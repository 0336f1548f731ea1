// setup_error.hpp — turns an io_uring_setup errno into a sentence a user can act on.
#pragma once

#include <string>

namespace uring::detail {

// Why io_uring_setup failed with `err` (a positive errno) and what to do about it.
std::string explain_setup_error(int err);

}  // namespace uring::detail
