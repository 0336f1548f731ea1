// samples/kv/config.cpp — CONFIG GET, SET and RESETSTAT of uring-kv's parameters, with Redis 7.0's replies.
#include <uring/resp/parser.hpp>

#include <algorithm>
#include <climits>
#include <optional>

#include "commands.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;

// The parameters CONFIG GET knows, listed in this order (Redis lists several in its hash table's order,
// which varies by process). save and appendonly are fixed (nothing persists): redis-benchmark reads them at
// start. The input limits are settable.
struct parameter {
  std::string_view name;
  std::atomic<std::uint64_t> server::*setting;  // null: fixed
  std::string_view fixed;
};
constexpr parameter parameters[] = {
    {"appendonly", nullptr, "no"},
    {"save", nullptr, ""},
    {"client-query-buffer-limit", &server::query_buffer_limit, {}},
    {"proto-max-bulk-len", &server::proto_max_bulk_len, {}},
};

const parameter* find_parameter(std::string_view name) noexcept {
  for (const parameter& p : parameters) {
    if (p.name.size() == name.size() && lower(name) == p.name) return &p;
  }
  return nullptr;
}

void config_get(context& c) {
  std::vector<std::pair<std::string_view, std::string>> pairs;
  for (const parameter& p : parameters) {
    for (std::size_t i = 2; i < c.args.size(); ++i) {
      // A name is answered as it was asked (its case kept), a pattern (matched without case) with the
      // parameter's name, as Redis does.
      bool pattern = c.args[i].find_first_of("[*?") != std::string_view::npos;
      if (pattern ? matches(lower(c.args[i]), p.name) : find_parameter(c.args[i]) == &p) {
        pairs.emplace_back(pattern ? p.name : c.args[i], p.setting == nullptr
                                                             ? std::string(p.fixed)
                                                             : std::to_string((c.srv.*p.setting).load()));
        break;
      }
    }
  }
  c.out.map_header(pairs.size());
  for (const auto& [name, value] : pairs) {
    resp::append_bulk_string(text(c), name);
    resp::append_bulk_string(text(c), value);
  }
}

// A value Redis accepts for the fixed parameter `p` (appendonly: yes or no; save: pairs of non-negative
// integers, or empty), its error text otherwise.
std::optional<std::string_view> fixed_value_error(const parameter& p, std::string_view v) {
  if (p.name == "appendonly") {
    if (iequals(v, "YES") || iequals(v, "NO")) return std::nullopt;
    return "argument must be 'yes' or 'no'";
  }
  std::size_t words = 0;
  bool digits = true;
  for (std::size_t at = v.find_first_not_of(' '); at != std::string_view::npos; ++words) {
    std::size_t end = std::min(v.find(' ', at), v.size());
    digits &= v.substr(at, end - at).find_first_not_of("0123456789") == std::string_view::npos;
    at = v.find_first_not_of(' ', end);
  }
  bool valid = v.empty() || (words > 0 && words % 2 == 0 && digits);
  return valid ? std::nullopt : std::optional<std::string_view>("Invalid save parameters");
}

