#include "core/string_table.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace proton {
namespace {

TEST(StringTableTest, EmptyStringIsIdZero) {
  StringTable table;
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.intern(""), StringId{0});
  EXPECT_EQ(table.view(StringId{0}), "");
  EXPECT_EQ(table.size(), 1u);
}

TEST(StringTableTest, SameStringGivesSameIdAndViewRoundTrips) {
  StringTable table;
  StringId a = table.intern("matmul");
  StringId b = table.intern("softmax");
  EXPECT_NE(a, b);
  EXPECT_EQ(table.intern("matmul"), a);
  EXPECT_EQ(table.intern(std::string("soft") + "max"), b);
  EXPECT_EQ(table.view(a), "matmul");
  EXPECT_EQ(table.view(b), "softmax");
  EXPECT_EQ(table.size(), 3u);
}

TEST(StringTableTest, IdsAreAssignedInFirstSeenOrder) {
  StringTable table;
  EXPECT_EQ(table.intern("x").value, 1u);
  EXPECT_EQ(table.intern("y").value, 2u);
  EXPECT_EQ(table.intern("x").value, 1u);
  EXPECT_EQ(table.intern("z").value, 3u);
}

TEST(StringTableTest, EmbeddedNulAndUtf8AreDistinctStrings) {
  StringTable table;
  StringId withNul = table.intern(std::string_view("a\0b", 3));
  StringId plain = table.intern("a");
  StringId utf8 = table.intern("caf\xc3\xa9");
  EXPECT_NE(withNul, plain);
  EXPECT_EQ(table.view(withNul), std::string_view("a\0b", 3));
  EXPECT_EQ(table.view(utf8), "caf\xc3\xa9");
}

TEST(StringTableTest, ViewStaysValidAfterManyMoreInterns) {
  StringTable table;
  StringId id = table.intern("first");
  std::string_view v = table.view(id);
  for (int i = 0; i < 10000; ++i) table.intern("s" + std::to_string(i));
  EXPECT_EQ(v.data(), table.view(id).data());
  EXPECT_EQ(v, "first");
}

// The thread-local cache holds one table at a time; switching tables must not mix ids.
TEST(StringTableTest, TwoTablesOnOneThreadKeepTheirOwnIds) {
  StringTable a;
  StringTable b;
  StringId a1 = a.intern("only_in_a");
  StringId b1 = b.intern("first_in_b");
  StringId b2 = b.intern("only_in_a");
  EXPECT_EQ(a1.value, 1u);
  EXPECT_EQ(b1.value, 1u);
  EXPECT_EQ(b2.value, 2u);
  EXPECT_EQ(a.intern("only_in_a"), a1);
  EXPECT_EQ(b.intern("only_in_a"), b2);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 3u);
}

TEST(StringTableTest, GlobalTableIsOneInstance) {
  EXPECT_EQ(&StringTable::global(), &StringTable::global());
  StringId id = StringTable::global().intern("string_table_test_global");
  EXPECT_EQ(StringTable::global().view(id), "string_table_test_global");
}

TEST(StringTableTest, ConcurrentInterningGivesConsistentIds) {
  constexpr int kThreads = 8;
  constexpr int kStrings = 2000;
  StringTable table;
  std::vector<std::vector<StringId>> ids(kThreads, std::vector<StringId>(kStrings));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the strings from a different starting point, twice.
      for (int round = 0; round < 2; ++round) {
        for (int k = 0; k < kStrings; ++k) {
          int i = (k + t * 251) % kStrings;
          StringId id = table.intern("name_" + std::to_string(i));
          if (round == 1 && ids[t][i] != id) id = StringId{UINT32_MAX};  // flags a change
          ids[t][i] = id;
        }
      }
    });
  }
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(table.size(), size_t{kStrings} + 1);
  std::vector<bool> used(kStrings + 1, false);
  for (int i = 0; i < kStrings; ++i) {
    StringId id = ids[0][i];
    ASSERT_GE(id.value, 1u);
    ASSERT_LE(id.value, uint32_t{kStrings});
    EXPECT_FALSE(used[id.value]) << "id " << id.value << " given to two strings";
    used[id.value] = true;
    EXPECT_EQ(table.view(id), "name_" + std::to_string(i));
    for (int t = 1; t < kThreads; ++t)
      EXPECT_EQ(ids[t][i], id) << "thread " << t << " string " << i;
  }
}

// A thread's thread_local objects are destroyed before the functions registered with atexit
// run, where a native program's injected session writes its profile and interns names: an
// intern after the thread's cache is gone goes to the table itself.
TEST(StringTableTest, InternsAfterTheThreadsCacheIsDestroyed) {
  StringId early, late;
  std::thread([&] {
    struct AtThreadExit {
      StringId *out;
      ~AtThreadExit() { *out = StringTable::global().intern("interned after the cache is gone"); }
    };
    thread_local AtThreadExit atExit{&late};  // constructed before the cache: destroyed after it
    early = StringTable::global().intern("interned with the cache");
  }).join();
  EXPECT_EQ(StringTable::global().view(early), "interned with the cache");
  EXPECT_EQ(StringTable::global().view(late), "interned after the cache is gone");
  EXPECT_EQ(StringTable::global().intern("interned after the cache is gone"), late);
}

}  // namespace
}  // namespace proton
