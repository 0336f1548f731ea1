// read_stream.cpp — a read_stream's checks on its fd; the reading itself is the leased receive's state
// (net/leased_recv.cpp), which reads rather than receives for it.
#include "uring/read_stream.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace uring {

read_stream::read_stream(owned_fd fd, net::buffer_pool& pool) : fd_(std::move(fd)), pool_(&pool) {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) throw std::system_error(errno, std::system_category(), "read_stream");
  // Always "readable" to poll and epoll refuses them: the stream would read a file once and call it done.
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode)) {
    throw std::system_error(EBADFD, std::system_category(),
                            "read_stream: not a pollable stream (a regular file, directory or block device)");
  }
}

}  // namespace uring
