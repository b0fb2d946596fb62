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
// One block per slot. Input descriptor i: { slot address, slot bytes }. Output i (1040 bytes):
//   [ u32 hash | u32 unmatched | u32 crossing | u32 launches added into the slot ]
//   then 64 scopes of [ u64 cycles | u32 count | u32 warps ]
// The ring is cleared after each drain (units that do not record never write their record).
// A record holds one unit's sums or a CTA's (`recorded` units; per scope, the units that ran
// it in the last word), added up over the launches that added into the slot (a CUDA graph's
// replays).
#include <cstdint>

struct SlotDesc {
  unsigned long long ptr;
  unsigned long long bytes;
};

extern "C" __global__ void proton_tree_reduce(const SlotDesc *descs, unsigned char *out) {
  constexpr unsigned kMaxScopes = 64;
  __shared__ unsigned long long cycles[kMaxScopes];
  __shared__ unsigned count[kMaxScopes], warps[kMaxScopes];
  __shared__ unsigned unmatched, crossing;
  SlotDesc d = descs[blockIdx.x];
  const unsigned *slot = reinterpret_cast<const unsigned *>(d.ptr);
  unsigned hash = slot[0], unitBytes = slot[1], launches = slot[2];
  unsigned *o = reinterpret_cast<unsigned *>(out + 1040ull * blockIdx.x);
  for (unsigned i = threadIdx.x; i < kMaxScopes; i += blockDim.x) {
    cycles[i] = 0;
    count[i] = 0;
    warps[i] = 0;
  }
  if (threadIdx.x == 0) unmatched = crossing = 0;
  __syncthreads();
  unsigned scopes = unitBytes >= 16 ? (unitBytes - 16) / 16 : 0;
  if (hash != 0 && scopes > 0 && scopes <= kMaxScopes && unitBytes % 16 == 0) {
    unsigned long long n = (d.bytes - 16) / unitBytes;
    for (unsigned long long u = threadIdx.x; u < n; u += blockDim.x) {
      const unsigned *rec = reinterpret_cast<const unsigned *>(d.ptr + 16 + u * unitBytes);
      uint4 h = *reinterpret_cast<const uint4 *>(rec);
      if (h.z == 0) continue;  // this unit did not record
      atomicAdd(&unmatched, h.x);
      atomicAdd(&crossing, h.y);
      for (unsigned s = 0; s < scopes; ++s) {
        uint4 v = *reinterpret_cast<const uint4 *>(rec + 4 + 4 * s);
        if (v.z == 0) continue;
        atomicAdd(&cycles[s], (static_cast<unsigned long long>(v.y) << 32) | v.x);
        atomicAdd(&count[s], v.z);
        atomicAdd(&warps[s], v.w);  // the units that ran it
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    o[0] = hash;
    o[1] = unmatched;
    o[2] = crossing;
    o[3] = launches;
  }
  for (unsigned i = threadIdx.x; i < kMaxScopes; i += blockDim.x) {
    *reinterpret_cast<unsigned long long *>(o + 4 + 4 * i) = cycles[i];
    o[4 + 4 * i + 2] = count[i];
    o[4 + 4 * i + 3] = warps[i];
  }
}
