// samples/kv/clients.cpp — CLIENT and its subcommands with Redis 7.0's replies: ID, SETNAME, GETNAME, INFO,
// LIST, KILL, NO-EVICT; the registry of each executor's connections (clients.hpp) behind LIST and KILL.
#include <sys/socket.h>

#include <uring/net/address.hpp>
#include <uring/resp/parser.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "commands.hpp"

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

// The subcommands uring-kv runs. Their arity is the command table's, which execute checks first.
constexpr std::array<std::string_view, 7> subcommands{"ID",      "INFO",    "LIST",    "KILL",
                                                      "SETNAME", "GETNAME", "NO-EVICT"};

void set_name(context& c, std::string_view name) {
  c.ses.name = name;
  resp::append_simple_string(text(c), "OK");
}

// Redis's CLIENT LIST TYPE names: every uring-kv client is a "normal" one.
std::optional<bool> is_normal_type(std::string_view type) {
  if (iequals(type, "NORMAL")) return true;
  if (iequals(type, "MASTER") || iequals(type, "REPLICA") || iequals(type, "SLAVE") ||
      iequals(type, "PUBSUB"))
    return false;
  return std::nullopt;
}

// The lines of the connections `pick` selects over every executor, each visited once; at most
// max_client_list of them, by id.
template <class Pick>
task<std::vector<std::pair<std::int64_t, std::string>>> gather(context& c, Pick pick) {
  std::vector<std::pair<std::int64_t, std::string>> lines;
  for (std::size_t i = 0; i < c.srv.count(); ++i) {
    co_await on_executor(c.srv, c.me, i, [&c, &lines, &pick, i] {
      std::int64_t now = clock_ms();
      std::size_t taken = 0;
      for (const session* ses = c.srv.clients[i]->first; ses != nullptr; ses = ses->next) {
        if (taken == max_client_list) break;
        if (!pick(ses->id)) continue;
        std::string line;
        client_line(*ses, now, line);
        lines.emplace_back(ses->id, std::move(line));
        ++taken;
      }
    });
  }
  std::sort(lines.begin(), lines.end());
  if (lines.size() > max_client_list) lines.resize(max_client_list);
  co_return lines;
}

task<void> client_list(context& c) {
  args_t a = c.args;
  bool all = true;
  std::vector<std::int64_t> ids;
  if (a.size() == 4 && iequals(a[2], "TYPE")) {
    auto normal = is_normal_type(a[3]);
    if (!normal) {
      co_return resp::append_error(text(c), "ERR Unknown client type '" + std::string(a[3]) + "'");
    }
    all = *normal;
  } else if (a.size() > 3 && iequals(a[2], "ID")) {
    for (std::string_view s : a.subspan(3)) {
      auto id = parse_int(s);
      if (!id) co_return resp::append_error(text(c), "ERR Invalid client ID");
      ids.push_back(*id);
    }
  } else if (a.size() != 2) {
    co_return resp::append_error(text(c), syntax_error);
  }
  std::string out;
  if (ids.empty()) {
    if (all) {
      for (auto& [id, line] : co_await gather(c, [](std::int64_t) { return true; })) out += line + "\n";
    }
  } else {
    std::vector<std::int64_t> sorted = ids;  // up to 1022 ids, looked up for each client
    std::sort(sorted.begin(), sorted.end());
    auto lines = co_await gather(
        c, [&sorted](std::int64_t id) { return std::binary_search(sorted.begin(), sorted.end(), id); });
    for (std::int64_t id : ids) {  // in the order asked, as Redis
      auto it = std::lower_bound(lines.begin(), lines.end(), std::pair<std::int64_t, std::string>{id, ""});
      if (it != lines.end() && it->first == id) out += it->second + "\n";
    }
  }
  c.out.verbatim(out);
}

// CLIENT KILL addr | CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [TYPE t] [USER u] [SKIPME yes|no].
task<void> client_kill(context& c) {
  args_t a = c.args;
  std::int64_t id = 0;
  std::string_view addr, laddr;
  bool skipme = true, none = false;
  if (a.size() == 3) {
    addr = a[2];
    skipme = false;  // the old form may kill the caller
  } else if (a.size() % 2 == 0) {
    for (std::size_t i = 2; i < a.size(); i += 2) {
      std::string_view opt = a[i], v = a[i + 1];
      if (iequals(opt, "ID")) {
        auto n = parse_int(v);
        if (!n || *n < 1) co_return resp::append_error(text(c), "ERR client-id should be greater than 0");
        id = *n;
      } else if (iequals(opt, "TYPE")) {
        auto normal = is_normal_type(v);
        if (!normal)
          co_return resp::append_error(text(c), "ERR Unknown client type '" + std::string(v) + "'");
        none |= !*normal;
      } else if (iequals(opt, "ADDR")) {
        addr = v;
      } else if (iequals(opt, "LADDR")) {
        laddr = v;
      } else if (iequals(opt, "USER")) {
        if (v != "default")
          co_return resp::append_error(text(c), "ERR No such user '" + std::string(v) + "'");
      } else if (iequals(opt, "SKIPME") && (iequals(v, "YES") || iequals(v, "NO"))) {
        skipme = iequals(v, "YES");
      } else {
        co_return resp::append_error(text(c), syntax_error);
      }
    }
  } else {
    co_return resp::append_error(text(c), syntax_error);
  }
  std::int64_t killed = 0;
  bool self = false;
  for (std::size_t i = 0; i < c.srv.count() && !none; ++i) {
    co_await on_executor(c.srv, c.me, i, [&, i] {
      auto kill = [&](session* s) {
        if ((!addr.empty() && s->info.addr != addr) || (!laddr.empty() && local_address(s->info.fd) != laddr))
          return;
        if (s == &c.ses) {
          if (skipme) return;
          self = true;
        } else if (!s->info.killed) {
          // Its pending read ends at once (or its write fails): its coroutine sees `killed` and closes.
          s->info.killed = true;
          ::shutdown(s->info.fd, SHUT_RDWR);
        }
        ++killed;
      };
      const client_registry& r = *c.srv.clients[i];
      if (id != 0) {
        if (session* s = r.find(id)) kill(s);
      } else {
        for (session* s = r.first; s != nullptr; s = s->next) kill(s);
      }
    });
  }
  if (a.size() == 3) {
    if (killed == 0) co_return resp::append_error(text(c), "ERR No such client");
    resp::append_simple_string(text(c), "OK");
  } else {
    resp::append_integer(text(c), killed);
  }
  if (self) c.close = true;  // after the reply, as Redis
}

}  // namespace

