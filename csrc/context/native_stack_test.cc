// Native call stacks (context="native"): unwinding, symbolisation from the ELF symbol table,
// the frames left out, and interning.
#include "context/native_stack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/string_table.h"

namespace {

using proton::PythonStack;

std::vector<std::string> names(const PythonStack *s) {
  std::vector<std::string> out;
  for (proton::StringId f : s->frames) out.emplace_back(proton::StringTable::global().view(f));
  return out;
}

// Each calls the next and does something after the call, so none is a tail call.
__attribute__((noinline)) const PythonStack *leafCapture() {
  const PythonStack *s = proton::captureNativeStack();
  asm volatile("" ::: "memory");
  return s;
}
__attribute__((noinline)) const PythonStack *middleCall() {
  const PythonStack *s = leafCapture();
  asm volatile("" ::: "memory");
  return s;
}
__attribute__((noinline)) const PythonStack *outerCall() {
  const PythonStack *s = middleCall();
  asm volatile("" ::: "memory");
  return s;
}

size_t indexOf(const std::vector<std::string> &frames, const std::string &prefix) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].rfind(prefix, 0) == 0) return i;
  return frames.size();
}

TEST(NativeStackTest, FramesAreOutermostFirstAndEndAtTheCaller) {
  const PythonStack *s = outerCall();
  ASSERT_NE(s, nullptr);
  std::vector<std::string> f = names(s);
  ASSERT_GE(f.size(), 3u);
  size_t outer = indexOf(f, "(anonymous namespace)::outerCall() (");
  size_t middle = indexOf(f, "(anonymous namespace)::middleCall() (");
  size_t leaf = indexOf(f, "(anonymous namespace)::leafCapture() (");
  ASSERT_LT(leaf, f.size());
  // The innermost frame is the function that asked: captureNativeStack itself is left out.
  EXPECT_EQ(leaf, f.size() - 1);
  EXPECT_EQ(middle + 1, leaf);
  EXPECT_EQ(outer + 1, middle);
  // "function (module+0xoffset)", the module being this test program.
  std::regex shape(R"(.+ \(proton_tests\+0x[0-9a-f]+\))");
  EXPECT_TRUE(std::regex_match(f[leaf], shape)) << f[leaf];
  // Process start-up (the C library, _start) is left out.
  for (const std::string &frame : f) {
    EXPECT_EQ(frame.find("libc.so"), std::string::npos) << frame;
    EXPECT_NE(frame.rfind("_start (", 0), 0u) << frame;
  }
}

TEST(NativeStackTest, OneCallSiteIsOneInternedStackAndAnotherIsAnother) {
  const PythonStack *first = nullptr;
  volatile int rounds = 3;  // not unrolled: one call site
  for (int i = 0; i < rounds; ++i) {
    const PythonStack *s = outerCall();
    if (!first) first = s;
    EXPECT_EQ(s, first);  // the same object from the thread's cache
  }
  const PythonStack *other = outerCall();  // a different call site in this function
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, first);
  std::vector<std::string> a = names(first), b = names(other);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_EQ(differ, 1u);  // only this test function's frame: its call-site offset
}

TEST(NativeStackTest, AnotherThreadGetsTheSameStackForTheSameCalls) {
  const PythonStack *here = nullptr;
  const PythonStack *there = nullptr;
  auto run = [](const PythonStack **out) { *out = outerCall(); };
  std::thread a(run, &here);
  a.join();
  std::thread b(run, &there);
  b.join();
  ASSERT_NE(here, nullptr);
  EXPECT_EQ(here, there);
  // A thread's stack starts in the thread library's start routine, which is left out.
  EXPECT_EQ(names(here).front().find("start_thread"), std::string::npos);
}

__attribute__((noinline)) const PythonStack *recurse(int depth) {
  const PythonStack *s = depth == 0 ? proton::captureNativeStack() : recurse(depth - 1);
  asm volatile("" ::: "memory");
  return s;
}

TEST(NativeStackTest, DeepStacksKeepTheirInnermostFramesUnderTruncated) {
  std::vector<std::string> deep = names(recurse(300));
  ASSERT_EQ(deep.size(), proton::kMaxNativeFrames + 1);
  EXPECT_EQ(deep.front(), "[truncated]");
  for (size_t i = 1; i < deep.size(); ++i)
    EXPECT_EQ(deep[i].rfind("(anonymous namespace)::recurse(int) (", 0), 0u) << deep[i];
  // A stack that fits is kept whole, with no marker.
  std::vector<std::string> shallow = names(recurse(10));
  EXPECT_NE(shallow.front(), "[truncated]");
  EXPECT_EQ(std::count_if(shallow.begin(), shallow.end(),
                          [](const std::string &f) {
                            return f.rfind("(anonymous", 0) == 0 &&
                                   f.find("recurse") != std::string::npos;
                          }),
            11);
}

TEST(NativeStackTest, FrameNamesUseTheSymbolTableAndTheModuleOffset) {
  auto address = reinterpret_cast<uintptr_t>(&middleCall);
  std::string name = proton::nativeFrameName(address + 5);  // inside middleCall
  EXPECT_EQ(name.rfind("(anonymous namespace)::middleCall() (proton_tests+0x", 0), 0u) << name;
  EXPECT_EQ(proton::nativeFrameName(16).rfind("?? (0x", 0), 0u);
}

}  // namespace
