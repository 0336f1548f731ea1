// samples/kv/commands.cpp — uring-kv's command table: arity, routing to the key's shard, Redis's errors.
#include "commands.hpp"

#include <array>
#include <atomic>

#include <uring/resp/parser.hpp>

#include "command_table.hpp"
#include "forward_batch.hpp"

namespace kv {

namespace {

using uring::task;
namespace resp = uring::resp;

using multi_fn = task<void> (*)(context&);
using local_fn = void (*)(context&);

struct spec {
  std::string_view name;       // upper case
  int arity;                   // as Redis's: N exactly N arguments (the name counted), -N at least N
  single_fn single = nullptr;  // args[1] is the key: runs on its shard
  multi_fn multi = nullptr;    // visits the shards it needs
  local_fn local = nullptr;    // no key: answered by the connection's executor
};

// clang-format off
constexpr spec commands[] = {
    {"GET", 2, cmd_get},             {"SET", -3, cmd_set},               {"GETEX", -2, cmd_getex},
    {"GETDEL", 2, cmd_getdel},       {"GETSET", 3, cmd_getset},          {"SETNX", 3, cmd_setnx},
    {"SETEX", 4, cmd_setex},         {"PSETEX", 4, cmd_psetex},          {"STRLEN", 2, cmd_strlen},
    {"APPEND", 3, cmd_append},       {"SETRANGE", 4, cmd_setrange},      {"GETRANGE", 4, cmd_getrange},
    {"INCR", 2, cmd_incr},           {"DECR", 2, cmd_decr},              {"INCRBY", 3, cmd_incrby},
    {"DECRBY", 3, cmd_decrby},       {"INCRBYFLOAT", 3, cmd_incrbyfloat},
    {"EXPIRE", -3, cmd_expire},      {"PEXPIRE", -3, cmd_pexpire},       {"EXPIREAT", -3, cmd_expireat},
    {"PEXPIREAT", -3, cmd_pexpireat}, {"TTL", 2, cmd_ttl},               {"PTTL", 2, cmd_pttl},
    {"EXPIRETIME", 2, cmd_expiretime}, {"PEXPIRETIME", 2, cmd_pexpiretime}, {"PERSIST", 2, cmd_persist},
    {"TYPE", 2, cmd_type},
    {"MGET", -2, nullptr, cmd_mget},     {"MSET", -3, nullptr, cmd_mset},   {"MSETNX", -3, nullptr, cmd_msetnx},
    {"DEL", -2, nullptr, cmd_del},       {"EXISTS", -2, nullptr, cmd_exists},
    {"UNLINK", -2, nullptr, cmd_del},    {"TOUCH", -2, nullptr, cmd_exists}, {"MOVE", 3, nullptr, cmd_move},
    {"SUBSTR", 4, cmd_getrange},
    {"RENAME", 3, nullptr, cmd_rename},  {"RENAMENX", 3, nullptr, cmd_renamenx},
    {"COPY", -3, nullptr, cmd_copy},     {"KEYS", 2, nullptr, cmd_keys},    {"SCAN", -2, nullptr, cmd_scan},
    {"RANDOMKEY", 1, nullptr, cmd_randomkey}, {"DBSIZE", 1, nullptr, cmd_dbsize},
    {"FLUSHALL", -1, nullptr, cmd_flushall}, {"FLUSHDB", -1, nullptr, cmd_flushdb},
    {"SWAPDB", 3, nullptr, cmd_swapdb},
    {"INFO", -1, nullptr, cmd_info},
    {"PING", -1, nullptr, nullptr, cmd_ping},   {"ECHO", 2, nullptr, nullptr, cmd_echo},
    {"QUIT", -1, nullptr, nullptr, cmd_quit},   {"SELECT", 2, nullptr, nullptr, cmd_select},
    {"COMMAND", -1, nullptr, nullptr, cmd_command}, {"CONFIG", -2, nullptr, cmd_config},
    {"CLIENT", -2, nullptr, cmd_client}, {"TIME", 1, nullptr, nullptr, cmd_time},
    {"AUTH", -2, nullptr, nullptr, cmd_auth}, {"HELLO", -1, nullptr, nullptr, cmd_hello},
    {"MULTI", 1, nullptr, nullptr, cmd_multi}, {"EXEC", 1, nullptr, cmd_exec},
    {"DISCARD", 1, nullptr, cmd_discard},      {"WATCH", -2, nullptr, cmd_watch},
    {"UNWATCH", 1, nullptr, cmd_unwatch},
};
// clang-format on

const spec* lookup(std::string_view name) noexcept {
  for (const spec& s : commands) {
    if (iequals(name, s.name)) return &s;
  }
  return nullptr;
}

// An argument as Redis's printf "%.Ns" writes it: up to a NUL byte, `max` bytes at most.
std::string_view c_string(std::string_view s, std::size_t max) {
  return s.substr(0, s.find('\0')).substr(0, max);
}

// Redis's words for an unknown command: the name and the arguments, 128 bytes of each at most.
std::string unknown_command(args_t args) {
  std::string msg = "ERR unknown command '";
  msg.append(c_string(args[0], 128)).append("', with args beginning with: ");
  std::size_t list = msg.size();
  for (std::size_t i = 1; i < args.size() && msg.size() - list < 128; ++i) {
    std::string_view arg = c_string(args[i], 128 - (msg.size() - list));
    msg.append("'").append(arg).append("' ");
  }
  return msg;
}

// The commands with subcommands, whose subcommand Redis looks up and checks before running or queuing one.
bool has_subcommands(const spec& s) noexcept {
  return s.multi == cmd_config || s.multi == cmd_client || s.local == cmd_command;
}

// Redis's refusal of `sp`'s subcommand args[1]: unknown, or of a wrong arity; empty when it may run.
std::string subcommand_error(const spec& sp, args_t args) {
  const command_entry* e = find_command(args);
  if (e == nullptr) {
    return "ERR unknown subcommand '" + std::string(c_string(args[1], 128)) + "'. Try " +
           std::string(sp.name) + " HELP.";
  }
  if (!arity_fits(e->arity, args.size())) {
    return "ERR wrong number of arguments for '" + std::string(e->name) + "' command";
  }
  return {};
}

std::atomic<std::int64_t> next_client_id{1};

// What runs at once while MULTI is on, as in Redis; every other command is queued.
bool runs_in_multi(const spec& s) noexcept {
  return s.local == cmd_multi || s.multi == cmd_exec || s.multi == cmd_discard || s.multi == cmd_watch ||
         s.local == cmd_quit;
}

}  // namespace

bool arity_fits(int arity, std::size_t n) noexcept {
  auto count = static_cast<int>(n);
  return arity > 0 ? count == arity : count >= -arity;
}

session::session() : id(next_client_id.fetch_add(1, std::memory_order_relaxed)) {}

single_fn single_command(std::string_view name) noexcept {
  const spec* sp = lookup(name);
  return sp != nullptr ? sp->single : nullptr;
}

void count_keyed(server& srv, std::size_t me, bool elsewhere) noexcept {
  kv::shard& s = *srv.shards[me];
  ++s.keyed_commands;
  if (elsewhere) ++s.forwarded_commands;
}

namespace {

// A single-key command on shard `s`, whose lock the caller holds.
void run_single(shard& s, session& ses, args_t args, reply& out, single_fn fn) {
  // A value replied comes back shared, so a long one is sent from the store, not copied.
  shard_reply r{out.text(), nullptr, false, out.resp3(), ses.input};
  fn(s.db[ses.db], args, r);
  if (r.has_value) out.bulk(std::move(r.value));
}

// The rest of a single-key command whose key lives on shard i, another executor's, that execute did not
// run here (it found the lock taken just now): run there, a hop, without trying the lock again.
task<bool> run_elsewhere(server& srv, std::size_t me, session& ses, args_t args, reply& out, single_fn fn,
                         std::size_t i) {
  shard_reply r{out.text(), nullptr, false, out.resp3(), ses.input};
  ++srv.shards[me]->hops;
  co_await on_executor(srv, me, i,
                       [&srv, fn, args, &r, i, db = ses.db] { fn(srv.shards[i]->db[db], args, r); });
  if (r.has_value) out.bulk(std::move(r.value));
  co_return true;
}

// The rest of a command that visits the shards it needs (the context kept in this frame).
task<bool> run_multi(multi_fn fn, context c) {
  co_await fn(c);
  co_return !c.close;
}

task<bool> abort_exec(context c, std::string why) {
  co_await exec_abort(c, why);
  co_return true;
}

}  // namespace

std::size_t forwarded_to(const server& srv, std::size_t me, const session& ses, args_t args) noexcept {
  // execute's path to its single-key branch: known, of a fitting arity, allowed, not queued by MULTI.
  const spec* sp = lookup(args[0]);
  if (sp == nullptr || sp->single == nullptr || !arity_fits(sp->arity, args.size()) || ses.tx.active ||
      !allowed_before_auth(srv, ses, sp->name)) {
    return forward_batch::none;
  }
  const std::size_t i = kv::shard_of(args[1], srv.count());
  return i != me ? i : forward_batch::none;
}

command_run execute(server& srv, std::size_t me, session& ses, args_t args, reply& out,
                    forward_batch* batch) {
  const spec* sp = lookup(args[0]);
  if (sp == nullptr) {
    resp::append_error(out.text(), unknown_command(args));
    ses.tx.dirty |= ses.tx.active;
    return command_run(true);
  }
  if (!arity_fits(sp->arity, args.size())) {
    std::string why = "wrong number of arguments for '" + lower(sp->name) + "' command";
    if (sp->multi == cmd_exec) return command_run(abort_exec(context{srv, me, ses, args, out}, why));
    resp::append_error(out.text(), "ERR " + why);
    ses.tx.dirty |= ses.tx.active;
    return command_run(true);
  }
  // As Redis, before it runs or is queued: inside MULTI the refusal is the reply, and EXEC aborts.
  if (args.size() > 1 && has_subcommands(*sp)) {
    if (std::string why = subcommand_error(*sp, args); !why.empty()) {
      resp::append_error(out.text(), why);
      ses.tx.dirty |= ses.tx.active;
      return command_run(true);
    }
  }
  if (ses.exec_count < 0) {  // within EXEC, Redis's last command stays "exec"
    ses.info.cmd = sp->name;
    ses.info.sub = {};
  }
  if (!allowed_before_auth(srv, ses, sp->name)) {
    resp::append_error(out.text(), "NOAUTH Authentication required.");
    return command_run(true);
  }
  context c{srv, me, ses, args, out};
  if (ses.tx.active && !runs_in_multi(*sp)) {
    queue_command(c);
    return command_run(true);
  }
  ++srv.clients[me]->commands_processed;
  if (sp->single != nullptr) {
    std::size_t i = kv::shard_of(args[1], srv.count());
    count_keyed(srv, me, i != me);
    shard& s = *srv.shards[i];
    if (i != me) {
      // Commands already waiting for that shard go first; else the command runs here if its shard is free.
      if (batch == nullptr || batch->empty()) {
        if (keys_guard hold(s, std::try_to_lock); hold.owns()) {
          run_single(s, ses, args, out, sp->single);
          return command_run(true);
        }
      }
      if (batch != nullptr && batch->takes(i, args)) {
        batch->add(i, sp->single, ses.db, args);
        return command_run(true);
      }
      return command_run(run_elsewhere(srv, me, ses, args, out, sp->single, i));
    }
    keys_guard hold(s);
    run_single(s, ses, args, out, sp->single);
    return command_run(true);
  }
  if (sp->multi != nullptr) return command_run(run_multi(sp->multi, c));
  sp->local(c);
  return command_run(!c.close);
}

}  // namespace kv
