// samples/kv/local.cpp — uring-kv's commands answered without the keyspace: connection, server and client
// commands, with Redis 7.0's replies.
#include <uring/resp/parser.hpp>

#include <chrono>

#include "commands.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;

void unknown_subcommand(context& c, std::string_view command) {
  std::string_view sub = c.args[1];
  resp::append_error(text(c), "ERR unknown subcommand '" + std::string(sub.substr(0, 128)) + "'. Try " +
                                  std::string(command) + " HELP.");
}

void subcommand_arity(context& c) {
  resp::append_error(text(c), "ERR wrong number of arguments for '" + lower(c.args[0]) + "|" +
                                  lower(c.args[1]) + "' command");
}

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

// redis-cli asks for COMMAND DOCS at start (interactive): an empty answer means "no hints".
void cmd_command(context& c) {
  if (c.args.size() == 2 && iequals(c.args[1], "COUNT")) {
    return resp::append_integer(text(c), static_cast<std::int64_t>(command_count()));
  }
  resp::append_array_header(text(c), 0);
}

// CONFIG GET: redis-benchmark reads "save" and "appendonly" at start: answered as a server that persists
// nothing (in Redis's order for the two). Nothing else is configurable.
void cmd_config(context& c) {
  if (!iequals(c.args[1], "GET")) {
    if (iequals(c.args[1], "SET") || iequals(c.args[1], "RESETSTAT") || iequals(c.args[1], "REWRITE")) {
      return resp::append_error(text(c), "ERR CONFIG " + lower(c.args[1]) + " is not supported by uring-kv");
    }
    return unknown_subcommand(c, "CONFIG");
  }
  if (c.args.size() < 3) return subcommand_arity(c);
  if (c.ses.exec_count < 0) c.ses.info.sub = "GET";
  std::vector<std::string_view> pairs;
  for (std::string_view name : {"appendonly", "save"}) {
    for (std::size_t i = 2; i < c.args.size(); ++i) {
      if (iequals(c.args[i], name == "save" ? "SAVE" : "APPENDONLY") || c.args[i] == "*") {
        pairs.push_back(name);
        pairs.push_back(name == "save" ? "" : "no");
        break;
      }
    }
  }
  c.out.map_header(pairs.size() / 2);
  for (std::string_view s : pairs) resp::append_bulk_string(text(c), s);
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
