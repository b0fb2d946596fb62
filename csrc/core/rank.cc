#include "core/rank.h"

#include <charconv>
#include <cstring>

namespace proton {
namespace {

// A non-negative decimal integer, or -1 for anything else (unset, empty, junk).
int64_t parseCount(const char *text) {
  if (!text || !*text) return -1;
  int64_t value = -1;
  const char *end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 0) return -1;
  return value;
}

}  // namespace

RankInfo detectRank(EnvLookup env) {
  static constexpr const char *kVariables[][2] = {
      {"RANK", "WORLD_SIZE"},           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},         {"PMIX_RANK", nullptr},
      {"SLURM_PROCID", "SLURM_NTASKS"},
  };
  for (const auto &[rankVar, sizeVar] : kVariables) {
    int64_t rank = parseCount(env(rankVar));
    if (rank < 0) continue;
    int64_t size = sizeVar ? parseCount(env(sizeVar)) : -1;
    if (size == 1) return {};  // a job of one: the plain file name is unambiguous
    return {rank, size < 0 ? 0 : size};
  }
  return {};
}

std::string rankSuffix(const RankInfo &rank) {
  return rank.known() ? ".rank" + std::to_string(rank.rank) : std::string();
}

}  // namespace proton
