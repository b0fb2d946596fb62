#include "core/session.h"

#include "core/clock.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton {

Session::Session(SessionId id, SessionOptions options)
    : id_(id),
      options_(std::move(options)),
      startTimeUnixNs_(wallClockNs()),
      statsAtStart_(Stats::global().snapshot()) {
  phases_.push_back(std::make_unique<PhaseData>(PhaseId{0}));
}

PhaseData *Session::findPhase(PhaseId phase) {
  for (auto &p : phases_)
    if (p->id() == phase) return p.get();
  return nullptr;
}

const PhaseData *Session::findPhase(PhaseId phase) const {
  return const_cast<Session *>(this)->findPhase(phase);
}

NodeId Session::child(PhaseId phase, NodeId parent, StringId name) {
  std::lock_guard lock(mu_);
  PhaseData *p = findPhase(phase);
  if (!p || parent.value >= p->tree.size()) return kNoNode;
  return p->tree.child(parent, name);
}

namespace {

Status typeConflict(StringId name, MetricType current, MetricType next) {
  return Status{StatusCode::kMetricType, "[PROTON] Metric value type mismatch for '" +
                                             std::string(StringTable::global().view(name)) +
                                             "': current=" + metricTypeName(current) +
                                             ", new=" + metricTypeName(next)};
}

}  // namespace

Status Session::checkMetricTypesLocked(const MetricList &metrics) const {
  // Types only: no value is copied (this runs for every launch's metadata metrics).
  for (size_t i = 0; i < metrics.size(); ++i) {
    const NamedMetric &m = metrics[i];
    MetricType type = ruledTypeOf(m);
    auto it = metricInfo_.find(m.spec.name);
    if (it != metricInfo_.end() && typesConflict(it->second.type, type))
      return typeConflict(m.spec.name, it->second.type, type);
    // The same name twice in one list ("a" and "a (exc)") must agree as well.
    for (size_t j = 0; j < i; ++j) {
      if (metrics[j].spec.name != m.spec.name) continue;
      MetricType earlier = ruledTypeOf(metrics[j]);
      if (typesConflict(earlier, type)) return typeConflict(m.spec.name, earlier, type);
    }
  }
  return {};
}

Status Session::normalizeMetricsLocked(const MetricList &metrics, MetricList &scratch,
                                       const MetricList *&use) {
  PROTON_RETURN_IF_ERROR(checkMetricTypesLocked(metrics));
  use = &metrics;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const NamedMetric &m = metrics[i];
    auto it = metricInfo_.find(m.spec.name);
    MetricType given = metricTypeOf(m.value);
    if (ruledTypeOf(m) == given && (it == metricInfo_.end() || it->second.type == given)) {
      if (it == metricInfo_.end())
        metricInfo_.emplace(m.spec.name, MetricInfo{given, m.spec.aggregation});
      continue;
    }
    if (use == &metrics) {
      scratch = metrics;
      use = &scratch;
    }
    NamedMetric &n = scratch[i];
    applyTypeRule(n.spec.typeRule, n.value);
    if (it == metricInfo_.end()) {
      metricInfo_.emplace(n.spec.name, MetricInfo{metricTypeOf(n.value), n.spec.aggregation});
      continue;
    }
    switch (fitMetric(it->second.type, n.value)) {
      case MetricFit::kSame:
        break;
      case MetricFit::kConvert:
        convertMetricValue(n.value, it->second.type);
        break;
      case MetricFit::kWiden:
        it->second.type = MetricType::kFloat;
        for (auto &p : phases_) p->widenToFloat(n.spec.name);
        for (size_t j = 0; j < i; ++j)
          if (scratch[j].spec.name == n.spec.name)
            convertMetricValue(scratch[j].value, MetricType::kFloat);
        break;
      case MetricFit::kConflict:
        PROTON_CHECK(false);  // excluded by checkMetricTypesLocked
    }
  }
  return {};
}

Status Session::checkMetricTypes(const MetricList &metrics) const {
  std::lock_guard lock(mu_);
  return checkMetricTypesLocked(metrics);
}

Status Session::addMetrics(PhaseId phase, NodeId node, const MetricList &given) {
  std::lock_guard lock(mu_);
  MetricList scratch;
  const MetricList *metrics = nullptr;
  PROTON_RETURN_IF_ERROR(normalizeMetricsLocked(given, scratch, metrics));
  PhaseData *p = findPhase(phase);
  if (!p || node.value >= p->tree.size()) return {};
  FlexMetrics &flex = p->flexAt(node);
  for (const NamedMetric &m : *metrics) flex.add(m);
  return {};
}

namespace {
void countClearedPhaseRecord() {
  static Counter &dropped = Stats::global().counter("kernel_records_for_cleared_phase");
  dropped.add();
}
}  // namespace

void Session::addKernel(PhaseId phase, NodeId node, uint64_t durationNs, int32_t device,
                        DeviceType type) {
  std::lock_guard lock(mu_);
  PhaseData *p = findPhase(phase);
  if (!p || node.value >= p->tree.size()) return countClearedPhaseRecord();
  p->kernelAt(node).add(durationNs, device, type);
  p->noteDevice(type, device);
}

