// proton/instrument.cuh: scopes inside CUDA C++ kernels, recorded by a Proton session with
// backend="instrumentation" (cycles per scope in the tree, a timeline of every warp in a trace).
//
//   #include <proton/instrument.cuh>       // nvcc -I$(python -c "import proton; print(proton.get_include())")
//   __global__ void gemm(...) {
//     { PROTON_SCOPE("load"); ... }        // block-scoped guard
//     proton::enter_scope("mma"); ...; proton::exit_scope("mma");
//   }
//
// Names are string literals (their address identifies them; Proton reads the text once).
// Lane 0 of each warp records an event [launch, name, clock, globaltimer, CTA, warp, SM] into
// a per-device buffer that Proton hands to this module when one of its kernels is launched in
// a session. Outside a session the buffer pointer is null and each call is one load and a
// predicated-off branch. Events beyond the buffer's capacity are counted, not written.
//
// Thread-safety: device code; every warp records independently. The per-module pointer is
// written by Proton's launch callback before the kernel runs.
#pragma once

#include <cstdint>

namespace proton {
namespace device {

// Layout shared with csrc/backends/gpu/native_scopes.cc (48 bytes per event).
struct Event {
  unsigned long long grid;         // %gridid: the launch
  unsigned long long name;         // address of the scope's name literal
  unsigned long long clock;        // %clock64
  unsigned long long globaltimer;  // %globaltimer (ns)
  unsigned int cta;                // linear block index
  unsigned int where;              // sm << 16 | warp << 1 | exit
  unsigned long long pad;
};

struct Control {
  Event *events;              // null: not recording
  unsigned long long capacity;
  unsigned long long head;    // events claimed (may exceed capacity: the excess is lost)
};

}  // namespace device
}  // namespace proton

extern "C" {
// One per CUDA module; Proton finds it by name in each module it sees. A whole-program build
// makes a module of each translation unit: the global is its own. With relocatable device code
// (nvcc -rdc=true, CMake's CUDA_SEPARABLE_COMPILATION) the units linked into one module share
// one weak definition: a static one would be renamed per unit, and not found.
#ifdef __CUDACC_RDC__
#if __cplusplus < 201703L
#error "proton/instrument.cuh with relocatable device code (-rdc=true) needs C++17 or later"
#endif
inline __device__ proton::device::Control *proton_instrument_control = nullptr;
#else
static __device__ proton::device::Control *proton_instrument_control = nullptr;
#endif
}

namespace proton {
namespace device {

__device__ __forceinline__ void record(const char *name, unsigned int exit) {
  Control *control = *(Control *volatile *)&proton_instrument_control;
  if (control == nullptr) return;
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane != 0) return;
  unsigned long long clock, timer, grid;
  unsigned int sm;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(clock));
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(timer));
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned long long i = atomicAdd(&control->head, 1ull);
  if (i >= control->capacity || control->events == nullptr) return;
  Event e;
  e.grid = grid;
  e.name = reinterpret_cast<unsigned long long>(name);
  e.clock = clock;
  e.globaltimer = timer;
  e.cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  e.where = (sm << 16) | ((thread / 32) << 1) | exit;
  e.pad = 0;
  control->events[i] = e;
}

}  // namespace device

__device__ __forceinline__ void enter_scope(const char *name) { device::record(name, 0); }
__device__ __forceinline__ void exit_scope(const char *name) { device::record(name, 1); }

// Also usable in __host__ __device__ functions: on the host it records nothing.
struct ScopeGuard {
  const char *name;
  __host__ __device__ explicit ScopeGuard(const char *n) : name(n) {
#ifdef __CUDA_ARCH__
    enter_scope(n);
#endif
  }
  __host__ __device__ ~ScopeGuard() {
#ifdef __CUDA_ARCH__
    exit_scope(name);
#endif
  }
  ScopeGuard(const ScopeGuard &) = delete;
  ScopeGuard &operator=(const ScopeGuard &) = delete;
};

}  // namespace proton

#define PROTON_SCOPE_CONCAT_(a, b) a##b
#define PROTON_SCOPE_NAME_(line) PROTON_SCOPE_CONCAT_(proton_scope_guard_, line)
#define PROTON_SCOPE(name) ::proton::ScopeGuard PROTON_SCOPE_NAME_(__LINE__)(name)
