// Tree-mode reduction on the GPU: sums the per-unit records of instrumented launches (the
// tree layout in backends/instrumentation/ptx_rewrite.h) into one reduced slot per launch, so
// that a drain copies back kReducedTreeBytes per launch instead of every unit's record, and
// instrumented kernels never contend on atomics in global memory.
//
// Not compiled by the build: its PTX is checked in as tree_reduce_ptx.inc (loaded with
// cuModuleLoadData at the first drain; a driver that cannot load it falls back to the same
// sums on the host, reduceTreeSlot() in intra_decoder.cc). Regenerate after editing:
//   scripts/gen_tree_reduce_ptx.sh
//
// One block per slot. Input descriptor i: { slot address, slot bytes }. Output i (1552 bytes):
//   [ u32 hash | u32 unmatched | u32 crossing | u32 launches added into the slot ]
//   then 64 scopes of [ u64 cycles | u64 count | u32 warps | u32 0 ] (a launch's count of a
//   scope may pass 2^32; one record's does not)
// The ring is cleared after each drain (units that do not record never write their record).
// A record holds one unit's sums or a CTA's (`recorded` units; per scope, the units that ran
// it in the last word), added up over the launches that added into the slot (a CUDA graph's
// replays).
#include <cstdint>

struct SlotDesc {
  unsigned long long ptr;
  unsigned long long bytes;
};

// One pass, coalesced: a slot's unit records are read as 16-byte chunks (a unit: its header
// chunk, then one per scope), thread t taking chunks t, t + stride, ... where stride is the
// largest multiple of the chunks per unit that fits the block, so each thread always reads
// the same part of a record (its role: the header, or scope role - 1) and sums it in
// registers; the threads of each role are then added up through shared memory. A chunk of a
// unit that did not record (its header's `recorded` word is 0, in the same 64-byte line) adds
// nothing, as in reduceTreeSlot. No atomics: with every thread of a block adding into the same
// few words of shared memory, and each thread walking whole records, the reduction of a full
// 256 MB ring took 650 us on an H100.
constexpr unsigned kThreads = 256;  // the launch's block size (kReduceThreads)
constexpr unsigned kMaxScopes = 64;

extern "C" __global__ void __launch_bounds__(kThreads)
    proton_tree_reduce(const SlotDesc *descs, unsigned char *out) {
  __shared__ unsigned long long sumCycles[kThreads];
  __shared__ unsigned long long sumCount[kThreads];
  __shared__ unsigned sumWarps[kThreads];
  SlotDesc d = descs[blockIdx.x];
  const unsigned *slot = reinterpret_cast<const unsigned *>(d.ptr);
  unsigned hash = slot[0], unitBytes = slot[1], launches = slot[2];
  unsigned *o = reinterpret_cast<unsigned *>(out + 1552ull * blockIdx.x);
  unsigned scopes = unitBytes >= 16 ? (unitBytes - 16) / 16 : 0;
  bool valid = hash != 0 && scopes > 0 && scopes <= kMaxScopes && unitBytes % 16 == 0;
  unsigned perUnit = valid ? scopes + 1 : 1;  // chunks per unit record
  unsigned stride = kThreads / perUnit * perUnit;
  unsigned role = threadIdx.x % perUnit;
  unsigned long long chunks = valid ? (d.bytes - 16) / unitBytes * perUnit : 0;
  const uint4 *units = reinterpret_cast<const uint4 *>(d.ptr + 16);
  // Role 0 sums the headers' unmatched (x) and crossing (y) counts; role s + 1 scope s's
  // cycles (y:x), count (z) and the units that ran it (w).
  unsigned long long cycles = 0, count = 0;
  unsigned warps = 0;
  if (threadIdx.x < stride) {
    for (unsigned long long c = threadIdx.x; c < chunks; c += stride) {
      uint4 v = units[c];
      const unsigned *header = reinterpret_cast<const unsigned *>(units + (c - role));
      if (header[2] == 0) continue;  // this unit (or CTA) did not record
      if (role == 0) {
        cycles += v.x;  // unmatched
        count += v.y;   // crossing
      } else if (v.z != 0) {
        cycles += (static_cast<unsigned long long>(v.y) << 32) | v.x;
        count += v.z;
        warps += v.w;
      }
    }
  }
  sumCycles[threadIdx.x] = cycles;
  sumCount[threadIdx.x] = count;
  sumWarps[threadIdx.x] = warps;
  __syncthreads();
  // Thread r < perUnit adds up role r over the threads that had it.
  if (threadIdx.x < perUnit) {
    cycles = count = 0;
    warps = 0;
    for (unsigned t = threadIdx.x; t < stride; t += perUnit) {
      cycles += sumCycles[t];
      count += sumCount[t];
      warps += sumWarps[t];
    }
  }
  __syncthreads();
  if (threadIdx.x < perUnit) {
    sumCycles[threadIdx.x] = cycles;
    sumCount[threadIdx.x] = count;
    sumWarps[threadIdx.x] = warps;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    o[0] = hash;
    o[1] = valid ? static_cast<unsigned>(sumCycles[0]) : 0;
    o[2] = valid ? static_cast<unsigned>(sumCount[0]) : 0;
    o[3] = launches;
  }
  for (unsigned i = threadIdx.x; i < kMaxScopes; i += kThreads) {
    bool has = valid && i < scopes;
    unsigned *scope = o + 4 + 6 * i;  // 24 bytes, 8-aligned
    *reinterpret_cast<unsigned long long *>(scope) = has ? sumCycles[i + 1] : 0;
    *reinterpret_cast<unsigned long long *>(scope + 2) = has ? sumCount[i + 1] : 0;
    scope[4] = has ? sumWarps[i + 1] : 0;
    scope[5] = 0;
  }
}
