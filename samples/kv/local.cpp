// samples/kv/local.cpp — uring-kv's commands answered without the keyspace: connection, server and client
// commands, with Redis 7.0's replies.
#include <uring/resp/parser.hpp>

#include <chrono>

#include "commands.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;

}  // namespace

void cmd_ping(context& c) {
  if (c.args.size() > 2) {
    return resp::append_error(text(c), "ERR wrong number of arguments for 'ping' command");
  }
  if (c.args.size() == 2) return resp::append_bulk_string(text(c), c.args[1]);
  resp::append_simple_string(text(c), "PONG");
}

void cmd_echo(context& c) { resp::append_bulk_string(text(c), c.args[1]); }

void cmd_quit(context& c) {
  resp::append_simple_string(text(c), "OK");
  c.close = true;
}

void cmd_select(context& c) {
  auto n = parse_int(c.args[1]);
  if (!n || *n < INT32_MIN || *n > INT32_MAX) return resp::append_error(text(c), not_integer);
  if (*n < 0 || *n >= databases) return resp::append_error(text(c), "ERR DB index is out of range");
  c.ses.db = static_cast<int>(*n);
  resp::append_simple_string(text(c), "OK");
}

// TIME: Unix seconds and microseconds, as bulk strings.
void cmd_time(context& c) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  std::string s = std::to_string(us / 1'000'000), u = std::to_string(us % 1'000'000);
  std::string_view parts[] = {s, u};
  resp::append_bulk_array(text(c), parts);
}

}  // namespace kv
