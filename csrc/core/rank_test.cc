#include "core/rank.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace proton {
namespace {

// detectRank reads through a plain function pointer, so the fake environment is a global.
std::map<std::string, std::string> fakeEnv;
const char *lookup(const char *name) {
  auto it = fakeEnv.find(name);
  return it == fakeEnv.end() ? nullptr : it->second.c_str();
}
RankInfo rankOf(std::map<std::string, std::string> env) {
  fakeEnv = std::move(env);
  return detectRank(lookup);
}

TEST(RankTest, TorchrunVariablesGiveRankAndWorldSize) {
  RankInfo r = rankOf({{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.worldSize, 8);
  EXPECT_EQ(rankSuffix(r), ".rank3");
}

TEST(RankTest, MpiAndSlurmVariablesAreReadInOrder) {
  EXPECT_EQ(rankOf({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"}}).rank, 5);
  EXPECT_EQ(rankOf({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}).worldSize, 4);
  EXPECT_EQ(rankOf({{"PMIX_RANK", "7"}}).rank, 7);
  EXPECT_EQ(rankOf({{"PMIX_RANK", "7"}}).worldSize, 0);  // unknown
  EXPECT_EQ(rankOf({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}).rank, 1);
  // torchrun inside a Slurm allocation: torchrun's own rank wins.
  EXPECT_EQ(rankOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "9"}}).rank, 0);
}

TEST(RankTest, NoJobOrAJobOfOneKeepsThePlainName) {
  EXPECT_FALSE(rankOf({}).known());
  EXPECT_FALSE(rankOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).known());
  EXPECT_FALSE(rankOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).known());
  EXPECT_EQ(rankSuffix(RankInfo{}), "");
}

TEST(RankTest, MalformedValuesAreIgnored) {
  EXPECT_FALSE(rankOf({{"RANK", ""}}).known());
  EXPECT_FALSE(rankOf({{"RANK", "-1"}}).known());
  EXPECT_FALSE(rankOf({{"RANK", "1x"}}).known());
  // A bad RANK falls through to the next launcher's variables.
  EXPECT_EQ(rankOf({{"RANK", "abc"}, {"PMI_RANK", "4"}, {"PMI_SIZE", "5"}}).rank, 4);
  EXPECT_EQ(rankOf({{"RANK", "2"}, {"WORLD_SIZE", "many"}}).worldSize, 0);
}

}  // namespace
}  // namespace proton
