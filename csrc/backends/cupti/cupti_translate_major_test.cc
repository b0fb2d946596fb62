// translateKernel of each CUPTI major, built once per major against that major's headers
// (suites CuptiTranslateMajor12 and CuptiTranslateMajor13): the record struct that major's
// CUPTI delivers is filled field by field and must come out as the same neutral KernelRecord.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cupti/cupti_translate.h"

#define PROTON_CAT_(a, b) a##b
#define PROTON_CAT(a, b) PROTON_CAT_(a, b)
#define SUITE PROTON_CAT(CuptiTranslateMajor, PROTON_CUPTI_MAJOR)

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

// Fills the fields every kernel record version shares, then poisons what follows them, as a
// newer record of the same major would carry data there.
template <typename Record>
Record filled(CUpti_ActivityKind kind) {
  Record r;
  std::memset(&r, 0xA5, sizeof(r));
  r.kind = kind;
  r.start = 1000;
  r.end = 1750;
  r.deviceId = 3;
  r.streamId = 41;
  r.correlationId = 123456;
  r.name = "matmul_kernel";
  r.graphNodeId = 0x1122334455667788ull;
  r.gridId = 77;
  r.contextId = 6;
  return r;
}

template <typename Record>
void expectTranslated(const Record &r) {
  KernelRecord out;
  ASSERT_TRUE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&r), out));
  EXPECT_EQ(out.correlation, 123456u);
  EXPECT_EQ(out.startNs, 1000u);
  EXPECT_EQ(out.endNs, 1750u);
  EXPECT_EQ(out.device, 3);
  EXPECT_EQ(out.stream, 41u);
  EXPECT_STREQ(out.name, "matmul_kernel");
  EXPECT_EQ(out.graphNodeId, 0x1122334455667788ull);
  EXPECT_EQ(out.gridId, 77);
  EXPECT_EQ(out.context, 6u);
  EXPECT_EQ(out.deviceType, DeviceType::kCuda);
}

TEST(SUITE, TheRecordThisMajorDeliversIsTheOneTranslated) {
#if PROTON_CUPTI_MAJOR == 12
  static_assert(std::is_same_v<KernelActivity, CUpti_ActivityKernel9>);
#else
  static_assert(std::is_same_v<KernelActivity, CUpti_ActivityKernel10>);
#endif
  expectTranslated(filled<KernelActivity>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  expectTranslated(filled<KernelActivity>(CUPTI_ACTIVITY_KIND_KERNEL));
}

TEST(SUITE, CudaTwelvesLayoutReadsTheSame) {
  expectTranslated(filled<CUpti_ActivityKernel9>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

#if PROTON_CUPTI_MAJOR >= 13 && CUPTI_API_VERSION >= 130500
TEST(SUITE, LaterThirteenRecordsReadTheSame) {
  expectTranslated(filled<CUpti_ActivityKernel11>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  expectTranslated(filled<CUpti_ActivityKernel12>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  expectTranslated(filled<CUpti_ActivityKernel13>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}
#endif

TEST(SUITE, OtherKindsAreNotKernels) {
  KernelActivity r = filled<KernelActivity>(CUPTI_ACTIVITY_KIND_MEMCPY);
  KernelRecord out;
  out.correlation = 7;
  EXPECT_FALSE(translateKernel(reinterpret_cast<const CUpti_Activity *>(&r), out));
  EXPECT_EQ(out.correlation, 7u);  // untouched
}

TEST(SUITE, LaunchCallbacksAreThisMajorsIds) {
  std::vector<CUpti_CallbackId> driver(kDriverLaunchCallbacks,
                                       kDriverLaunchCallbacks + kNumDriverLaunchCallbacks);
  EXPECT_NE(std::find(driver.begin(), driver.end(), CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel),
            driver.end());
  EXPECT_TRUE(isGraphLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  EXPECT_TRUE(
      isGraphLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  EXPECT_FALSE(isGraphLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
}

}  // namespace
}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
