#include "runtime/profile_output.h"

#include <gtest/gtest.h>

#include <optional>

namespace proton {
namespace {

TEST(ProfilePathTest, RankAndPartGoBetweenTheNameAndTheExtension) {
  SessionOptions o;
  o.path = "out/run";
  EXPECT_EQ(profilePath(o, std::nullopt, OutputFormat::kHatchet), "out/run.hatchet");
  EXPECT_EQ(profilePath(o, PhaseId{3}, OutputFormat::kHatchetMsgpack),
            "out/run.part_3.hatchet_msgpack");
  o.rank = RankInfo{1, 2};
  EXPECT_EQ(profilePath(o, std::nullopt, OutputFormat::kHatchet), "out/run.rank1.hatchet");
  EXPECT_EQ(profilePath(o, PhaseId{0}, OutputFormat::kChromeTrace),
            "out/run.rank1.part_0.chrome_trace");
  o.path = "out/run.hatchet";  // the extension given by the user appears once
  EXPECT_EQ(profilePath(o, PhaseId{2}, OutputFormat::kHatchet), "out/run.rank1.part_2.hatchet");
  o.path = "-";
  EXPECT_EQ(profilePath(o, PhaseId{2}, OutputFormat::kHatchet), "-");
}

}  // namespace
}  // namespace proton
