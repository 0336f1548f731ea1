// send_file (file -> pipe -> socket by splice), on every backend: byte-exact, a range that stops at the end
// of the file, no SIGPIPE from a peer that is gone, errors that name the operation.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>

#include <uring/uring.hpp>

#include "backends.hpp"
#include "net_util.hpp"
#include "test_util.hpp"

namespace {

using namespace uring::test;  // NOLINT: the shared test helpers
using namespace uring::net;   // NOLINT
using uring::task;

class SendFile : public uring::test::backend_test {};

// A temporary file holding `content`.
unique_fd file_with(const std::string& content) {
  unique_fd f = temp_file();
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::pwrite(f.get(), content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n <= 0) throw std::system_error(errno, std::system_category(), "pwrite");
    done += static_cast<std::size_t>(n);
  }
  return f;
}

task<std::size_t> send_file_and_end(const tcp_stream* s, int file, std::uint64_t offset, std::size_t len) {
  std::size_t n = co_await s->send_file(file, offset, len);
  co_await s->shutdown(SHUT_WR);
  co_return n;
}

TEST_P(SendFile, AMultiMegabyteFileArrivesByteExact) {
  const std::string content = pattern((6 << 20) + 12345, 11);
  unique_fd file = file_with(content);
  auto listener = tcp_listener::bind(address::parse("127.0.0.1:0"));
  const long baseline = open_fd_count();
  struct result {
    std::size_t sent;
    std::string got;
  };
  auto r = run([](const tcp_listener& l, int f, std::size_t size) -> task<result> {
    tcp_stream client = co_await tcp_stream::connect_to(l.local_address());
    tcp_stream server = co_await l.accept();
    auto [sent, got] = co_await uring::when_all(send_file_and_end(&server, f, 0, size), read_to_end(&client));
    co_return result{sent, std::move(got)};
  }(listener, file.get(), content.size()));
  EXPECT_EQ(r.sent, content.size());
  EXPECT_EQ(r.got.size(), content.size());
  EXPECT_TRUE(r.got == content) << "bytes differ";
  EXPECT_EQ(open_fd_count(), baseline);  // its pipe is closed
  EXPECT_EQ(::lseek(file.get(), 0, SEEK_CUR), 0) << "send_file moved the file's position";
}

// A peer that is gone: send_file fails (EPIPE or ECONNRESET) and raises no SIGPIPE, on every backend (the
// process's default action for SIGPIPE, left in place here, would end the test).
TEST_P(SendFile, APeerThatIsGoneFailsWithoutSigpipe) {
  const std::string content = pattern(1 << 20, 5);
  unique_fd file = file_with(content);
  stream_pair pair;
  pair.peer.reset();
  const int err = run([](const tcp_stream& s, int f) -> task<int> {
    try {
      for (int i = 0; i < 64; ++i) co_await s.send_file(f, 0, 1 << 20);
    } catch (const std::system_error& e) {
      co_return e.code().value();
    }
    co_return 0;
  }(pair.ours, file.get()));
  EXPECT_TRUE(err == EPIPE || err == ECONNRESET) << "send_file to a closed peer: " << std::strerror(err);
}

// A range from an offset, and a length past the end of the file: what there is, and the count says so.
TEST_P(SendFile, SendsARangeAndStopsAtTheEndOfTheFile) {
  const std::string content = pattern(300000, 2);
  unique_fd file = file_with(content);
  stream_pair pair;
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = ::read(pair.peer.get(), buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<std::size_t>(n));
  });
  auto sent = run([](tcp_stream s, int f) -> task<std::array<std::size_t, 2>> {
    std::size_t a = co_await s.send_file(f, 1000, 5000);
    std::size_t b = co_await s.send_file(f, 250000, 1 << 20);  // 50000 bytes are left
    co_return std::array<std::size_t, 2>{a, b};
  }(std::move(pair.ours), file.get()));
  reader.join();
  EXPECT_EQ(sent[0], 5000u);
  EXPECT_EQ(sent[1], 50000u);
  EXPECT_TRUE(got == content.substr(1000, 5000) + content.substr(250000)) << got.size() << " bytes";
}

TEST_P(SendFile, ABadFileNamesTheOperation) {
  stream_pair pair;
  std::string what;
  run([](tcp_stream& s, std::string& what) -> task<void> {
    try {
      (void)co_await s.send_file(-1, 0, 100);
    } catch (const std::system_error& e) {
      what = e.what();
    }
  }(pair.ours, what));
  EXPECT_EQ(what.rfind("send_file: ", 0), 0u) << what;
}

INSTANTIATE_BACKENDS(SendFile);

}  // namespace
