// backend/emulated/direct_table.hpp — the ring's table of direct descriptors as the emulation keeps it.
//
// Provides: detail::emulated_direct_table.
// Threads: the emulated backend's owner thread.
//
// A slot holds an fd of the table's own (a dup, or an accepted socket), -1 when empty, and a new file goes
// in the lowest free slot, where the kernel's IORING_FILE_INDEX_ALLOC picks its own. An emptied slot's fd
// that operations still wait on is kept until the last of them is done, as the kernel keeps the file.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <unordered_set>
#include <utility>
#include <vector>

namespace uring::detail {

class emulated_direct_table {
 public:
  explicit emulated_direct_table(unsigned slots) : slots_(slots, -1) {}
  ~emulated_direct_table() {
    for (int fd : slots_) {
      if (fd >= 0) ::close(fd);
    }
    for (int fd : closing_) ::close(fd);
  }
  emulated_direct_table(const emulated_direct_table&) = delete;
  emulated_direct_table& operator=(const emulated_direct_table&) = delete;

  // The fd in slot `index`, or -1 (no such slot, or empty).
  [[nodiscard]] int lookup(int index) const noexcept {
    return index >= 0 && static_cast<std::size_t>(index) < slots_.size() ? slots_[index] : -1;
  }
  // `fd` becomes the table's own. Returns the slot; without room, closes fd and returns -ENFILE (the
  // kernel's answer, also for a missing table).
  int adopt(int fd) {
    auto slot = std::find(slots_.begin(), slots_.end(), -1);
    if (slot == slots_.end()) {
      ::close(fd);
      return -ENFILE;
    }
    *slot = fd;
    return static_cast<int>(slot - slots_.begin());
  }
  // install_direct: a slot holds a duplicate of the fd, so the caller's fd stays its own, as the kernel's
  // table holds its own reference to the file. The slot is written over `fd`; the result is the count
  // installed.
  int install(int& fd) {
    if (slots_.empty()) return -ENXIO;
    const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return -errno;
    const int slot = adopt(dup);
    if (slot < 0) return slot;
    fd = slot;
    return 1;
  }
  // Empties a slot; `in_use(fd)` says whether operations still wait on its fd (then it is closed by
  // released(fd) once they are done).
  template <class InUse>
  int empty(int index, InUse in_use) {
    if (lookup(index) < 0) return -EBADF;
    const int fd = std::exchange(slots_[index], -1);
    if (in_use(fd)) {
      closing_.insert(fd);
    } else {
      ::close(fd);
    }
    return 0;
  }
  // Whether `fd` is the file of an emptied slot that operations still wait on.
  [[nodiscard]] bool closing(int fd) const { return !closing_.empty() && closing_.count(fd) != 0; }
  // Nobody waits on `fd` any more: if it is the file of an emptied slot, it goes now.
  void released(int fd) {
    if (closing_.erase(fd) != 0) ::close(fd);
  }

 private:
  std::vector<int> slots_;
  std::unordered_set<int> closing_;  // fds of emptied slots that operations still wait on
};

}  // namespace uring::detail
