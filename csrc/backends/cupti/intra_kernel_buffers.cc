#include "backends/cupti/intra_kernel_buffers.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/cupti/cupti_loader.h"
#include "backends/kernel_attributor.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

constexpr size_t kTreeSlotBytes =
    instrumentation::kTreeHeaderBytes +
    instrumentation::kTreeStripes * instrumentation::kTreeScopeBytes * instrumentation::kMaxScopes;
constexpr size_t kTreeRingBytes = kTreeSlotBytes * 4096;  // 4096 launches between drains
constexpr size_t kAlign = 256;

struct Pending {
  bool valid = false;
  size_t ring = 0;
  size_t offset = 0;
  size_t bytes = 0;
  bool trace = false;
};
thread_local Pending tlsPending;

Counter &stat(const char *name) { return Stats::global().counter(name); }

}  // namespace

IntraKernelBuffers &IntraKernelBuffers::global() {
  static IntraKernelBuffers *buffers = new IntraKernelBuffers();  // outlives exit handlers
  return *buffers;
}

void IntraKernelBuffers::addUser() {
  std::lock_guard lock(mu_);
  if (users_++ == 0)
    for (const char *name :
         {"instrumentation_launches_unrecorded", "instrumentation_graph_launches_unrecorded",
          "instrumentation_ring_drains", "instrumentation_launches_past_trace_cap"})
      stat(name);
}

void IntraKernelBuffers::removeUser() {
  std::lock_guard lock(mu_);
  if (users_ > 0) --users_;
}

bool IntraKernelBuffers::inUse() const {
  std::lock_guard lock(mu_);
  return users_ > 0;
}

void IntraKernelBuffers::setLimits(uint64_t traceRingBytes, uint64_t maxTraceEvents,
                                   uint32_t traceCapacity) {
  std::lock_guard lock(mu_);
  traceUnitBytes_ = instrumentation::kTraceUnitHeaderBytes + 8 * traceCapacity;
  if (traceRingBytes) traceRingBytes_ = traceRingBytes;
  if (maxTraceEvents) decoder_.setMaxTraceEvents(maxTraceEvents);
}

IntraKernelBuffers::Ring *IntraKernelBuffers::ringFor(const CudaDriverApi &driver,
                                                      CUcontext context, bool trace) {
  for (Ring &r : rings_)
    if (r.context == context) return &r;
  Ring ring;
  ring.context = context;
  ring.capacity = trace ? traceRingBytes_ : kTreeRingBytes;
  CUdevice device = 0;
  if (driver.ctxGetDevice(&device) != CUDA_SUCCESS) return nullptr;
  ring.device = static_cast<int>(device);
  int khz = 0;
  if (driver.deviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) == CUDA_SUCCESS)
    ring.cyclesPerNs = khz / 1e6;
  if (driver.memAlloc(&ring.base, ring.capacity) != CUDA_SUCCESS) {
    std::fprintf(stderr,
                 "[PROTON] could not allocate %zu MB of GPU memory for intra-kernel buffers; "
                 "kernels run without recording (stat instrumentation_launches_unrecorded).\n",
                 ring.capacity >> 20);
    return nullptr;
  }
  if (driver.memsetD8(ring.base, 0, ring.capacity) != CUDA_SUCCESS) return nullptr;
  rings_.push_back(std::move(ring));
  return &rings_.back();
}

