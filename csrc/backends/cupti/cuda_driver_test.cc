// The neutral driver table over the CUDA driver (cuda_driver.h), through a CUDA driver with no
// GPU: handles keep their addresses (the special streams theirs), enums their values, what a
// call writes reaches the caller, and the tree reduction is tree_reduce.cu's PTX, launched as
// Proton's own kernel.
#include "backends/cupti/cuda_driver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "backends/cupti/cupti_graphs.h"

namespace proton::cupti {
namespace {

// What the calls below were given.
CUstream gStream = nullptr;
CUstreamCaptureMode gModeIn = CU_STREAM_CAPTURE_MODE_GLOBAL;
CUDA_MEMCPY2D gCopy{};
std::string gImage, gFunctionName;
bool gLaunchInternal = false;

CUresult current(CUcontext *context) {
  *context = reinterpret_cast<CUcontext>(0xC0);
  return CUDA_SUCCESS;
}
CUresult capturing(CUstream stream, CUstreamCaptureStatus *status) {
  gStream = stream;
  *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
CUresult captureInfo(CUstream, CUstreamCaptureStatus *status, cuuint64_t *, CUgraph *graph,
                     const CUgraphNode **, size_t *) {
  *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  *graph = reinterpret_cast<CUgraph>(0x6000);
  return CUDA_SUCCESS;
}
CUresult exchange(CUstreamCaptureMode *mode) {
  gModeIn = *mode;
  *mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  return CUDA_SUCCESS;
}
CUresult alloc(CUdeviceptr *ptr, size_t) {
  *ptr = 0x7f0000001000;
  return CUDA_ERROR_OUT_OF_MEMORY;  // written, and the error given back as it is
}
CUresult copy2D(const CUDA_MEMCPY2D *copy, CUstream stream) {
  gCopy = *copy;
  gStream = stream;
  return CUDA_SUCCESS;
}
CUresult loadData(CUmodule *module, const void *image) {
  gImage = static_cast<const char *>(image);
  *module = reinterpret_cast<CUmodule>(0xA0D);
  return CUDA_SUCCESS;
}
CUresult getFunction(CUfunction *function, CUmodule module, const char *name) {
  gFunctionName = name;
  *function =
      module == reinterpret_cast<CUmodule>(0xA0D) ? reinterpret_cast<CUfunction>(0xF0) : nullptr;
  return CUDA_SUCCESS;
}
unsigned gGrid = 0, gBlock = 0;
uint64_t gArgs[3] = {};
int gLoads = 0;
CUstreamCaptureMode gModeAtLoad = CU_STREAM_CAPTURE_MODE_GLOBAL;
CUresult gLaunchResult = CUDA_SUCCESS;
CUresult launch(CUfunction, unsigned gridX, unsigned, unsigned, unsigned blockX, unsigned, unsigned,
                unsigned, CUstream stream, void **args, void **) {
  if (gLaunchResult != CUDA_SUCCESS) return gLaunchResult;
  gLaunchInternal = InternalLaunchGuard::active();
  gStream = stream;
  gGrid = gridX;
  gBlock = blockX;
  if (args)
    for (int i = 0; i < 3; ++i) std::memcpy(&gArgs[i], args[i], 8);
  return CUDA_SUCCESS;
}
CUresult countedLoad(CUmodule *module, const void *image) {
  ++gLoads;
  gModeAtLoad = gModeIn;  // the mode the last exchange asked for
  return loadData(module, image);
}

TEST(CudaDriver, CallsTheCudaDriverWithTheSameHandlesAndValues) {
  static CudaDriverApi cuda;
  cuda.ctxGetCurrent = current;
  cuda.streamIsCapturing = capturing;
  cuda.streamGetCaptureInfo = captureInfo;
  cuda.exchangeCaptureMode = exchange;
  cuda.memAlloc = alloc;
  cuda.memcpy2DAsync = copy2D;
  cuda.moduleLoadData = loadData;
  cuda.moduleGetFunction = getFunction;
  cuda.launchKernel = launch;
  const gpu::Driver &driver = *cudaDriver(&cuda);

  gpu::Context context = nullptr;
  EXPECT_EQ(driver.ctxGetCurrent(&context), gpu::kSuccess);
  EXPECT_EQ(context, reinterpret_cast<gpu::Context>(0xC0));

  gpu::CaptureStatus status = gpu::CaptureStatus::kNone;
  EXPECT_EQ(driver.streamIsCapturing(gpu::kPerThreadStream, &status), gpu::kSuccess);
  EXPECT_EQ(gStream, CU_STREAM_PER_THREAD);
  EXPECT_EQ(status, gpu::CaptureStatus::kActive);
  driver.streamIsCapturing(gpu::kLegacyStream, &status);
  EXPECT_EQ(gStream, CU_STREAM_LEGACY);

  gpu::Graph graph = nullptr;
  ASSERT_NE(driver.streamGetCaptureInfo, nullptr);
  driver.streamGetCaptureInfo(reinterpret_cast<gpu::Stream>(0x7777), &status, &graph);
  EXPECT_EQ(status, gpu::CaptureStatus::kInvalidated);
  EXPECT_EQ(graph, reinterpret_cast<gpu::Graph>(0x6000));

  gpu::CaptureMode mode = gpu::CaptureMode::kRelaxed;
  driver.exchangeCaptureMode(&mode);
  EXPECT_EQ(gModeIn, CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_EQ(mode, gpu::CaptureMode::kThreadLocal);

  gpu::DevicePtr ptr = 0;
  EXPECT_EQ(driver.memAlloc(&ptr, 64), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(ptr, 0x7f0000001000u);

  char rows[4][8];
  const auto own = reinterpret_cast<gpu::Stream>(0x9000);
  driver.memcpy2DDtoHAsync(rows, sizeof(rows[0]), 0x100000, 64, 6, 4, own);
  EXPECT_EQ(gCopy.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(gCopy.srcDevice, 0x100000u);
  EXPECT_EQ(gCopy.srcPitch, 64u);
  EXPECT_EQ(gCopy.dstMemoryType, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(gCopy.dstHost, rows);
  EXPECT_EQ(gCopy.dstPitch, sizeof(rows[0]));
  EXPECT_EQ(gCopy.WidthInBytes, 6u);
  EXPECT_EQ(gCopy.Height, 4u);
  EXPECT_EQ(gStream, reinterpret_cast<CUstream>(0x9000));

  gpu::Function reduce = nullptr;
  EXPECT_EQ(driver.loadTreeReduce(&reduce), gpu::kSuccess);
  EXPECT_NE(gImage.find(".entry proton_tree_reduce"), std::string::npos);
  EXPECT_EQ(gFunctionName, "proton_tree_reduce");
  EXPECT_EQ(reduce, reinterpret_cast<gpu::Function>(0xF0));
  driver.launchKernel(reduce, 1, 1, 1, 256, 1, 1, 0, own, nullptr, nullptr);
  EXPECT_TRUE(gLaunchInternal);  // Proton's own: its launch callback files it nowhere
  EXPECT_FALSE(InternalLaunchGuard::active());
}

// Tensor metric values are copied by proton_metric_copy, loaded once per context, launched as
// a kernel its launch callback files (<metric>), one byte a thread, at most 64 blocks.
TEST(CudaDriver, CopiesMetricValuesWithItsCopyKernelLoadedOncePerContext) {
  static CudaDriverApi cuda;
  cuda.ctxGetCurrent = current;
  cuda.exchangeCaptureMode = exchange;
  cuda.moduleLoadData = countedLoad;
  cuda.moduleGetFunction = getFunction;
  cuda.launchKernel = launch;
  const gpu::Driver &driver = *cudaDriver(&cuda);
  ASSERT_NE(driver.copyKernelAsync, nullptr);
  const auto own = reinterpret_cast<gpu::Stream>(0x9100);
  gLoads = 0;
  EXPECT_EQ(driver.copyKernelAsync(0x2000, 0x1000, 8, own), gpu::kSuccess);
  EXPECT_NE(gImage.find(".entry proton_metric_copy"), std::string::npos);
  EXPECT_EQ(gFunctionName, "proton_metric_copy");
  EXPECT_EQ(gModeAtLoad, CU_STREAM_CAPTURE_MODE_RELAXED);  // loaded in relaxed capture mode
  EXPECT_FALSE(gLaunchInternal);                           // filed: the core names it <metric>
  EXPECT_EQ(gStream, reinterpret_cast<CUstream>(0x9100));
  EXPECT_EQ(gArgs[0], 0x2000u);
  EXPECT_EQ(gArgs[1], 0x1000u);
  EXPECT_EQ(gArgs[2], 8u);
  EXPECT_EQ(gGrid, 1u);
  EXPECT_EQ(gBlock, 128u);
  EXPECT_EQ(driver.copyKernelAsync(0x3000, 0x1000, 1 << 20, own), gpu::kSuccess);
  EXPECT_EQ(gGrid, 64u);
  EXPECT_EQ(gArgs[2], 1u << 20);
  EXPECT_EQ(gLoads, 1);  // the context's function is kept
  // A function the driver no longer knows (its context destroyed, another at its address):
  // the launch fails (the caller copies with memcpy), and the next copy loads it again.
  gLaunchResult = CUDA_ERROR_INVALID_HANDLE;
  EXPECT_EQ(driver.copyKernelAsync(0x3000, 0x1000, 8, own), CUDA_ERROR_INVALID_HANDLE);
  gLaunchResult = CUDA_SUCCESS;
  EXPECT_EQ(driver.copyKernelAsync(0x3000, 0x1000, 8, own), gpu::kSuccess);
  EXPECT_EQ(gLoads, 2);
}

}  // namespace
}  // namespace proton::cupti
