#include "viewer/kernel_name.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace proton::viewer {
namespace {

std::string shown(std::string_view name) {
  std::string out;
  return shortenKernelName(name, &out) ? out : std::string(name);
}

TEST(KernelName, TemplateAndParameterListsAreElidedAndTheReturnTypeDropped) {
  EXPECT_EQ(shown("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<"
                  "float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, "
                  "std::array<char*, 1ul>)"),
            "at::native::vectorized_elementwise_kernel<...>(...)");
  EXPECT_EQ(shown("void ns::k<int>()"), "ns::k<...>()");
}

TEST(KernelName, NamesThatAreNotSignaturesStayWhole) {
  for (const char *name : {"matmul_kernel", "step(3)", "/a/b.py:12@<module>", "ns::f(a)",
                           "bool at::operator<(at::Half, at::Half)", "void bad<int(float)"}) {
    std::string out = "untouched";
    EXPECT_FALSE(shortenKernelName(name, &out)) << name;
    EXPECT_EQ(out, "untouched");
  }
}

// The cases python/proton/viewer/names.py is checked against too (tests/python).
TEST(KernelName, MatchesTheGoldenFileSharedWithThePythonViewer) {
  std::ifstream in(std::string(PROTON_GOLDEN_DIR) + "/kernel_names.tsv");
  ASSERT_TRUE(in.good());
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    EXPECT_EQ(shown(line.substr(0, tab)), line.substr(tab + 1)) << line;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

}  // namespace
}  // namespace proton::viewer
