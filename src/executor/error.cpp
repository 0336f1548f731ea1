#include "uring/error.hpp"

namespace uring {

void throw_errno(int err, const char* what) { throw std::system_error(err, std::system_category(), what); }

}  // namespace uring
