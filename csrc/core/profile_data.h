// PhaseData: everything one session records during one phase.
//
//   PhaseData phase(PhaseId{0});
//   NodeId n = phase.tree.child(kRootNode, strings.intern("step"));
//   phase.kernelAt(n).add(1200, /*device*/ 0, DeviceType::kCuda);
//
// Tree data accumulates metrics on context nodes; trace data appends events that point at
// the context node holding their call stack. Writers read it through const accessors; it
// never serialises itself. Not thread-safe: the owning Session serialises access.
//
// Per-node metric storage (parallel to the tree's node vector, grown lazily):
//   kernelSlot_[node] -> index into kernels_   (kNoSlot when the node ran no kernel)
//   flexSlot_[node]   -> index into flex_      (kNoSlot when the node has no user metric)
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <vector>

#include "core/chunked_vector.h"
#include "core/context_tree.h"
#include "core/metric.h"

namespace proton {

// Where a trace event is drawn.
struct Lane {
  // kWarp: one warp (or the first warp of a recording unit) of one CTA, inside kernels.
  enum class Kind : uint8_t { kCpuThread, kGpuStream, kWarp } kind = Kind::kCpuThread;
  uint32_t device = 0;  // GPU lanes
  uint64_t id = 0;      // OS thread id, stream id, or warpLaneId(cta, warp)

  static uint64_t warpLaneId(uint32_t cta, uint32_t warp) { return uint64_t{cta} << 16 | warp; }
  static uint32_t ctaOf(uint64_t id) { return static_cast<uint32_t>(id >> 16); }
  static uint32_t warpOf(uint64_t id) { return static_cast<uint32_t>(id & 0xffff); }
};

struct TraceEvent {
  StringId name;
  NodeId context;  // call stack: path from ROOT to this node (for CPU scopes, the scope itself)
  Lane lane;
  uint64_t beginNs = 0;
  uint64_t endNs = 0;
  uint32_t flexSlot = UINT32_MAX;  // user metrics attached to the event
  uint32_t sm = 0;                 // warp slices only: the SM the warp ran on (an arg)
  // GPU events only: the launch on the CPU side, for launch->kernel flow arrows. Warp slices:
  // launchNs is the kernel's start, which tells launches of one kernel apart.
  uint64_t launchNs = 0;
  uint64_t launchThread = 0;
  uint64_t correlation = 0;
  uint64_t cycles = 0;      // warp slices only: the scope's cycles (an arg)
  NodeId kernel = kNoNode;  // warp slices only: the launch's kernel node
  // Warp slices only: one end of an event started in one warp and ended in another (nonzero:
  // the link both ends share; linkEnd: this is the end).
  uint64_t link = 0;
  bool linkEnd = false;
};

class PhaseData {
 public:
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  explicit PhaseData(PhaseId id);

  PhaseId id() const { return id_; }
  ContextTree tree;

  KernelMetric &kernelAt(NodeId node);
  FlexMetrics &flexAt(NodeId node);
  const KernelMetric *kernel(NodeId node) const;
  const FlexMetrics *flex(NodeId node) const;
  bool hasKernelMetrics() const { return !kernels_.empty(); }

  void addEvent(const TraceEvent &event) { events_.push_back(event); }
  void addEvents(const TraceEvent *events, size_t n) { events_.append(events, n); }
  uint32_t addEventMetrics(FlexMetrics metrics);
  // Makes every int value of metric `name`, on nodes and events, a float.
  void widenToFloat(StringId name) {
    for (FlexMetrics &f : flex_) f.widenToFloat(name);
  }
  // Adds metrics to event number `index` (which must exist), giving it a slot if it has none.
  void addMetricsToEvent(uint32_t index, const MetricList &metrics);
  const ChunkedVector<TraceEvent> &events() const { return events_; }
  const FlexMetrics &eventMetrics(uint32_t slot) const { return flex_[slot]; }

  // Devices that ran something recorded in this phase, by type.
  void noteDevice(DeviceType type, int32_t device) { devices_[type].insert(device); }
  const std::map<DeviceType, std::set<int32_t>> &devices() const { return devices_; }

 private:
  PhaseId id_;
  std::vector<uint32_t> kernelSlot_;
  std::vector<uint32_t> flexSlot_;
  std::vector<KernelMetric> kernels_;
  std::vector<FlexMetrics> flex_;
  ChunkedVector<TraceEvent> events_;
  std::map<DeviceType, std::set<int32_t>> devices_;
};

}  // namespace proton
