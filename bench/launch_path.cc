// Nanoseconds per kernel launch on Proton's CUPTI launch path, no GPU needed: real
// CUpti_CallbackData structs through LaunchTracker (enter and exit of a driver launch) into a
// live tree session, alone and with a second thread resolving the launches in batches, as
// CUPTI's record thread does when a buffer of records arrives. Timings are printed, never
// asserted. Built with the C++ tests:
//
//   cmake --build build/tests --target proton_launch_path && build/tests/proton_launch_path
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "backends/capture_registry.h"
#include "backends/cupti/cupti_graphs.h"
#include "backends/launch_table.h"
#include "core/metric.h"
#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace {

using proton::LaunchInfo;
using proton::LaunchTable;

// Launches n times on this thread; with a resolver, another thread settles them every 200 us,
// 64 launches behind. Returns ns per launch on the launching thread. With metadata, each
// launch first gets launch metadata (a name and two metrics), as a Triton kernel with
// launch_metadata does under hook="triton".
double launchNs(proton::cupti::LaunchTracker &tracker, LaunchTable &table, int n, bool resolver,
                const proton::MetricList *metadata = nullptr) {
  proton::StringId name = proton::StringTable::global().intern("vadd_4096");
  std::atomic<uint64_t> published{0};
  std::atomic<bool> stop{false};
  std::thread record;
  if (resolver)
    record = std::thread([&] {
      uint64_t next = 1;
      while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        uint64_t upto = published.load(std::memory_order_acquire);
        for (LaunchInfo info; next + 64 <= upto; ++next) table.resolve(next, info);
      }
    });
  int result = 0;  // CUDA_SUCCESS
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= n; ++i) {
    if (metadata) proton::SessionManager::global().pushLaunchMetadata(name, *metadata);
    CUpti_CallbackData cb{};
    cb.correlationId = static_cast<uint32_t>(i);
    cb.functionReturnValue = &result;
    cb.callbackSite = CUPTI_API_ENTER;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
    cb.callbackSite = CUPTI_API_EXIT;
    tracker.onLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cb);
    if ((i & 255) == 0) published.store(i, std::memory_order_release);
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  stop = true;
  if (record.joinable()) record.join();
  if (!resolver)
    for (int i = 1; i <= n; ++i) {
      LaunchInfo info;
      table.resolve(i, info);
    }
  return ns;
}

}  // namespace

int main() {
  LaunchTable table;
  proton::CaptureRegistry captures;
  proton::cupti::LaunchTracker tracker(table, captures);
  proton::SessionOptions options;
  options.path = "/tmp/proton_launch_path_bench";
  auto started = proton::SessionManager::global().start(options);
  if (!started.isOk()) {
    std::fprintf(stderr, "%s\n", started.status().message().c_str());
    return 1;
  }
  const int n = 2000000;
  proton::MetricList metadata = {{proton::MetricSpec::parse("flops32"), int64_t{4096}},
                                 {proton::MetricSpec::parse("bytes"), int64_t{12 * 4096}}};
  for (int round = 0; round < 3; ++round) {
    std::printf("launch path: %.1f ns alone, %.1f ns with a record thread resolving\n",
                launchNs(tracker, table, n, false), launchNs(tracker, table, n, true));
    std::printf("  with launch metadata: %.1f ns alone, %.1f ns with a record thread\n",
                launchNs(tracker, table, n / 4, false, &metadata),
                launchNs(tracker, table, n / 4, true, &metadata));
  }
  proton::SessionManager::global().finalize(started.value().id, "", nullptr);
  return 0;
}
