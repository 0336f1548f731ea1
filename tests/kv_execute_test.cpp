// uring-kv's commands as kv::execute starts them (samples/kv/commands.hpp): a command on the connection's
// own shard, or on another whose lock is free, a refusal, MULTI and a queued command finish at once,
// allocating nothing beyond what the command itself stores; a command whose key's shard another thread
// holds, or that visits several shards, goes on as a task for the connection to await. The heap blocks are
// counted (alloc_count.hpp).
#include <gtest/gtest.h>

#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "alloc_count.hpp"
#include "commands.hpp"

namespace {

using uring::test::start_recording;
using uring::test::take;

// A server of `shards` shards, and one session on executor 0. Nothing here awaits: a command that goes
// on as a task is only looked at, never run (that needs the shards' executors).
struct one_session {
  kv::server srv;
  kv::session ses;
  uring::net::tcp_stream none;  // the reply writes only when flushed, which these tests never do
  kv::output_limits limits;
  kv::reply out{none, limits};

  explicit one_session(std::size_t shards) {
    srv.make_shards(shards);
    out.text().reserve(1024);  // the connection's output buffer, grown before any count
  }

  // Starts `words` on executor 0: whether it finished at once, and what it replied.
  bool at_once(const std::vector<std::string_view>& words, std::string* reply = nullptr) {
    out.text().clear();
    kv::command_run run = kv::execute(srv, 0, ses, words, out);
    if (reply != nullptr) *reply = out.text();
    return run.await_ready();
  }
  // at_once, and the heap blocks its start allocated into `blocks`.
  bool at_once_counted(const std::vector<std::string_view>& words, std::string* reply,
                       std::vector<std::size_t>& blocks) {
    start_recording();
    const bool done = at_once(words, reply);
    blocks = take();
    return done;
  }
};

// A key that shard_of places on shard `i` of `shards`.
std::string key_on(std::size_t i, std::size_t shards) {
  for (int n = 0;; ++n) {
    std::string key = "key:" + std::to_string(n);
    if (kv::shard_of(key, shards) == i) return key;
  }
}

TEST(KvExecute, ACommandOnItsOwnShardFinishesAtOnceWithoutAllocating) {
  one_session s(1);
  std::string reply;
  ASSERT_TRUE(s.at_once({"SET", "k", "v"}, &reply));
  EXPECT_EQ(reply, "+OK\r\n");
  ASSERT_TRUE(s.at_once({"SET", "n", "41"}));

  std::vector<std::size_t> blocks;
  EXPECT_TRUE(s.at_once_counted({"GET", "k"}, &reply, blocks));
  EXPECT_EQ(reply, "$1\r\nv\r\n");
  EXPECT_EQ(blocks.size(), 0u) << "a GET of a short value allocates nothing: no coroutine frame";

  EXPECT_TRUE(s.at_once_counted({"INCR", "n"}, &reply, blocks));
  EXPECT_EQ(reply, ":42\r\n");
  EXPECT_EQ(blocks.size(), 0u) << "INCR writes the number over the value nothing else holds";

  EXPECT_TRUE(s.at_once_counted({"SET", "k", "w"}, &reply, blocks));
  EXPECT_EQ(reply, "+OK\r\n");
  EXPECT_EQ(blocks.size(), 0u) << "SET over a key writes over its value";
}

TEST(KvExecute, AKeyOnAnotherShardRunsAtOnceWhileThatShardIsFree) {
  one_session s(2);
  std::string here = key_on(0, 2), there = key_on(1, 2), reply;
  EXPECT_TRUE(s.at_once({"SET", here, "v"}));
  EXPECT_TRUE(s.at_once({"SET", there, "w"}, &reply));
  EXPECT_EQ(reply, "+OK\r\n");
  std::vector<std::size_t> blocks;
  EXPECT_TRUE(s.at_once_counted({"GET", there}, &reply, blocks));
  EXPECT_EQ(reply, "$1\r\nw\r\n");
  EXPECT_EQ(blocks.size(), 0u) << "no hop, so no coroutine frame";
  EXPECT_EQ(s.srv.shards[0]->keyed_commands, 3u);
  EXPECT_EQ(s.srv.shards[0]->forwarded_commands, 2u);
  EXPECT_EQ(s.srv.shards[1]->db[0].stored(), 1u) << "the key is stored in its own shard";
  EXPECT_EQ(s.srv.shards[0]->db[0].stored(), 1u);
}

TEST(KvExecute, AKeyOnAShardAnotherThreadHoldsGoesOnAsATask) {
  one_session s(2);
  std::string there = key_on(1, 2);
  {
    // Another thread holds the shard, as its executor does while it runs a command there.
    std::latch held(1), done(1);
    std::thread owner([&] {
      std::lock_guard busy(s.srv.shards[1]->keys);
      held.count_down();
      done.wait();
    });
    held.wait();
    EXPECT_FALSE(s.at_once({"SET", there, "v"}));
    EXPECT_FALSE(s.at_once({"GET", there}));
    done.count_down();
    owner.join();
  }
  EXPECT_EQ(s.srv.shards[1]->db[0].stored(), 0u) << "the task, never run here, stored nothing";
  // Commands that visit the shards they need go on as tasks, whatever the keys.
  EXPECT_FALSE(s.at_once({"MGET", key_on(0, 2)}));
  EXPECT_FALSE(s.at_once({"DBSIZE"}));
}

TEST(KvExecute, RefusalsMultiAndQueuedCommandsFinishAtOnce) {
  one_session s(2);
  std::string reply;
  EXPECT_TRUE(s.at_once({"NOSUCH", "x"}, &reply));
  EXPECT_EQ(reply, "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n");
  EXPECT_TRUE(s.at_once({"GET"}, &reply));
  EXPECT_EQ(reply, "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_TRUE(s.at_once({"PING"}, &reply));
  EXPECT_EQ(reply, "+PONG\r\n");

  EXPECT_TRUE(s.at_once({"MULTI"}, &reply));
  EXPECT_EQ(reply, "+OK\r\n");
  EXPECT_TRUE(s.ses.tx.active);
  EXPECT_EQ(s.ses.tx.held, nullptr) << "MULTI alone makes no queue: a session carries one only when used";
  // Queued, even for a key on the other shard: nothing runs before EXEC.
  EXPECT_TRUE(s.at_once({"SET", key_on(1, 2), "v"}, &reply));
  EXPECT_EQ(reply, "+QUEUED\r\n");
  EXPECT_TRUE(s.at_once({"MULTI"}, &reply));
  EXPECT_EQ(reply, "-ERR MULTI calls can not be nested\r\n");
  EXPECT_EQ(s.ses.tx.queued(), 1u);
  EXPECT_FALSE(s.at_once({"EXEC"}));
}

// The registry lists sessions through their own links, in id order, as CLIENT LIST and CLIENT KILL read it.
TEST(KvClientRegistry, ListsSessionsInIdOrderThroughTheirLinks) {
  kv::client_registry r;
  kv::session a, b, c;  // ids in the order made
  ASSERT_LT(a.id, b.id);
  ASSERT_LT(b.id, c.id);
  r.add(a);
  r.add(b);
  r.add(c);
  EXPECT_EQ(r.size, 3u);
  EXPECT_EQ(r.find(b.id), &b);
  EXPECT_EQ(r.find(c.id + 1), nullptr);
  r.remove(b);
  EXPECT_EQ(r.find(b.id), nullptr);
  std::vector<std::int64_t> ids;
  for (const kv::session* s = r.first; s != nullptr; s = s->next) ids.push_back(s->id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{a.id, c.id}));
  r.remove(a);
  r.remove(c);
  EXPECT_EQ(r.size, 0u);
  EXPECT_EQ(r.first, nullptr);
  EXPECT_EQ(r.last, nullptr);
}

TEST(KvExecute, QuitFinishesAtOnceAndClosesTheConnection) {
  one_session s(1);
  kv::reply& out = s.out;
  std::vector<std::string_view> quit{"QUIT"};
  kv::command_run run = kv::execute(s.srv, 0, s.ses, quit, out);
  ASSERT_TRUE(run.await_ready());
  EXPECT_FALSE(run.await_resume()) << "the connection is to close";
  EXPECT_EQ(out.text(), "+OK\r\n");
}

}  // namespace
