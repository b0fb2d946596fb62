// A context whose work failed is said once, naming the error, and counted; other results of a
// synchronisation (success, a context already gone, a driver shutting down) say nothing.
#include "backends/cupti/context_failures.h"

#include <gtest/gtest.h>

#include <string>

#include "backends/cupti/cupti_loader.h"
#include "core/stats.h"

namespace proton::cupti {
namespace {

uint64_t failed() { return Stats::global().counter("gpu_contexts_failed").value(); }

// A CUDA driver with no GPU whose calling thread has `current` as its context, on GPU 0.
CUcontext gCurrent = nullptr;
CUresult contextDevice(CUdevice *device) {
  *device = 0;
  return gCurrent ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
CudaDriverApi driverWithCurrent(CUcontext current) {
  gCurrent = current;
  CudaDriverApi driver;
  driver.ctxGetDevice = contextDevice;
  return driver;
}

CUresult errorName(CUresult result, const char **name) {
  *name = result == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" : "CUDA_ERROR_ASSERT";
  return CUDA_SUCCESS;
}

CUresult errorString(CUresult, const char **what) {
  *what = "an illegal memory access was encountered";
  return CUDA_SUCCESS;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Before, a profile whose context hit an illegal address listed its kernels with no times and
// its intra-kernel records as unrecorded in the stats, and nothing was said.
TEST(ContextFailures, AFailedContextIsSaidOnceNamingItsErrorAndCounted) {
  CudaDriverApi driver = driverWithCurrent(reinterpret_cast<CUcontext>(0x3000));
  driver.getErrorName = errorName;
  driver.getErrorString = errorString;
  const auto first = reinterpret_cast<CUcontext>(0xFA11);
  const auto second = reinterpret_cast<CUcontext>(0xFA12);
  const uint64_t before = failed();

  testing::internal::CaptureStderr();
  EXPECT_EQ(noteContextSync(driver, first, CUDA_ERROR_ILLEGAL_ADDRESS), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(noteContextSync(driver, first, CUDA_ERROR_ILLEGAL_ADDRESS), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(noteContextSync(driver, second, CUDA_ERROR_ASSERT), CUDA_ERROR_ASSERT);
  std::string said = testing::internal::GetCapturedStderr();

  EXPECT_EQ(failed(), before + 2);  // once per context
  EXPECT_EQ(count(said,
                  "[PROTON] the CUDA context of GPU 0 failed (CUDA_ERROR_ILLEGAL_ADDRESS: "
                  "an illegal memory access was encountered)"),
            1u)
      << said;
  EXPECT_EQ(count(said, "failed (CUDA_ERROR_ASSERT"), 1u) << said;
  EXPECT_EQ(count(said, "stat kernel_records_untimed"), 2u) << said;
}

TEST(ContextFailures, OtherResultsOfASynchronisationSayNothing) {
  CudaDriverApi driver = driverWithCurrent(reinterpret_cast<CUcontext>(0x3000));
  const auto context = reinterpret_cast<CUcontext>(0xFA13);
  const uint64_t before = failed();
  testing::internal::CaptureStderr();
  for (CUresult r : {CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_INVALID_CONTEXT,
                     CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED})
    EXPECT_EQ(noteContextSync(driver, context, r), r);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(failed(), before);
  EXPECT_FALSE(endsContextWork(CUDA_ERROR_OUT_OF_MEMORY));  // the context lives on
  EXPECT_TRUE(endsContextWork(CUDA_ERROR_LAUNCH_FAILED));
}

// A driver that cannot name the error (no cuGetErrorName): its number, and no GPU when the
// context cannot say which.
TEST(ContextFailures, AnErrorTheDriverCannotNameIsGivenByItsNumber) {
  CudaDriverApi driver = driverWithCurrent(nullptr);
  testing::internal::CaptureStderr();
  noteContextSync(driver, reinterpret_cast<CUcontext>(0xFA14), CUDA_ERROR_MISALIGNED_ADDRESS);
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("[PROTON] the CUDA context failed (CUDA error 716)"), std::string::npos)
      << said;
}

}  // namespace
}  // namespace proton::cupti
