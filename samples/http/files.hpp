// samples/http/files.hpp — how uring-http finds a file under --root.
//
// Provides: sample::file_root (the served directory, held open; open() turns a request path into an open
// regular file or the status refusing it), sample::opened_file and sample::resolve_kind.
//
// The rules for GET /file/PATH (404 unless said otherwise):
//  - PATH passes uring::http::path_is_safe (no "..", ".", empty segment, control byte, backslash, and no
//    escape decoding to '.', '/', '%' or a control byte), then is percent-decoded;
//  - a decoded PATH longer than max_path bytes is 414;
//  - no segment may start with '.': dotfiles and dot-directories (.env, .git/...) are never served;
//  - no symbolic link is followed, wherever it points (inside --root or not): a file is published by
//    placing it under --root, not by linking to it;
//  - resolution stays beneath --root whatever the tree holds: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
//    | RESOLVE_NO_MAGICLINKS) on the root's fd, done inline with RESOLVE_CACHED (a lookup that would wait
//    for the disk fails with EAGAIN instead of blocking the executor); a lookup not cached, or a kernel or
//    seccomp policy without openat2 (ENOSYS, EPERM) or RESOLVE_CACHED (EINVAL), walks instead: one component
//    at a time through the ring, each directory opened with O_DIRECTORY | O_NOFOLLOW beneath the one before,
//    the last with O_NOFOLLOW. Both refuse the same paths; --resolve walk forces the walk (to test it);
//  - only a regular file is served (a directory, FIFO or device is 404; none is opened so as to block).
// Threads: a file_root is shared read-only by every executor; open() runs on the caller's.
#pragma once

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>

#include <uring/http/parser.hpp>
#include <uring/uring.hpp>

namespace sample {

enum class resolve_kind { automatic, walk };

// A decoded file path longer than this is answered 414.
inline constexpr std::size_t max_path = 1024;

struct opened_file {
  int status = 404;  // 200: `fd` is a regular file of `size` bytes, the caller's to close
  int fd = -1;
  std::uint64_t size = 0;
};

namespace detail {

// Decodes %XX escapes (path_is_safe has already refused malformed and dangerous ones).
inline std::string percent_decode(std::string_view s) {
  auto hex = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The name, relative to the root, that request path `path` ("/a/b") asks for; or the status refusing it.
inline int file_name(std::string_view path, std::string& name) {
  if (path == "/" || !uring::http::path_is_safe(path)) return 404;
  name = percent_decode(path.substr(1));
  if (name.size() > max_path) return 414;
  for (std::size_t at = 0; at != std::string::npos;) {
    if (name[at] == '.') return 404;  // a dotfile or dot-directory
    at = name.find('/', at);
    if (at != std::string::npos) ++at;
  }
  return 200;
}

}  // namespace detail

class file_root {
 public:
  // Opens `dir` (O_PATH): the root every request is resolved beneath. Throws std::system_error.
  file_root(const std::string& dir, resolve_kind how) : how_(how) {
    int fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::system_category(), "open " + dir);
    fd_.reset(fd);
  }

  // The regular file request path `path` names beneath the root (see the rules above).
  [[nodiscard]] uring::task<opened_file> open(std::string_view path) const {
    std::string name;
    opened_file f;
    f.status = detail::file_name(path, name);
    if (f.status != 200) co_return f;
    f.status = 404;
    int fd = how_ == resolve_kind::walk ? -EAGAIN : open_cached(name);
    if (fd == -EAGAIN || fd == -ENOSYS || fd == -EINVAL || fd == -EPERM) fd = co_await walk(name);
    if (fd < 0) co_return f;
    uring::owned_fd file(fd);
    struct ::statx st {};
    uring::io_result r = co_await uring::statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE, st).nothrow();
    if (!r || !S_ISREG(st.stx_mode)) co_return f;
    // Opened O_NONBLOCK (so a FIFO never waits for a writer); reads of the file wait as usual.
    if (::fcntl(fd, F_SETFL, 0) != 0) co_return f;
    f = {.status = 200, .fd = file.release(), .size = st.stx_size};
    co_return f;
  }

 private:
  static constexpr int file_flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

  // openat2 beneath the root from the kernel's caches only: the fd, or -errno (-EAGAIN: not all cached).
  [[nodiscard]] int open_cached(const std::string& name) const noexcept {
    open_how how{};
    how.flags = file_flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_CACHED;
    long fd = ::syscall(SYS_openat2, fd_.get(), name.c_str(), &how, sizeof how);
    return fd >= 0 ? static_cast<int>(fd) : -errno;
  }

  // The same resolution, one component at a time through the ring: the fd, or -errno.
  [[nodiscard]] uring::task<int> walk(const std::string& name) const {
    uring::owned_fd dir;  // the directory reached so far; empty: the root
    std::size_t at = 0;
    for (;;) {
      std::size_t slash = name.find('/', at);
      const bool last = slash == std::string::npos;
      std::string component = name.substr(at, last ? std::string::npos : slash - at);
      int flags = last ? file_flags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
      int from = dir ? dir.get() : fd_.get();
      uring::io_result r = co_await uring::open_at(from, std::move(component), flags).nothrow();
      if (!r || last) co_return r.res;
      dir.reset(r.res);
      at = slash + 1;
    }
  }

  resolve_kind how_;
  uring::owned_fd fd_;
};

}  // namespace sample
