#include "context/forward_ops.h"

#include <gtest/gtest.h>

#include "core/string_table.h"

namespace proton {
namespace {

TEST(ForwardOpsTest, ABackwardNodeFindsItsForwardOperatorByThreadAndSequence) {
  ForwardOps ops;
  StringId addmm = StringTable::global().intern("aten::addmm");
  const PythonStack *path = internPythonStack({StringTable::global().intern("fc1 (Linear)")});
  ops.record(7, 41, path, addmm);
  ForwardOp found;
  ASSERT_TRUE(ops.find(7, 41, found));
  EXPECT_EQ(found.name, addmm);
  EXPECT_EQ(found.modulePath, path);
  EXPECT_FALSE(ops.find(8, 41, found));  // numbers are per thread
  EXPECT_FALSE(ops.find(7, 42, found));
  EXPECT_FALSE(ops.find(7, -1, found));
}

TEST(ForwardOpsTest, TheInnermostOperatorWithANumberWinsAndOldOnesAreOverwritten) {
  ForwardOps ops;
  StringId linear = StringTable::global().intern("aten::linear");
  StringId addmm = StringTable::global().intern("aten::addmm");
  ops.record(1, 5, nullptr, linear);
  ops.record(1, 5, nullptr, addmm);
  ForwardOp found;
  ASSERT_TRUE(ops.find(1, 5, found));
  EXPECT_EQ(found.name, addmm);
  ops.record(1, 5 + ForwardOps::kSlots, nullptr, linear);  // same slot, a later operator
  EXPECT_FALSE(ops.find(1, 5, found));
  EXPECT_TRUE(ops.find(1, 5 + ForwardOps::kSlots, found));
}

}  // namespace
}  // namespace proton
