#include "core/context_sources.h"

#include <gtest/gtest.h>

namespace proton {
namespace {

std::string error(std::string_view context) {
  Result<ContextSources> r = parseContextSources(context);
  EXPECT_FALSE(r.isOk()) << context;
  if (r.isOk()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ContextSourcesTest, SingleNamesAndListsParseToTheirSources) {
  EXPECT_TRUE(parseContextSources("shadow").value().shadowOnly());
  EXPECT_TRUE(parseContextSources("").value().shadowOnly());
  ContextSources c = parseContextSources(" Torch , python").value();
  EXPECT_TRUE(c.python);
  EXPECT_TRUE(c.framework);
  EXPECT_FALSE(c.native);
  EXPECT_EQ(c.frameworkName, "torch");
  EXPECT_EQ(c.name(), "python,torch");  // canonical order, whatever the spelling
  EXPECT_EQ(parseContextSources("native,python").value().name(), "python,native");
  EXPECT_EQ(parseContextSources("torch,native").value().name(), "torch,native");
  EXPECT_EQ(parseContextSources("native,torch,python").value().name(), "python,torch,native");
}

TEST(ContextSourcesTest, BadListsNameTheProblem) {
  EXPECT_EQ(error("bogus"),
            "[PROTON] Unknown context source: 'bogus'. Allowed values: shadow, python, native, "
            "torch, or a comma-separated list of python, native, torch");
  EXPECT_EQ(error("python,cuda"),
            "[PROTON] Unknown context source: 'cuda'. Allowed values: shadow, python, native, "
            "torch, or a comma-separated list of python, native, torch");
  EXPECT_EQ(error("python,python"), "[PROTON] context 'python,python' names 'python' twice");
  EXPECT_EQ(error("python,"),
            "[PROTON] context 'python,' has an empty entry; expected a comma-separated list such "
            "as 'python,torch'");
  EXPECT_EQ(error("shadow,python"),
            "[PROTON] context 'shadow,python' is not supported: 'shadow' (the annotated scopes "
            "alone) cannot be combined; scopes are part of every context, so leave it out");
}

}  // namespace
}  // namespace proton
