// bench/live_allocs.cpp — preloaded by bench/idle_census.py: every live heap block, its size and the frames
// that allocated it. SIGUSR2 writes them, a line a block ("SIZE module+offset ..."), to $LIVE_ALLOCS_OUT
// (renamed into place when complete). Built by hand, not by CMake: it is a shared object for LD_PRELOAD,
// and glibc's __libc_* entry points let it wrap malloc without dlsym, which itself allocates.
//
// The table is a fixed open-addressed map (2^21 slots, reserved, touched as used): enough for the
// connections a census takes; a census that overflows it would hang, not lie.
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}

namespace {
constexpr int kFrames = 6;
struct entry {
  void* p;
  size_t size;
  void* at[kFrames];
};
constexpr size_t kSlots = size_t{1} << 21;
entry* table;
void* const kTomb = reinterpret_cast<void*>(1);
std::atomic_flag lock = ATOMIC_FLAG_INIT;
thread_local bool inside = false;  // backtrace() allocates on its first call: that block is not kept

size_t slot_of(void* p) { return (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >> (64 - 21); }

void init() {
  if (table != nullptr) return;
  table = static_cast<entry*>(mmap(nullptr, kSlots * sizeof(entry), PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
}

void note(void* p, size_t size) {
  if (p == nullptr || inside) return;
  inside = true;
  void* frames[kFrames + 2] = {};
  int n = backtrace(frames, kFrames + 2);
  while (lock.test_and_set(std::memory_order_acquire)) {
  }
  init();
  for (size_t i = slot_of(p);; i = (i + 1) & (kSlots - 1)) {
    if (table[i].p == nullptr || table[i].p == kTomb) {
      table[i].p = p;
      table[i].size = size;
      for (int f = 0; f < kFrames; ++f) table[i].at[f] = f + 2 < n ? frames[f + 2] : nullptr;
      break;
    }
  }
  lock.clear(std::memory_order_release);
  inside = false;
}

void forget(void* p) {
  if (p == nullptr) return;
  while (lock.test_and_set(std::memory_order_acquire)) {
  }
  if (table != nullptr) {
    for (size_t i = slot_of(p);; i = (i + 1) & (kSlots - 1)) {
      if (table[i].p == nullptr) break;
      if (table[i].p == p) {
        table[i].p = kTomb;
        break;
      }
    }
  }
  lock.clear(std::memory_order_release);
}

void dump(int) {
  const char* path = getenv("LIVE_ALLOCS_OUT");
  if (path == nullptr) path = "/tmp/live_allocs.txt";
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char line[1024];
  for (size_t i = 0; i < kSlots; ++i) {
    if (table == nullptr || table[i].p == nullptr || table[i].p == kTomb) continue;
    int len = snprintf(line, sizeof line, "%zu", table[i].size);
    for (int f = 0; f < kFrames; ++f) {
      Dl_info info{};
      void* a = table[i].at[f];
      if (a != nullptr && dladdr(a, &info) != 0) {
        len += snprintf(line + len, sizeof line - len, " %s+0x%lx", info.dli_fname,
                        static_cast<unsigned long>(reinterpret_cast<uintptr_t>(a) -
                                                   reinterpret_cast<uintptr_t>(info.dli_fbase) - 1));
      }
    }
    line[len++] = '\n';
    (void)!write(fd, line, len);
  }
  close(fd);
  rename(tmp, path);
}

struct setup {
  setup() { signal(SIGUSR2, dump); }
} the_setup;
}  // namespace

extern "C" {
void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  note(p, n);
  return p;
}
void* calloc(size_t a, size_t b) {
  void* p = __libc_calloc(a, b);
  note(p, a * b);
  return p;
}
void* realloc(void* old, size_t n) {
  forget(old);
  void* p = __libc_realloc(old, n);
  note(p, n);
  return p;
}
void free(void* p) {
  forget(p);
  __libc_free(p);
}
void* memalign(size_t al, size_t n) {
  void* p = __libc_memalign(al, n);
  note(p, n);
  return p;
}
void* aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
int posix_memalign(void** out, size_t al, size_t n) {
  *out = memalign(al, n);
  return *out != nullptr ? 0 : ENOMEM;
}
}
