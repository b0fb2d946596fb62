#include "core/chunked_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace proton {
namespace {

// Appending across chunk boundaries (a page's worth, then doubling) keeps order, and what was
// appended does not move.
TEST(ChunkedVectorTest, GrowsAcrossChunksWithoutMovingWhatItHolds) {
  ChunkedVector<uint64_t> v;
  EXPECT_TRUE(v.empty());
  v.push_back(0);
  const uint64_t *first = &v[0];
  std::vector<uint64_t> batch(600'000);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = i + 1;
  v.append(batch.data(), batch.size());
  ASSERT_EQ(v.size(), 600'001u);
  EXPECT_EQ(&v[0], first);
  size_t i = 0, wrong = 0;
  for (uint64_t x : v) wrong += x != i++;
  EXPECT_EQ(i, 600'001u);
  EXPECT_EQ(wrong, 0u);
  for (size_t j : {511u, 512u, 1535u, 1536u, 523775u, 523776u, 600'000u}) EXPECT_EQ(v[j], j);
  v[9] = 90;
  EXPECT_EQ(v[9], 90u);
  v.clear();
  EXPECT_EQ(v.size(), 0u);
  EXPECT_EQ(v.begin(), v.end());
  v.push_back(7);
  EXPECT_EQ(std::vector<uint64_t>(v.begin(), v.end()), std::vector<uint64_t>{7});
}

}  // namespace
}  // namespace proton
