#include "core/profile_data.h"

namespace proton {
namespace {

uint32_t &slotFor(std::vector<uint32_t> &slots, NodeId node) {
  if (node.value >= slots.size()) slots.resize(node.value + 1, PhaseData::kNoSlot);
  return slots[node.value];
}

uint32_t slotOf(const std::vector<uint32_t> &slots, NodeId node) {
  return node.value < slots.size() ? slots[node.value] : PhaseData::kNoSlot;
}

}  // namespace

PhaseData::PhaseData(PhaseId id) : id_(id) {}

KernelMetric &PhaseData::kernelAt(NodeId node) {
  uint32_t &slot = slotFor(kernelSlot_, node);
  if (slot == kNoSlot) {
    slot = static_cast<uint32_t>(kernels_.size());
    kernels_.emplace_back();
  }
  return kernels_[slot];
}

FlexMetrics &PhaseData::flexAt(NodeId node) {
  uint32_t &slot = slotFor(flexSlot_, node);
  if (slot == kNoSlot) {
    slot = static_cast<uint32_t>(flex_.size());
    flex_.emplace_back();
  }
  return flex_[slot];
}

const KernelMetric *PhaseData::kernel(NodeId node) const {
  uint32_t slot = slotOf(kernelSlot_, node);
  return slot == kNoSlot ? nullptr : &kernels_[slot];
}

const FlexMetrics *PhaseData::flex(NodeId node) const {
  uint32_t slot = slotOf(flexSlot_, node);
  return slot == kNoSlot ? nullptr : &flex_[slot];
}

uint32_t PhaseData::addEventMetrics(FlexMetrics metrics) {
  flex_.push_back(std::move(metrics));
  return static_cast<uint32_t>(flex_.size() - 1);
}

void PhaseData::addMetricsToEvent(uint32_t index, const MetricList &metrics) {
  TraceEvent &event = events_[index];
  if (event.flexSlot == kNoSlot) event.flexSlot = addEventMetrics(FlexMetrics{});
  for (const NamedMetric &m : metrics) flex_[event.flexSlot].add(m);
}

}  // namespace proton
