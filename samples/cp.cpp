// uring-cp: copies a file or a directory tree, with registered buffers, chains of write + fsync, and a
// progress line from a ticker.
//
//   uring-cp [--jobs 8] [--buffer-size 1048576] [--sync] [--progress] [--backend auto|native|emulated]
//            SOURCE DEST
//
// DEST must not exist (as `cp -r SOURCE DEST` into a new name). Regular files, directories and symbolic
// links are copied (links as links, never followed), with their permission bits; any other kind of file
// stops the copy with a message. --jobs files are copied at once, each through one registered buffer of
// --buffer-size bytes: that (jobs x size) is the copy's pinned memory, counted against RLIMIT_MEMLOCK.
// --sync makes each file durable: its last write and an fsync go to the kernel as one chain. The tree is
// listed before the copy starts (one entry per file: the only memory that grows with the tree).
// Exit status: 0 copied, 1 a failure (the message names the path and the call), 2 a usage error.
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <uring/uring.hpp>

#include "server_setup.hpp"

namespace {

namespace fs = std::filesystem;
using uring::task;

struct options {
  std::size_t jobs = 8;
  std::size_t buffer_size = 1 << 20;
  bool sync = false;
  bool progress = false;
  uring::backend_kind backend = uring::backend_kind::automatic;
  std::string source, dest;
};

struct entry {
  std::string from, to;
  fs::file_type type;
  mode_t mode;
  std::uint64_t size;
};

struct progress_counts {
  std::uint64_t bytes = 0, total_bytes = 0;
  std::size_t files = 0, total_files = 0;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "uring-cp: %s\n"
               "usage: uring-cp [--jobs N] [--buffer-size BYTES] [--sync] [--progress]\n"
               "                [--backend auto|native|emulated] SOURCE DEST\n"
               "  --jobs N            files copied at once, 1..256 (default 8)\n"
               "  --buffer-size BYTES each job's registered buffer, 4096..16777216 (default 1048576);\n"
               "                      jobs x size bytes are pinned (RLIMIT_MEMLOCK)\n"
               "  --sync              each file's last write and its fsync as one chain\n"
               "  --progress          a progress line on stderr every 200 ms\n"
               "DEST must not exist. Files, directories and symbolic links (not followed) are copied.\n",
               why);
  std::exit(2);
}

std::size_t number(std::string_view text, std::size_t lo, std::size_t hi, const char* what) {
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) usage(what);
  return v;
}

options parse(int argc, char** argv) {
  options o;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage("a value is missing");
      return std::string_view(argv[++i]);
    };
    if (a == "--jobs") {
      o.jobs = number(value(), 1, 256, "--jobs takes 1..256");
    } else if (a == "--buffer-size") {
      o.buffer_size = number(value(), 4096, 16 << 20, "--buffer-size takes 4096..16777216");
    } else if (a == "--sync") {
      o.sync = true;
    } else if (a == "--progress") {
      o.progress = true;
    } else if (a == "--backend") {
      if (!samples::parse_backend(value(), o.backend)) usage("--backend takes auto, native or emulated");
    } else if (a == "--help" || a == "-h") {
      usage("copies a file or a directory tree");
    } else if (a.starts_with("--")) {
      usage("unknown option");
    } else {
      paths.emplace_back(a);
    }
  }
  if (paths.size() != 2) usage("SOURCE and DEST are needed");
  o.source = paths[0];
  o.dest = paths[1];
  return o;
}

// Everything to copy, parents before children. Throws for a kind of file it cannot copy.
std::vector<entry> list_tree(const options& o) {
  std::vector<entry> out;
  auto add = [&](const fs::path& from, const fs::path& to) {
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0)
      throw std::system_error(errno, std::system_category(), "lstat " + from.string());
    fs::file_type type = S_ISREG(st.st_mode)   ? fs::file_type::regular
                         : S_ISDIR(st.st_mode) ? fs::file_type::directory
                         : S_ISLNK(st.st_mode) ? fs::file_type::symlink
                                               : fs::file_type::unknown;
    if (type == fs::file_type::unknown)
      throw std::runtime_error(from.string() + ": not a file, directory or link");
    out.push_back({from.string(), to.string(), type, static_cast<mode_t>(st.st_mode & 07777),
                   static_cast<std::uint64_t>(st.st_size)});
  };
  const fs::path root(o.source);
  add(root, o.dest);
  if (out.back().type == fs::file_type::directory) {
    for (const auto& e : fs::recursive_directory_iterator(root, fs::directory_options::none)) {
      add(e.path(),
          fs::path(o.dest) / e.path().lexically_relative(root));  // not relative(): it follows links
    }
  }
  return out;
}

