#include "context/stack_join.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/string_table.h"

namespace proton {
namespace {

const PythonStack *stackOf(const std::vector<std::string> &names) {
  std::vector<StringId> ids;
  for (const std::string &n : names) ids.push_back(StringTable::global().intern(n));
  return internPythonStack(ids);
}

TEST(StackJoinTest, JoinedStacksAreInternedOnceAndEitherSideMayBeEmpty) {
  const PythonStack *caller = stackOf({"train.py:10@main", "train.py:5@step"});
  const PythonStack *worker = stackOf({"function.py:3@apply"});
  const PythonStack *joined = joinStacks(caller, worker);
  EXPECT_EQ(joined, stackOf({"train.py:10@main", "train.py:5@step", "function.py:3@apply"}));
  EXPECT_EQ(joinStacks(caller, worker), joined);  // cached
  EXPECT_EQ(joinStacks(caller, nullptr), caller);
  EXPECT_EQ(joinStacks(nullptr, worker), worker);
  EXPECT_EQ(joinStacks(caller, emptyPythonStack()), caller);
  EXPECT_EQ(appendFrame(caller, StringTable::global().intern("fc1 (Linear)")),
            stackOf({"train.py:10@main", "train.py:5@step", "fc1 (Linear)"}));
  EXPECT_EQ(appendFrame(nullptr, StringTable::global().intern("MLP")), stackOf({"MLP"}));
}

TEST(StackJoinTest, NativeFramesBelowTheInnermostInterpreterFrameAreWhatPythonCalledInto) {
  EXPECT_TRUE(isInterpreterFrame("_PyEval_EvalFrameDefault (libpython3.11.so.1.0+0x1a2b)"));
  EXPECT_TRUE(isInterpreterFrame("PyObject_Call (python3.12+0x10)"));
  EXPECT_FALSE(isInterpreterFrame("at::_ops::addmm::call (libtorch_cpu.so+0x10)"));
  const PythonStack *native =
      stackOf({"main (python3.12+0x1)", "_PyEval_EvalFrameDefault (python3.12+0x2)",
               "THPVariable_addmm (libtorch_python.so+0x3)",
               "at::_ops::addmm::call (libtorch_cpu.so+0x4)"});
  EXPECT_EQ(belowInterpreter(native), stackOf({"THPVariable_addmm (libtorch_python.so+0x3)",
                                               "at::_ops::addmm::call (libtorch_cpu.so+0x4)"}));
  const PythonStack *cOnly = stackOf({"main (app+0x1)", "launch (app+0x2)"});
  EXPECT_EQ(belowInterpreter(cOnly), cOnly);
  EXPECT_EQ(belowInterpreter(nullptr), nullptr);
}

}  // namespace
}  // namespace proton
