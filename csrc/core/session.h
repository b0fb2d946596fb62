// Session: one profile being recorded, with its options, its phases and its metric types.
//
//   Session s(SessionId{0}, options);
//   PhaseId p = s.currentPhase();
//   NodeId n = s.child(p, kRootNode, strings.intern("step"));
//   PROTON_RETURN_IF_ERROR(s.addMetrics(p, n, metrics));
//
// Thread-safe: every data access takes the session's own mutex (never shared with another
// session). The active flag is one relaxed atomic. Phases are kept in ascending order; the
// last one is current.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/options.h"
#include "core/profile_data.h"
#include "core/stats.h"

namespace proton {

class Session {
 public:
  Session(SessionId id, SessionOptions options);

  SessionId id() const { return id_; }
  const SessionOptions &options() const { return options_; }
  uint64_t startTimeUnixNs() const { return startTimeUnixNs_; }
  // The stats table when the session started: its profile counts the losses since then.
  const Stats::Snapshot &statsAtStart() const { return statsAtStart_; }

  bool active() const { return active_.load(std::memory_order_relaxed); }
  void setActive(bool on) { active_.store(on, std::memory_order_relaxed); }

  PhaseId currentPhase() const { return PhaseId{currentPhase_.load(std::memory_order_acquire)}; }
  // Changes whenever node ids resolved earlier stop being valid for the current phase
  // (a phase advance, or clearing the current phase).
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // The child of parent in the given phase, created on first use; kNoNode if the phase is gone.
  NodeId child(PhaseId phase, NodeId parent, StringId name);

  // Fails, changing nothing, if a metric's value cannot be kept under the type recorded for
  // its name (a string against a number, say). Numbers convert: see fitMetric.
  Status checkMetricTypes(const MetricList &metrics) const;
  // Checks types, then adds every metric to the node (tree data) or nothing if phase is gone.
  Status addMetrics(PhaseId phase, NodeId node, const MetricList &metrics);
  void addKernel(PhaseId phase, NodeId node, uint64_t durationNs, int32_t device, DeviceType type);
  // Trace data: one slice. Metrics are type-checked like addMetrics. index (optional)
  // receives the slice's number in its phase, for addEventMetrics.
  Status addEvent(PhaseId phase, TraceEvent event, const MetricList &metrics,
                  uint32_t *index = nullptr);
  // Trace data: slices with no user metrics (warp slices carry theirs in the event), under one
  // lock: a drain files thousands per launch.
  void addEvents(PhaseId phase, const TraceEvent *events, size_t n);
  // Trace data: metrics added to a slice added earlier (a tensor metric read back at flush).
  Status addEventMetrics(PhaseId phase, uint32_t index, const MetricList &metrics);
  // Checks the types and records them for the metrics' names, adding no value (a tensor
  // metric's type is known when it is given, its value only at flush).
  Status declareMetricTypes(const MetricList &metrics);
  // Trace data: one device slice (kernel) on a device lane; dropped and counted like
  // addKernel when its phase or node is gone.
  void addDeviceEvent(PhaseId phase, const TraceEvent &event, DeviceType type, int32_t device);

  PhaseId advancePhase();
  // Complete: an earlier phase than the current one, with no device work still in flight.
  bool isPhaseComplete(PhaseId phase) const;
  // Device work launched in a phase and not yet delivered (backends call these; lock-free).
  // Raised on the launching thread, lowered on the record thread: two counts on two cache
  // lines, so a launch does not pull a line the record thread just wrote (and back).
  void notePending(PhaseId phase, int64_t delta) {
    size_t i = phase.value % kPendingRing;
    if (delta >= 0)
      pendingAdded_.counts[i].fetch_add(delta, std::memory_order_acq_rel);
    else
      pendingSettled_.counts[i].fetch_add(-delta, std::memory_order_acq_rel);
  }
  int64_t pendingIn(PhaseId phase) const {
    size_t i = phase.value % kPendingRing;
    // Settled first: every launch settled by then was added before, so the difference never
    // undercounts what is still in flight.
    int64_t settled = pendingSettled_.counts[i].load(std::memory_order_acquire);
    return pendingAdded_.counts[i].load(std::memory_order_acquire) - settled;
  }
  // Drops one phase, or every phase up to and including it. Clearing the current phase
  // replaces it with an empty one.
  void clear(PhaseId phase, bool upTo);
  std::vector<PhaseId> phaseIds() const;
  // Periodic flushing: removes and returns every complete phase (oldest first); records that
  // arrive for one later are counted as kernel_records_for_cleared_phase. restorePhase puts
  // one back (its file could not be written), keeping phases in order.
  std::vector<std::unique_ptr<PhaseData>> takeCompletePhases();
  void restorePhase(std::unique_ptr<PhaseData> phase);
  // After the final flush: device work launched and never delivered, summed over the phases
  // still held, and forgotten (so a second finalize does not count it again).
  int64_t abandonPending();
  // Frees all recorded data (after finalize); the object stays as a tombstone.
  void releaseData();

  // Runs f(const PhaseData&) under the session lock; false if the phase does not exist.
  template <typename F>
  bool readPhase(PhaseId phase, F &&f) const {
    std::lock_guard lock(mu_);
    const PhaseData *p = findPhase(phase);
    if (!p) return false;
    f(*p);
    return true;
  }

  // Names of user metrics by aggregation, for the profile metadata.
  void metricAggregations(std::vector<std::string> &exclusive,
                          std::vector<std::string> &property) const;

 private:
  PhaseData *findPhase(PhaseId phase);
  const PhaseData *findPhase(PhaseId phase) const;
  Status checkMetricTypesLocked(const MetricList &metrics) const;
  // Brings `metrics` to the types recorded for their names (fitMetric), widening a metric to
  // float where a fractional value meets it, and records the types of new names. `metrics`
  // is used as it is when nothing needs converting, else copied into `scratch`; the list to
  // add is returned. Fails, changing nothing, on a conflict.
  Status normalizeMetricsLocked(const MetricList &metrics, MetricList &scratch,
                                const MetricList *&use);

  // In-flight device work by phase, in a ring: a phase shares its counter with the phase
  // kPendingRing later, which can only make a completion report later, never early.
  static constexpr size_t kPendingRing = 64;
  struct alignas(64) PendingCounts {
    std::array<std::atomic<int64_t>, kPendingRing> counts{};
  };
  PendingCounts pendingAdded_;
  PendingCounts pendingSettled_;

  const SessionId id_;
  const SessionOptions options_;
  const uint64_t startTimeUnixNs_;
  const Stats::Snapshot statsAtStart_;
  std::atomic<bool> active_{false};
  std::atomic<uint64_t> currentPhase_{0};
  std::atomic<uint64_t> epoch_{1};

  // On a cache line of its own: the record thread takes it per batch of records, while every
  // launch reads active_ and epoch_ above.
  alignas(64) mutable std::mutex mu_;
  std::deque<std::unique_ptr<PhaseData>> phases_;
  struct MetricInfo {
    MetricType type;
    MetricAggregation aggregation;
  };
  std::unordered_map<StringId, MetricInfo> metricInfo_;
};

}  // namespace proton
