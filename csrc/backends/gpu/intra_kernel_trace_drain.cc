// IntraKernelBuffers' trace drain: each trace slot of a ring the trace can still keep is read
// back (unit headers, then only the event places the units wrote), its slices counted on a few
// threads to decide the cap, and posted to the filing thread (intra_kernel_buffers.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "core/clock.h"
#include "core/populated_pages.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::gpu {

// One trace slot read back, to be decoded on the filing thread.
struct TraceJob {
  PopulatedPages data;  // read back into at once: its pages are faulted in beforehand
  uint32_t stride = 0;  // bytes per unit in `data`: only the event places the units wrote
  instrumentation::IntraTarget targets[LaunchInfo::kMaxEntries];
  instrumentation::IntraLaunch launch;  // its targets are `targets`
  size_t traces = 0;                    // of them, trace sessions
  std::atomic<uint64_t> slices{0};      // per trace session, before the cap
  std::atomic<bool> countFailed{false};

  // No tree session takes the launch's sums: past the trace's cap, nothing of it is kept.
  bool onlyTraces() const { return traces == launch.numTargets; }
  instrumentation::TraceSlotView view(uint32_t unitBytes) const {
    return {data.data(), data.size(), unitBytes, stride};
  }
};

namespace {
// A drain reads back slots a batch at a time (more than the trace may keep: at most one
// batch is read back for nothing) and counts them in parts of whole CTAs on that many threads.
constexpr size_t kCountBatch = 8;
constexpr size_t kCountBatchBytes = size_t{8} << 20;
constexpr size_t kCountPartBytes = size_t{1} << 20;
constexpr size_t kCountThreads = 8;
}  // namespace

void IntraKernelBuffers::drainTrace(const Driver &driver, const Ring &ring) {
  // Only the slots the trace can still keep are read back: a ring of launches recorded before
  // the trace reached its cap, copied whole, was hundreds of MB read back for nothing. A
  // slot's slices are counted here, where the cap is decided, a batch of slots at a time on
  // as many threads (one slot after another, a million slices took 20 ms of the launching
  // thread's time); they are made and filed on the filing thread, while the program goes on.
  std::vector<const SlotRecord *> slots;
  for (const SlotRecord &slot : ring.slots)
    if (slot.trace && slot.numEntries) slots.push_back(&slot);  // (0: counted as lost)
  for (size_t next = 0; next < slots.size();) {
    std::shared_ptr<TraceJob> batch[kCountBatch];
    size_t n = 0, bytes = 0;
    for (; n < kCountBatch && bytes < kCountBatchBytes && next < slots.size(); ++n, ++next) {
      batch[n] = readTraceSlot(driver, ring, *slots[next]);
      bytes += slots[next]->bytes;
    }
    countSlices(batch, n);
    for (size_t i = 0; i < n; ++i) {
      std::shared_ptr<TraceJob> &job = batch[i];
      if (!job) continue;
      if (job->onlyTraces() && traceCapReached()) {  // filled by a slot before it
        Stats::global().counter("instrumentation_launches_past_trace_cap").add();
        continue;
      }
      if (job->countFailed) {  // no memory to count it in
        Stats::global().counter("instrumentation_launches_unrecorded").add();
        continue;
      }
      try {  // no filing thread
        uint32_t unitBytes = traceUnitBytes_;
        filer_.post(job->data.size(), [this, job, unitBytes] {
          uint64_t t0 = monotonicNs();
          std::lock_guard decoding(decoderMu_);
          decoder_.fileTrace(job->view(unitBytes), job->launch);
          Stats::global()
              .counter("instrumentation_trace_decode_us")
              .add((monotonicNs() - t0) / 1000);
        });
        reservedSlices_ =
            std::min(decoder_.maxTraceEvents(), reservedSlices_ + job->slices * job->traces);
      } catch (const std::exception &) {
        Stats::global().counter("instrumentation_launches_unrecorded").add();
      }
    }
  }
}

std::shared_ptr<TraceJob> IntraKernelBuffers::readTraceSlot(const Driver &driver, const Ring &ring,
                                                            const SlotRecord &slot) {
  try {  // no memory for the copy: the launch is not recorded
    auto job = std::make_shared<TraceJob>();
    job->launch = launchOf(ring, slot, job->targets);
    if (job->launch.numTargets == 0) return nullptr;  // no session wants it (counted there)
    for (size_t t = 0; t < job->launch.numTargets; ++t)
      job->traces += job->targets[t].session->options().data == DataKind::kTrace;
    if (job->onlyTraces() && traceCapReached()) {
      Stats::global().counter("instrumentation_launches_past_trace_cap").add();
      return nullptr;
    }
    if (readWritten(driver, ring.ownStream, ring.base + slot.offset, slot.bytes, *job)) return job;
  } catch (const std::exception &) {
  }
  Stats::global().counter("instrumentation_launches_unrecorded").add();
  return nullptr;
}

bool IntraKernelBuffers::readWritten(const Driver &driver, Stream stream, DevicePtr slot,
                                     size_t bytes, TraceJob &job) {
  // A unit's buffer holds buffer_size events; most units write far fewer (a vector add's
  // warps two of 256). Its header first, then as many event places as any unit wrote.
  const uint32_t unitBytes = traceUnitBytes_, header = instrumentation::kTraceUnitHeaderBytes;
  size_t units = bytes / unitBytes;
  if (units == 0) return false;
  auto copyUnits = [&](void *to, uint32_t width) {
    if (width == unitBytes) return readBack(driver, stream, to, slot, units * unitBytes);
    return driver.memcpy2DDtoHAsync(to, width, slot, unitBytes, width, units, stream) == kSuccess &&
           driver.streamSynchronize(stream) == kSuccess;
  };
  headers_.resize(units * header);
  if (!copyUnits(headers_.data(), header)) return false;
  uint32_t places = 0, capacity = (unitBytes - header) / 8;
  for (size_t u = 0; u < units; ++u) {
    uint32_t written;
    std::memcpy(&written, headers_.data() + u * header + 32, 4);
    places = std::max(places, std::min(written & ~instrumentation::kTraceUnitReturned, capacity));
  }
  job.stride = header + 8 * places;
  job.data = PopulatedPages(units * job.stride);
  return copyUnits(job.data.data(), job.stride);
}

void IntraKernelBuffers::countSlices(std::shared_ptr<TraceJob> *jobs, size_t n) const {
  struct Part {
    TraceJob *job;
    size_t part, parts;
  };
  std::vector<Part> work;
  for (size_t i = 0; i < n; ++i) {
    if (!jobs[i]) continue;
    size_t parts = std::max<size_t>(1, jobs[i]->data.size() / kCountPartBytes);
    for (size_t p = 0; p < parts; ++p) work.push_back({jobs[i].get(), p, parts});
  }
  std::atomic<size_t> next{0};
  auto count = [&]() noexcept {
    for (size_t w; (w = next.fetch_add(1)) < work.size();) {
      TraceJob &job = *work[w].job;
      try {
        job.slices +=
            decoder_.countTraceSlices(job.view(traceUnitBytes_), work[w].part, work[w].parts);
      } catch (const std::exception &) {
        job.countFailed = true;
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min(kCountThreads, work.size()); ++t) {
    try {
      helpers.emplace_back(count);
    } catch (const std::exception &) {
      break;  // no more threads: the ones there and this one count the rest
    }
  }
  count();
  for (std::thread &helper : helpers) helper.join();
}

}  // namespace proton::gpu
