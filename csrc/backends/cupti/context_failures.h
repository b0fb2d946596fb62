// GPU contexts whose work failed. An illegal address, a device-side assert or a launch failure
// leaves its context unusable: every later call in it returns the same error, so nothing
// Proton had not read back from it yet (CUPTI's kernel timestamps, intra-kernel records) can
// be read any more. Proton cannot keep that data; it says so, once per context, naming the
// error, rather than leave a profile whose kernels lack times without a word.
#pragma once

#include <cuda.h>

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

struct CudaDriverApi;

// Whether `result` of a synchronisation says that the context's work failed (the errors CUDA
// documents as leaving the process's context unusable).
bool endsContextWork(CUresult result) noexcept;

// The result of a synchronisation Proton made of `context` (current on the calling thread).
// A failure is counted in gpu_contexts_failed and said on stderr, once per context. The error
// stays the program's to see: nothing here changes or clears it. Returns `result`.
CUresult noteContextSync(const CudaDriverApi &driver, CUcontext context, CUresult result) noexcept;

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
