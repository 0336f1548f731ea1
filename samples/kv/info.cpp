// samples/kv/info.cpp — INFO [section ...]: Redis 7.0's format ("# Section" headers, "name:value" lines, a
// blank line between sections) for the sections server, clients, memory, stats and keyspace, and uring-kv's
// own "shards" (keys and keyed commands per shard) and "uring" (each shard's executor: its ring's flags and
// messaging road, enters, SQEs, CQEs..., and the percentiles of SQEs per submit and CQEs per reap).
#include <malloc.h>
#include <unistd.h>

#include <uring/resp/parser.hpp>

#include <array>
#include <cstdio>

#include "commands.hpp"

namespace kv {

namespace {

using uring::task;

// What one executor holds: its shard's counts and its connections'.
struct counts {
  struct db {
    std::size_t keys = 0, expires = 0;
    deadline_sum deadlines = 0;
  };
  std::array<db, databases> dbs{};
  std::size_t stored = 0, clients = 0;
  std::uint64_t expired = 0, hits = 0, misses = 0, keyed = 0, forwarded = 0, hops = 0, received = 0,
                processed = 0;
  uring::metrics::executor_sample executor;  // the shard's executor's figures (the Uring section)
  std::string ring_flags;                    // the setup flags its ring has ("none" emulated)
  bool msg_ring = false;                     // its hand-offs go by MSG_RING (else by mailbox)
};

std::string line(std::string_view name, std::uint64_t n) {
  return std::string(name) + ":" + std::to_string(n) + "\r\n";
}
std::string line(std::string_view name, std::string_view v) {
  return std::string(name) + ":" + std::string(v) + "\r\n";
}

// Redis's bytesToHuman: 1.39M and the like.
std::string human(std::uint64_t n) {
  constexpr std::array<char, 4> units{'K', 'M', 'G', 'T'};
  if (n < 1024) return std::to_string(n) + "B";
  double d = static_cast<double>(n) / 1024;
  std::size_t u = 0;
  while (d >= 1024 && u + 1 < units.size()) d /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%c", d, units[u]);
  return buf;
}

// The sections asked for: none, "default" and "all" name Redis's usual ones (and uring-kv's shards).
bool wanted(args_t args, std::string_view section) {
  if (args.size() == 1) return true;
  for (std::string_view a : args.subspan(1)) {
    if (iequals(a, "ALL") || iequals(a, "DEFAULT") || iequals(a, "EVERYTHING") || iequals(a, section))
      return true;
  }
  return false;
}

}  // namespace

task<void> cmd_info(context& c) {
  std::vector<counts> per(c.srv.count());
  // Counted as Redis counts (expired keys not reclaimed yet included), without erasing: INFO must not do
  // active expiry's work (the tests watch it happen).
  for (std::size_t i = 0; i < c.srv.count(); ++i) {
    co_await on_executor(c.srv, c.me, i, [&per, &c, i] {
      counts& n = per[i];
      const shard& s = *c.srv.shards[i];
      for (int d = 0; d < databases; ++d) {
        const keyspace& ks = s.db[d];
        n.dbs[d] = {ks.stored(), ks.with_deadline(), ks.deadlines()};
        n.stored += ks.stored();
        n.expired += ks.expired_keys;
        n.hits += ks.hits;
        n.misses += ks.misses;
      }
      n.keyed = s.keyed_commands;
      n.forwarded = s.forwarded_commands;
      n.hops = s.hops;
      const client_registry& r = *c.srv.clients[i];
      n.clients = r.size;
      n.received = r.connections_received;
      n.processed = r.commands_processed;
      const uring::executor& ex = *uring::executor::current();
      n.executor = uring::metrics::sample_of(ex);
      n.ring_flags = uring::to_string(ex.active_flags());
      n.msg_ring = ex.plan().msg_ring;
    });
  }
  counts all;
  for (const counts& p : per) {
    for (int d = 0; d < databases; ++d) {
      all.dbs[d].keys += p.dbs[d].keys;
      all.dbs[d].expires += p.dbs[d].expires;
      all.dbs[d].deadlines += p.dbs[d].deadlines;
    }
    all.stored += p.stored, all.clients += p.clients, all.expired += p.expired, all.hits += p.hits;
    all.misses += p.misses, all.keyed += p.keyed, all.forwarded += p.forwarded, all.hops += p.hops,
        all.received += p.received;
    all.processed += p.processed;
  }
  std::int64_t now = clock_ms();
  std::string info;
  auto section = [&](std::string_view name, std::string_view title) {
    if (!wanted(c.args, name)) return false;
    if (!info.empty()) info += "\r\n";
    info += "# " + std::string(title) + "\r\n";
    return true;
  };
  if (section("SERVER", "Server")) {
    std::int64_t up = (now - c.srv.started_ms) / 1000;
    info += line("redis_version", redis_version) + line("redis_mode", "standalone") + line("arch_bits", 64) +
            line("multiplexing_api", c.srv.backend) +
            line("process_id", static_cast<std::uint64_t>(::getpid())) + line("tcp_port", c.srv.port) +
            line("server_time_usec", static_cast<std::uint64_t>(now) * 1000) + line("uptime_in_seconds", up) +
            line("uptime_in_days", up / 86400) + line("uring_kv_backend", c.srv.backend) +
            line("uring_kv_shards", c.srv.count());
  }
  if (section("CLIENTS", "Clients")) {
    info += line("connected_clients", all.clients) + line("cluster_connections", 0) +
            line("maxclients", c.srv.max_connections) + line("blocked_clients", 0) +
            line("tracking_clients", 0);
  }
  if (section("MEMORY", "Memory")) {
    // What the allocator holds for the whole process: the shards' keys and values, and the rest.
    struct mallinfo2 m = ::mallinfo2();
    std::uint64_t used = m.uordblks + m.hblkhd;
    info += line("used_memory", used) + line("used_memory_human", human(used));
  }
  if (section("STATS", "Stats")) {
    info += line("total_connections_received", all.received) +
            line("total_commands_processed", all.processed) + line("expired_keys", all.expired) +
            line("keyspace_hits", all.hits) + line("keyspace_misses", all.misses) +
            line("uring_kv_stored_keys", all.stored);
  }
  if (section("KEYSPACE", "Keyspace")) {
    for (int d = 0; d < databases; ++d) {
      const counts::db& db = all.dbs[d];
      if (db.keys == 0) continue;
      // The mean time left of the keys with a deadline (Redis's is an estimate from expiry's samples).
      std::int64_t avg = 0;
      if (db.expires > 0) avg = static_cast<std::int64_t>(db.deadlines / db.expires) - now;
      info += "db" + std::to_string(d) + ":keys=" + std::to_string(db.keys) +
              ",expires=" + std::to_string(db.expires) + ",avg_ttl=" + std::to_string(avg > 0 ? avg : 0) +
              "\r\n";
    }
  }
  if (section("SHARDS", "Shards")) {
    for (std::size_t i = 0; i < per.size(); ++i) {
      std::string shard = "shard" + std::to_string(i);
      info += line(shard + "_keys", per[i].stored) + line(shard + "_keyed_commands", per[i].keyed) +
              line(shard + "_forwarded_commands", per[i].forwarded) + line(shard + "_hops", per[i].hops);
    }
    // Keyed commands that visited another shard than their connection's (the cross-shard share), and the
    // visits that found that shard's lock taken and went to its thread.
    info += line("keyed_commands", all.keyed) + line("forwarded_commands", all.forwarded) +
            line("hops", all.hops);
  }
  if (section("URING", "Uring")) {
    // Each shard's executor: its ring's work (uring/metrics.hpp names the same figures for Prometheus).
    for (std::size_t i = 0; i < per.size(); ++i) {
      const std::string ex = "executor" + std::to_string(i);
      const uring::executor_stats& st = per[i].executor.stats;
      info += line(ex + "_enters", st.enters) + line(ex + "_waits", st.waits) + line(ex + "_sqes", st.sqes) +
              line(ex + "_cqes", st.cqes) + line(ex + "_cancels", st.cancels) +
              line(ex + "_messages_sent_by_ring", st.messages_sent_by_ring) +
              line(ex + "_messages_received", st.messages_received) +
              line(ex + "_operations_in_flight", per[i].executor.in_flight) +
              line(ex + "_ring_flags", per[i].ring_flags) +
              line(ex + "_messaging", per[i].msg_ring ? "msg_ring" : "mailbox");
      // How well the loop batches: SQEs per submit and CQEs per reap (uring/executor_histograms.hpp).
      const uring::executor_histograms& h = per[i].executor.histograms;
      for (const auto& [name, hist] : {std::pair{"_sqes_per_submit", &h.sqes_per_submit},
                                       std::pair{"_cqes_per_reap", &h.cqes_per_reap}}) {
        info += line(ex + name + "_p50", hist->percentile(0.5)) +
                line(ex + name + "_p99", hist->percentile(0.99)) + line(ex + name + "_max", hist->max());
      }
    }
  }
  c.out.verbatim(info);
}

}  // namespace kv
