// uring-kv's stored values (samples/kv/value.hpp) and how a keyspace writes one (keyspace::store, own): in
// place while nothing else holds it, else a new one, so that a reply still sending the old bytes, on any
// thread, never sees them change. Built under every sanitizer: under TSan the hand-over from a reader thread
// to a write in place is checked for a data race.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shard.hpp"

namespace {

TEST(KvValue, CopiesShareOneStringAndTheLastOneFreesIt) {
  kv::value_ptr a = kv::make_value("abc");
  EXPECT_TRUE(a.unique());
  kv::value_ptr b = a;
  EXPECT_FALSE(a.unique());
  EXPECT_EQ(&*a, &*b);
  kv::value_ptr c = std::move(b);
  EXPECT_FALSE(b);
  EXPECT_FALSE(a.unique());
  c = nullptr;
  EXPECT_TRUE(a.unique());
  EXPECT_EQ(*a, "abc");
  EXPECT_TRUE(kv::value_ptr() == nullptr);
}

struct one_keyspace {
  kv::keyspace ks;
  kv::entry& set(std::string_view key, std::string_view v) {
    ks.put(key, v, nullptr, 0);
    return *ks.find(key);
  }
};

TEST(KvValue, StoreWritesOverAValueNothingElseHolds) {
  one_keyspace s;
  kv::entry& e = s.set("k", "first");
  const std::string* where = &*e.value;
  s.set("k", "second");
  EXPECT_EQ(&*s.ks.find("k")->value, where) << "SET over a key reuses its value";
  EXPECT_EQ(*s.ks.find("k")->value, "second");
}

TEST(KvValue, StoreLeavesAHeldValueAsItWas) {
  one_keyspace s;
  kv::entry& e = s.set("k", "first");
  kv::value_ptr held = e.value;  // as a reply that sends it by reference holds it
  s.set("k", "second");
  EXPECT_EQ(*held, "first");
  EXPECT_EQ(*s.ks.find("k")->value, "second");
  EXPECT_NE(&*s.ks.find("k")->value, &*held);

  // APPEND's own() copies a held value too.
  kv::value_ptr again = s.ks.find("k")->value;
  kv::keyspace::own(*s.ks.find("k")).append("!");
  EXPECT_EQ(*again, "second");
  EXPECT_EQ(*s.ks.find("k")->value, "second!");
}

TEST(KvValue, AShortValueOverALongOneDoesNotKeepTheLongOnesMemory) {
  one_keyspace s;
  s.set("k", std::string(100'000, 'x'));
  s.set("k", "short");
  EXPECT_EQ(*s.ks.find("k")->value, "short");
  EXPECT_LE(s.ks.find("k")->value->capacity(), 64u);
  // A longer value than the old one has room for is a new one.
  s.set("k", std::string(1000, 'y'));
  EXPECT_EQ(*s.ks.find("k")->value, std::string(1000, 'y'));
}

// A reply on another thread reads the value and lets go of it; the shard then writes over it in place.
// unique()'s acquire orders the reader's reads before that write (a relaxed count, as shared_ptr's
// use_count, would not: TSan reports the race).
TEST(KvValue, AWriteInPlaceFollowsTheLastReadOfAnotherThread) {
  one_keyspace s;
  kv::entry& e = s.set("k", std::string(40, 'a'));
  for (int round = 0; round < 200; ++round) {
    std::size_t sum = 0;
    std::thread reply([held = e.value, &sum]() mutable {
      for (char c : *held) sum += static_cast<unsigned char>(c);
      held = nullptr;
    });
    while (!e.value.unique()) std::this_thread::yield();
    const std::string* where = &*e.value;
    kv::keyspace::store(e, std::string(40, static_cast<char>('a' + (round + 1) % 26)));
    EXPECT_EQ(&*e.value, where) << "written in place once the reply let go";
    reply.join();
    EXPECT_EQ(sum, 40u * static_cast<unsigned char>('a' + round % 26))
        << "the reply read the old bytes whole";
  }
}

TEST(KvValue, IncrWritesTheNumberInPlace) {
  one_keyspace s;
  kv::entry& e = s.set("n", "41");
  const std::string* where = &*e.value;
  std::string text;
  kv::shard_reply out{text, nullptr};
  const std::vector<std::string_view> args{"INCR", "n"};
  kv::cmd_incr(s.ks, args, out);
  EXPECT_EQ(text, ":42\r\n");
  EXPECT_EQ(*s.ks.find("n")->value, "42");
  EXPECT_EQ(&*s.ks.find("n")->value, where);
}

}  // namespace