void Session::addDeviceEvent(PhaseId phase, const TraceEvent &event, DeviceType type,
                             int32_t device) {
  std::lock_guard lock(mu_);
  PhaseData *p = findPhase(phase);
  if (!p || event.context.value >= p->tree.size()) return countClearedPhaseRecord();
  p->addEvent(event);
  p->noteDevice(type, device);
}

Status Session::addEvent(PhaseId phase, TraceEvent event, const MetricList &given,
                         uint32_t *index) {
  std::lock_guard lock(mu_);
  MetricList scratch;
  const MetricList *metrics = nullptr;
  PROTON_RETURN_IF_ERROR(normalizeMetricsLocked(given, scratch, metrics));
  PhaseData *p = findPhase(phase);
  if (!p) return {};
  if (!metrics->empty()) {
    FlexMetrics flex;
    for (const NamedMetric &m : *metrics) flex.add(m);
    event.flexSlot = p->addEventMetrics(std::move(flex));
  }
  if (index) *index = static_cast<uint32_t>(p->events().size());
  p->addEvent(event);
  return {};
}

void Session::addEvents(PhaseId phase, const TraceEvent *events, size_t n) {
  std::lock_guard lock(mu_);
  if (PhaseData *p = findPhase(phase)) p->addEvents(events, n);
}

Status Session::addEventMetrics(PhaseId phase, uint32_t index, const MetricList &given) {
  std::lock_guard lock(mu_);
  MetricList scratch;
  const MetricList *metrics = nullptr;
  PROTON_RETURN_IF_ERROR(normalizeMetricsLocked(given, scratch, metrics));
  PhaseData *p = findPhase(phase);
  if (!p || index >= p->events().size()) return {};
  p->addMetricsToEvent(index, *metrics);
  return {};
}

Status Session::declareMetricTypes(const MetricList &metrics) {
  std::lock_guard lock(mu_);
  MetricList scratch;
  const MetricList *unused = nullptr;
  return normalizeMetricsLocked(metrics, scratch, unused);
}

PhaseId Session::advancePhase() {
  std::lock_guard lock(mu_);
  PhaseId next{currentPhase_.load(std::memory_order_relaxed) + 1};
  phases_.push_back(std::make_unique<PhaseData>(next));
  currentPhase_.store(next.value, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return next;
}

bool Session::isPhaseComplete(PhaseId phase) const {
  std::lock_guard lock(mu_);
  if (phase.value >= currentPhase_.load(std::memory_order_relaxed)) return false;
  return pendingIn(phase) == 0;
}

void Session::clear(PhaseId phase, bool upTo) {
  std::lock_guard lock(mu_);
  PhaseId current{currentPhase_.load(std::memory_order_relaxed)};
  for (auto it = phases_.begin(); it != phases_.end();) {
    PhaseId id = (*it)->id();
    if (id == phase || (upTo && id.value < phase.value)) {
      if (id == current) {
        *it = std::make_unique<PhaseData>(id);
        epoch_.fetch_add(1, std::memory_order_acq_rel);
        ++it;
      } else {
        it = phases_.erase(it);
      }
    } else {
      ++it;
    }
  }
}

std::vector<PhaseId> Session::phaseIds() const {
  std::lock_guard lock(mu_);
  std::vector<PhaseId> ids;
  for (const auto &p : phases_) ids.push_back(p->id());
  return ids;
}

std::vector<std::unique_ptr<PhaseData>> Session::takeCompletePhases() {
  std::lock_guard lock(mu_);
  uint64_t current = currentPhase_.load(std::memory_order_relaxed);
  std::vector<std::unique_ptr<PhaseData>> done;
  for (auto it = phases_.begin(); it != phases_.end();) {
    PhaseId id = (*it)->id();
    if (id.value < current && pendingIn(id) == 0) {
      done.push_back(std::move(*it));
      it = phases_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

void Session::restorePhase(std::unique_ptr<PhaseData> phase) {
  std::lock_guard lock(mu_);
  auto it = phases_.begin();
  while (it != phases_.end() && (*it)->id().value < phase->id().value) ++it;
  phases_.insert(it, std::move(phase));
}

int64_t Session::abandonPending() {
  std::lock_guard lock(mu_);
  int64_t total = 0;
  // Ring slots are shared by phases kPendingRing apart: count each slot once.
  std::array<bool, kPendingRing> seen{};
  for (const auto &p : phases_) {
    size_t slot = p->id().value % kPendingRing;
    if (seen[slot]) continue;
    seen[slot] = true;
    int64_t n = pendingIn(p->id());  // brought back to 0 (as if all settled), counted if > 0
    if (n == 0) continue;
    pendingSettled_.counts[slot].fetch_add(n, std::memory_order_acq_rel);
    if (n > 0) total += n;
  }
  return total;
}

void Session::releaseData() {
  std::lock_guard lock(mu_);
  phases_.clear();
  epoch_.fetch_add(1, std::memory_order_acq_rel);
}

void Session::metricAggregations(std::vector<std::string> &exclusive,
                                 std::vector<std::string> &property) const {
  std::lock_guard lock(mu_);
  for (const auto &[name, info] : metricInfo_) {
    if (info.aggregation == MetricAggregation::kExclusive)
      exclusive.emplace_back(StringTable::global().view(name));
    if (info.aggregation == MetricAggregation::kProperty)
      property.emplace_back(StringTable::global().view(name));
  }
}

}  // namespace proton