IntraKernelBuffers::Alloc IntraKernelBuffers::allocate(const CudaDriverApi &driver, size_t bytes,
                                                       bool trace, uint64_t stream,
                                                       uint64_t *devicePtr) {
  *devicePtr = 0;
  tlsPending.valid = false;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver.streamIsCapturing(reinterpret_cast<CUstream>(stream), &capture) == CUDA_SUCCESS &&
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    stat("instrumentation_graph_launches_unrecorded").add();
    return Alloc::kOff;
  }
  CUcontext context = nullptr;
  if (driver.ctxGetCurrent(&context) != CUDA_SUCCESS || !context) return Alloc::kOff;
  std::lock_guard lock(mu_);
  if (users_ == 0) return Alloc::kOff;
  if (trace && decoder_.traceFull()) {
    // The trace reached its size cap: later launches run without recording (and cost
    // nothing more than the kernel).
    stat("instrumentation_launches_past_trace_cap").add();
    return Alloc::kOff;
  }
  Ring *ring = ringFor(driver, context, trace);
  size_t need = trace ? (bytes + kAlign - 1) / kAlign * kAlign : kTreeSlotBytes;
  if (!ring || need > ring->capacity) {
    stat("instrumentation_launches_unrecorded").add();
    return Alloc::kOff;
  }
  if (ring->used + need > ring->capacity) return Alloc::kFull;
  tlsPending = Pending{true, static_cast<size_t>(ring - rings_.data()), ring->used, need, trace};
  *devicePtr = ring->base + ring->used;
  ring->used += need;
  return Alloc::kOk;
}

void IntraKernelBuffers::bindLaunch(uint64_t correlation, const LaunchEntry *entries, size_t n,
                                    const char *symbol) {
  if (!tlsPending.valid) return;
  Pending p = tlsPending;
  tlsPending.valid = false;
  SlotRecord slot;
  slot.offset = p.offset;
  slot.bytes = p.bytes;
  slot.trace = p.trace;
  slot.symbol = symbol;
  slot.numEntries = static_cast<uint32_t>(std::min<size_t>(n, LaunchInfo::kMaxEntries));
  for (uint32_t i = 0; i < slot.numEntries; ++i) slot.entries[i] = entries[i];
  std::lock_guard lock(mu_);
  if (p.ring >= rings_.size()) return;
  rings_[p.ring].slots.push_back(slot);
  byCorrelation_[correlation] = {p.ring, rings_[p.ring].slots.size() - 1};
}

void IntraKernelBuffers::noteKernel(uint64_t correlation, uint64_t startNs) {
  std::lock_guard lock(mu_);
  auto it = byCorrelation_.find(correlation);
  if (it == byCorrelation_.end()) return;
  rings_[it->second.first].slots[it->second.second].startNs = startNs;
}

size_t kernelTargets(const LaunchEntry *entries, size_t n, const char *symbol,
                     instrumentation::IntraTarget *out) {
  StringId name = StringTable::global().intern(readableKernelName(symbol));
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const LaunchEntry &e = entries[i];
    NodeId node = e.named ? e.node : e.session->child(e.phase, e.node, name);
    if (node != kNoNode) out[count++] = {e.session, e.phase, node};
  }
  return count;
}

void IntraKernelBuffers::fileSlot(const Ring &ring, const SlotRecord &slot, const uint8_t *data) {
  instrumentation::IntraTarget targets[LaunchInfo::kMaxEntries];
  size_t n = kernelTargets(slot.entries, slot.numEntries, slot.symbol, targets);
  instrumentation::IntraLaunch launch{targets, n, ring.device, slot.startNs, ring.cyclesPerNs};
  if (!slot.trace) {
    decoder_.fileTree(data, slot.bytes, launch);
    return;
  }
  decoder_.fileTrace(data, slot.bytes, traceUnitBytes_, launch);
}

void IntraKernelBuffers::drain(const CudaDriverApi &driver) {
  std::lock_guard lock(mu_);
  std::vector<uint8_t> host;
  for (Ring &ring : rings_) {
    if (ring.used == 0) continue;
    stat("instrumentation_ring_drains").add();
    host.resize(ring.used);
    if (driver.ctxPushCurrent(ring.context) != CUDA_SUCCESS) continue;
    bool copied = driver.memcpyDtoH(host.data(), ring.base, ring.used) == CUDA_SUCCESS;
    if (copied) driver.memsetD8(ring.base, 0, ring.used);
    CUcontext popped;
    driver.ctxPopCurrent(&popped);
    if (copied) {
      for (const SlotRecord &slot : ring.slots) fileSlot(ring, slot, host.data() + slot.offset);
    }
    ring.slots.clear();
    ring.used = 0;
  }
  byCorrelation_.clear();
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