// What a failed call says, with the path it was about.
[[noreturn]] void fail_on(const std::string& path, const std::system_error& e) {
  throw std::system_error(e.code(),
                          std::string(e.what()).substr(0, std::string(e.what()).find(':')) + " " + path);
}

task<void> copy_file(const entry& e, uring::fixed_buffer& buf, bool sync, progress_counts& counts) {
  try {
    const int in = co_await uring::open(e.from, O_RDONLY | O_CLOEXEC);
    uring::owned_fd in_fd(in);
    const int out = co_await uring::open(e.to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, e.mode);
    uring::owned_fd out_fd(out);
    if (::fchmod(out, e.mode) != 0)
      throw std::system_error(errno, std::system_category(), "fchmod");  // not the umask's
    std::uint64_t at = 0;
    bool synced = false;
    for (;;) {
      const std::size_t n = co_await uring::read_fixed(in, buf, at);
      if (n == 0) break;
      const auto chunk = buf.slice(0, n);
      if (sync && at + n >= e.size) {
        // The last write and its fsync: linked, one submit (a short write cancels the fsync: it throws).
        co_await uring::chain(uring::write_fixed(out, chunk, at), uring::fsync(out));
        synced = true;
      } else {
        const std::size_t wrote = co_await uring::write_fixed(out, chunk, at);
        if (wrote != n) throw std::system_error(EIO, std::system_category(), "write_fixed (short)");
      }
      at += n;
      counts.bytes += n;
    }
    if (sync && !synced) co_await uring::fsync(out);  // empty, or it grew since it was listed
    ++counts.files;
  } catch (const std::system_error& err) {
    fail_on(e.from, err);
  }
}

// One job: takes the next file until none is left, through its own registered buffer.
task<void> job(const std::vector<const entry*>& files, std::size_t& next, uring::fixed_buffers& bufs,
               bool sync, progress_counts& counts) {
  uring::fixed_buffer buf = co_await bufs.lease();
  while (next < files.size()) co_await copy_file(*files[next++], buf, sync, counts);
}

task<void> copy_tree(const options& o, const std::vector<entry>& tree, progress_counts& counts) {
  std::vector<const entry*> files;
  for (const entry& e : tree) {
    try {
      if (e.type == fs::file_type::directory) {
        co_await uring::mkdir(e.to, e.mode | S_IRWXU);  // writable for us while we fill it
      } else if (e.type == fs::file_type::symlink) {
        co_await uring::symlink(fs::read_symlink(e.from).string(), e.to);
      } else {
        files.push_back(&e);
      }
    } catch (const std::system_error& err) {
      fail_on(e.to, err);
    }
  }
  if (!files.empty()) {
    const std::size_t jobs = std::min(o.jobs, files.size());
    uring::fixed_buffers bufs = co_await uring::register_buffers(jobs, o.buffer_size);
    std::size_t next = 0;
    std::vector<task<void>> workers;
    for (std::size_t i = 0; i < jobs; ++i) workers.push_back(job(files, next, bufs, o.sync, counts));
    co_await uring::when_all(std::move(workers));
  }
  // Directories get their own modes last, once nothing more is written into them.
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) {
    if (it->type == fs::file_type::directory) ::chmod(it->to.c_str(), it->mode);
  }
}

void print_progress(const progress_counts& c, const char* end) {
  std::fprintf(stderr, "\ruring-cp: %llu of %llu bytes, %zu of %zu files%s",
               static_cast<unsigned long long>(c.bytes), static_cast<unsigned long long>(c.total_bytes),
               c.files, c.total_files, end);
}

// Prints the counts every 200 ms until it is stopped (the copy is done).
task<void> report(const progress_counts& counts) {
  uring::ticker every(std::chrono::milliseconds(200));
  try {
    for (;;) {
      co_await every.next();
      print_progress(counts, "");
    }
  } catch (const std::system_error&) {
    // ECANCELED: the copy is over.
  }
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  try {
    if (fs::exists(fs::symlink_status(o.dest))) throw std::runtime_error(o.dest + ": exists");
    const std::vector<entry> tree = list_tree(o);
    progress_counts counts;
    for (const entry& e : tree) {
      if (e.type == fs::file_type::regular) {
        counts.total_bytes += e.size;
        ++counts.total_files;
      }
    }
    uring::executor_options eo;
    eo.backend = o.backend;
    uring::executor ex(eo);
    ex.run([](const options& o, const std::vector<entry>& tree, progress_counts& counts) -> task<void> {
      if (o.progress) {
        co_await uring::when_any(copy_tree(o, tree, counts), report(counts));
        print_progress(counts, "\n");
      } else {
        co_await copy_tree(o, tree, counts);
      }
    }(o, tree, counts));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uring-cp: %s\n", e.what());
    return 1;
  }
  return 0;
}
