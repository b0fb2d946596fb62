#include "core/chunked_vector.h"

#include <gtest/gtest.h>

#include <vector>

namespace proton {
namespace {

// Appending across chunk boundaries keeps order, and what was appended does not move.
TEST(ChunkedVectorTest, GrowsAcrossChunksWithoutMovingWhatItHolds) {
  ChunkedVector<int, 4> v;
  EXPECT_TRUE(v.empty());
  v.push_back(0);
  const int *first = &v[0];
  std::vector<int> batch = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  v.append(batch.data(), batch.size());
  ASSERT_EQ(v.size(), 10u);
  EXPECT_EQ(&v[0], first);
  std::vector<int> all(v.begin(), v.end());
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  v[9] = 90;
  EXPECT_EQ(v[9], 90);
  v.clear();
  EXPECT_EQ(v.size(), 0u);
  EXPECT_EQ(v.begin(), v.end());
  v.push_back(7);
  EXPECT_EQ(std::vector<int>(v.begin(), v.end()), std::vector<int>{7});
}

}  // namespace
}  // namespace proton
