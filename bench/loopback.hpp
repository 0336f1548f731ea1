// loopback.hpp — the peer of the bulk-send benchmarks: a connected loopback TCP pair, and a plain thread
// that drains one end of it.
#pragma once

#include <thread>
#include <utility>

namespace uring::bench {

// A connected loopback TCP pair: the sender's fd and the reader's. Throws std::runtime_error.
std::pair<int, int> tcp_pair();

// A thread that reads `fd` into 1 MiB until end of stream, throws the bytes away, then closes it.
std::thread drain(int fd);

}  // namespace uring::bench
