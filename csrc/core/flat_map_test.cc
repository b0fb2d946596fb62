#include "core/flat_map.h"

#include <gtest/gtest.h>

namespace proton {
namespace {

TEST(FlatMapTest, EmptyMapFindsNothing) {
  FlatMap map;
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.find(0), nullptr);
  EXPECT_EQ(map.find(42), nullptr);
}

TEST(FlatMapTest, InsertThenFind) {
  FlatMap map;
  map.insert(0, 7);
  map.insert(UINT64_MAX, 9);
  ASSERT_NE(map.find(0), nullptr);
  EXPECT_EQ(*map.find(0), 7u);
  ASSERT_NE(map.find(UINT64_MAX), nullptr);
  EXPECT_EQ(*map.find(UINT64_MAX), 9u);
  EXPECT_EQ(map.find(1), nullptr);
  EXPECT_EQ(map.size(), 2u);
}

TEST(FlatMapTest, GrowsBeyondThousandsOfKeys) {
  constexpr uint32_t kKeys = 100000;
  FlatMap map;
  // Keys shaped like the context tree's (parent << 32 | name), which share low bits.
  auto key = [](uint32_t i) { return (uint64_t{i % 100} << 32) | (i / 100); };
  for (uint32_t i = 0; i < kKeys; ++i) map.insert(key(i), i);
  EXPECT_EQ(map.size(), kKeys);
  for (uint32_t i = 0; i < kKeys; ++i) {
    const uint32_t *v = map.find(key(i));
    ASSERT_NE(v, nullptr) << "key " << i;
    ASSERT_EQ(*v, i);
  }
  for (uint32_t i = kKeys; i < kKeys + 1000; ++i) EXPECT_EQ(map.find(key(i)), nullptr);
}

TEST(FlatMapTest, KeysDifferingOnlyInHighBitsAreDistinct) {
  FlatMap map;
  for (uint64_t hi = 0; hi < 5000; ++hi) map.insert(hi << 32, static_cast<uint32_t>(hi));
  for (uint64_t hi = 0; hi < 5000; ++hi) {
    ASSERT_NE(map.find(hi << 32), nullptr);
    EXPECT_EQ(*map.find(hi << 32), hi);
  }
}

TEST(FlatMapTest, ClearEmptiesAndStaysUsable) {
  FlatMap map;
  for (uint32_t i = 0; i < 1000; ++i) map.insert(i, i);
  map.clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.find(5), nullptr);
  map.insert(5, 50);
  ASSERT_NE(map.find(5), nullptr);
  EXPECT_EQ(*map.find(5), 50u);
}

}  // namespace
}  // namespace proton