std::string local_address(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return {};
  return uring::net::address::from_native(reinterpret_cast<const sockaddr*>(&local), len).to_string();
}

void client_registry::add(session& s) noexcept {
  s.prev = last;
  s.next = nullptr;
  (last != nullptr ? last->next : first) = &s;
  last = &s;
  ++size;
}

void client_registry::remove(session& s) noexcept {
  (s.prev != nullptr ? s.prev->next : first) = s.next;
  (s.next != nullptr ? s.next->prev : last) = s.prev;
  s.prev = s.next = nullptr;
  --size;
}

session* client_registry::find(std::int64_t id) const noexcept {
  for (session* s = first; s != nullptr && s->id <= id; s = s->next) {
    if (s->id == id) return s;
  }
  return nullptr;
}

void client_line(const session& ses, std::int64_t now, std::string& out) {
  const client_info& i = ses.info;
  auto field = [&out](std::string_view name, const auto& value) {
    if (!out.empty()) out += ' ';
    out.append(name).append("=");
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>) {
      out += std::to_string(value);
    } else {
      out += value;
    }
  };
  std::string flags;
  bool multi = ses.tx.active || ses.exec_count >= 0;  // EXEC keeps the flag while it runs, as Redis
  if (multi) flags += 'x';
  if (i.no_evict) flags += 'e';
  if (flags.empty()) flags = "N";
  std::string cmd = i.cmd.empty() ? "NULL" : lower(i.cmd);
  if (!i.sub.empty()) cmd += "|" + lower(i.sub);
  field("id", ses.id);
  field("addr", i.addr);
  field("laddr", local_address(i.fd));
  field("fd", i.fd);
  field("name", ses.name);
  field("age", (now - i.created_ms) / 1000);
  field("idle", (now - i.last_ms) / 1000);
  field("flags", flags);
  field("db", ses.db);
  for (std::string_view zero : {"sub", "psub", "ssub"}) field(zero, 0);
  field("multi", ses.tx.active ? static_cast<std::int64_t>(ses.tx.queued()) : multi ? ses.exec_count : -1);
  // Buffers and memory: uring-kv does not account them per client.
  for (std::string_view zero : {"qbuf", "qbuf-free", "argv-mem"}) field(zero, 0);
  field("multi-mem", ses.tx.queued_bytes());
  for (std::string_view zero : {"rbs", "rbp", "obl", "oll", "omem", "tot-mem"}) field(zero, 0);
  field("events", std::string_view("r"));
  field("cmd", cmd);
  field("user", std::string_view("default"));
  field("redir", -1);
  field("resp", ses.proto);
}

task<void> cmd_client(context& c) {
  std::string_view sub = c.args[1];
  auto known = std::find_if(subcommands.begin(), subcommands.end(),
                            [sub](std::string_view s) { return iequals(sub, s); });
  if (known == subcommands.end()) {
    co_return resp::append_error(
        text(c), "ERR unknown subcommand '" + std::string(sub.substr(0, 128)) + "'. Try CLIENT HELP.");
  }
  if (c.ses.exec_count < 0) c.ses.info.sub = *known;
  if (*known == "SETNAME") {
    if (c.args[2].size() > max_client_name) {
      co_return resp::append_error(text(c), "ERR Client names are limited to " +
                                                std::to_string(max_client_name) + " bytes in uring-kv");
    }
    for (char ch : c.args[2]) {
      if (ch < '!' || ch > '~') {
        co_return resp::append_error(
            text(c), "ERR Client names cannot contain spaces, newlines or special characters.");
      }
    }
    co_return set_name(c, c.args[2]);
  }
  if (*known == "GETNAME") {
    if (c.ses.name.empty()) co_return c.out.null();
    co_return resp::append_bulk_string(text(c), c.ses.name);
  }
  if (*known == "ID") co_return resp::append_integer(text(c), c.ses.id);
  if (*known == "INFO") {
    std::string line;
    client_line(c.ses, clock_ms(), line);
    co_return c.out.verbatim(line + "\n");
  }
  if (*known == "NO-EVICT") {
    // uring-kv never evicts: the flag is kept for CLIENT LIST alone.
    if (!iequals(c.args[2], "ON") && !iequals(c.args[2], "OFF"))
      co_return resp::append_error(text(c), syntax_error);
    c.ses.info.no_evict = iequals(c.args[2], "ON");
    co_return resp::append_simple_string(text(c), "OK");
  }
  if (*known == "LIST") co_return co_await client_list(c);
  co_await client_kill(c);
}

}  // namespace kv
