// Rank of this process in a multi-process job (torchrun / torch.distributed, MPI, Slurm), so
// that each process writes its own profile: <name>.rank<R>.<ext>.
//
//   RankInfo r = detectRank(lookup);   // {rank 1, worldSize 2} under torchrun
//   std::string path = "out" + rankSuffix(r) + ".hatchet";   // "out.rank1.hatchet"
//
// Variables, first match wins: RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/_SIZE
// (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Intel MPI), PMIX_RANK (PMIx), SLURM_PROCID/SLURM_NTASKS
// (srun). A job of one process (world size 1) keeps the plain name. Pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace proton {

struct RankInfo {
  int64_t rank = -1;      // -1: not part of a multi-process job
  int64_t worldSize = 0;  // 0: unknown
  bool known() const { return rank >= 0; }
};

using EnvLookup = const char *(*)(const char *);

RankInfo detectRank(EnvLookup env);
// ".rank<R>" for a known rank, "" otherwise.
std::string rankSuffix(const RankInfo &rank);

}  // namespace proton