// All or nothing, as Redis: an unknown name is reported first, then a repeated one (as it was typed), then
// a value (under the parameter's own name); nothing is set unless all pass. save and appendonly take their
// fixed values only (nothing persists), and refuse others as Redis refuses an immutable parameter.
void config_set(context& c) {
  if (c.args.size() % 2 != 0) return resp::append_error(text(c), "ERR syntax error");
  for (std::size_t i = 2; i < c.args.size(); i += 2) {
    if (find_parameter(c.args[i]) == nullptr) {
      return resp::append_error(text(c), "ERR Unknown option or number of arguments for CONFIG SET - '" +
                                             std::string(c.args[i]) + "'");
    }
  }
  auto failed = [&c](std::string_view name, std::string_view why) {
    resp::append_error(text(c), "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) +
                                    "') - " + std::string(why));
  };
  for (std::size_t i = 4; i < c.args.size(); i += 2) {
    for (std::size_t j = 2; j < i; j += 2) {
      if (find_parameter(c.args[j]) == find_parameter(c.args[i]))
        return failed(c.args[i], "duplicate parameter");
    }
  }
  std::vector<std::pair<const parameter*, std::uint64_t>> changes;
  for (std::size_t i = 2; i < c.args.size(); i += 2) {
    const parameter* p = find_parameter(c.args[i]);
    std::string_view v = c.args[i + 1];
    if (p->setting == nullptr) {
      if (auto why = fixed_value_error(*p, v)) return failed(p->name, *why);
      if (lower(v) != p->fixed) return failed(c.args[i], "can't set immutable config");
      continue;
    }
    auto bytes = parse_memory(v);
    if (!bytes) return failed(p->name, "argument must be a memory value");
    if (*bytes < min_input_limit || *bytes > static_cast<std::uint64_t>(LLONG_MAX)) {
      return failed(p->name, "argument must be between " + std::to_string(min_input_limit) + " and " +
                                 std::to_string(LLONG_MAX) + " inclusive");
    }
    changes.emplace_back(p, *bytes);
  }
  for (const auto& [p, bytes] : changes) (c.srv.*p->setting).store(bytes);
  resp::append_simple_string(text(c), "OK");
}

// CONFIG RESETSTAT: INFO's counters start again from zero, on every executor (each on its own thread).
uring::task<void> config_resetstat(context& c) {
  for (std::size_t i = 0; i < c.srv.count(); ++i) {
    co_await on_executor(c.srv, c.me, i, [&srv = c.srv, i] {
      shard& s = *srv.shards[i];
      for (keyspace& ks : s.db) ks.expired_keys = ks.hits = ks.misses = 0;
      s.keyed_commands = s.forwarded_commands = s.hops = 0;
      client_registry& r = *srv.clients[i];
      r.connections_received = r.commands_processed = 0;
    });
  }
  resp::append_simple_string(text(c), "OK");
}

}  // namespace

std::optional<std::uint64_t> parse_memory(std::string_view s) noexcept {
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  const std::string unit = lower(s.substr(digits));
  std::uint64_t scale = 0;
  for (auto [name, factor] : {std::pair<std::string_view, std::uint64_t>{"", 1},
                              {"b", 1},
                              {"k", 1000},
                              {"kb", 1024},
                              {"m", 1000 * 1000},
                              {"mb", 1024 * 1024},
                              {"g", 1000 * 1000 * 1000},
                              {"gb", 1024 * 1024 * 1024}}) {
    if (unit == name) scale = factor;
  }
  if (digits == 0 || scale == 0) return std::nullopt;
  std::uint64_t n = 0;
  for (char ch : s.substr(0, digits)) {
    if (n > (UINT64_MAX - 9) / 10) return UINT64_MAX;  // out of any range, as strtoull's ERANGE
    n = n * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (n > UINT64_MAX / scale) return UINT64_MAX;
  return n * scale;
}

// Each subcommand's arity is the command table's, which execute checks first.
uring::task<void> cmd_config(context& c) {
  for (std::string_view sub : {"GET", "SET", "RESETSTAT"}) {
    if (c.ses.exec_count < 0 && iequals(c.args[1], sub)) c.ses.info.sub = sub;
  }
  if (iequals(c.args[1], "GET")) co_return config_get(c);
  if (iequals(c.args[1], "SET")) co_return config_set(c);
  if (iequals(c.args[1], "RESETSTAT")) co_return co_await config_resetstat(c);
  if (iequals(c.args[1], "REWRITE")) {
    co_return resp::append_error(text(c), "ERR CONFIG rewrite is not supported by uring-kv");
  }
  resp::append_error(
      text(c), "ERR unknown subcommand '" + std::string(c.args[1].substr(0, 128)) + "'. Try CONFIG HELP.");
}

}  // namespace kv
