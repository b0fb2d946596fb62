// The Hatchet layout, written once for JSON and MessagePack:
//
//   [ root, devices ]
//   node    = {"frame": {"name": str, "type": "function"}, "metrics": {...}, "children": [...]}
//   root    = node + {"proton_metadata": {...}}
//   devices = {"CUDA": {"0": {"arch", "num_sms", "clock_rate", "memory_clock_rate", "bus_width"}}}
//
// Metrics are exclusive per node. Kernel nodes carry "time (ns)", "count", "device_id"
// (string) and "device_type". The root is named ROOT and, when any metric exists, carries
// every numeric scalar metric key that is not exclusive (0 where it has no value of its own),
// so readers see every column. The metadata is one more key of the root node, which llnl-hatchet
// and Triton's viewer (it pops element 1 and hands the rest to hatchet) both ignore. The walk is
// iterative: tree depth is not bounded by the C++ stack.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "writers/encode_common.h"
#include "writers/writer.h"

namespace proton {

template <typename Encoder>
class HatchetEmitter {
 public:
  HatchetEmitter(const ProfileView &view, Encoder &e) : v_(view), e_(e) {}

  void emit() {
    collectRootKeys();
    e_.beginArray(2);
    emitTree();
    emitDevices();
    e_.endArray();
  }

 private:
  const ContextTree &tree() const { return v_.phase.tree; }

  // Numeric scalar metric names present anywhere, in first-seen order, with their zero.
  void collectRootKeys() {
    if (v_.phase.hasKernelMetrics()) {
      rootKeys_.push_back({"time (ns)", MetricType::kInt, StringId{}, true});
      rootKeys_.push_back({"count", MetricType::kInt, StringId{}, true});
    }
    std::map<StringId, bool> seen;
    for (uint32_t i = 0; i < tree().size(); ++i) {
      const FlexMetrics *flex = v_.phase.flex(NodeId{i});
      if (!flex) continue;
      for (const NamedMetric &m : flex->entries) {
        MetricType t = metricTypeOf(m.value);
        if (t != MetricType::kInt && t != MetricType::kFloat) continue;
        // An exclusive metric belongs to its own nodes only: a 0 at ROOT would be a value
        // ROOT does not have (triton.profiler writes none there).
        if (m.spec.aggregation == MetricAggregation::kExclusive) continue;
        if (seen.emplace(m.spec.name, true).second)
          rootKeys_.push_back({std::string(v_.strings.view(m.spec.name)), t, m.spec.name, false});
      }
    }
  }

  size_t childCount(NodeId id) const {
    size_t n = 0;
    for (NodeId c = tree().node(id).firstChild; c != kNoNode; c = tree().node(c).nextSibling) ++n;
    return n;
  }

  void emitMetrics(NodeId id) {
    const KernelMetric *kernel = v_.phase.kernel(id);
    const FlexMetrics *flex = v_.phase.flex(id);
    std::vector<const RootKey *> zeros;
    if (id == kRootNode) {
      for (const RootKey &k : rootKeys_) {
        bool own = k.kernelKey ? kernel != nullptr : (flex && flex->find(k.flexName));
        if (!own) zeros.push_back(&k);
      }
    }
    size_t n = zeros.size() + (kernel ? 4 : 0) + (flex ? flex->entries.size() : 0);
    e_.beginMap(n);
    if (kernel) {
      e_.key("time (ns)");
      e_.unsignedInteger(kernel->timeNs);
      e_.key("count");
      e_.unsignedInteger(kernel->count);
      e_.key("device_id");
      e_.string(std::to_string(kernel->deviceId));
      e_.key("device_type");
      e_.string(deviceTypeName(kernel->deviceType));
    }
    if (flex) {
      for (const NamedMetric &m : flex->entries) {
        e_.key(v_.strings.view(m.spec.name));
        encodeMetricValue(e_, m.value);
      }
    }
    for (const RootKey *k : zeros) {
      e_.key(k->name);
      if (k->type == MetricType::kInt) {
        e_.integer(0);
      } else {
        e_.floating(0.0);
      }
    }
    e_.endMap();
  }

  void openNode(NodeId id) {
    e_.beginMap(id == kRootNode ? 4 : 3);
    e_.key("frame");
    e_.beginMap(2);
    e_.key("name");
    e_.string(id == kRootNode ? std::string_view("ROOT") : v_.strings.view(tree().node(id).name));
    e_.key("type");
    e_.string("function");
    e_.endMap();
    e_.key("metrics");
    emitMetrics(id);
    e_.key("children");
    e_.beginArray(childCount(id));
  }

  void emitTree() {
    // Each stack entry is an open node and the next child of it to visit.
    std::vector<std::pair<NodeId, NodeId>> stack;
    openNode(kRootNode);
    stack.push_back({kRootNode, tree().node(kRootNode).firstChild});
    while (!stack.empty()) {
      auto &[node, next] = stack.back();
      if (next == kNoNode) {
        e_.endArray();
        if (node == kRootNode) {
          e_.key("proton_metadata");
          encodeMetadata(e_, v_.metadata);
        }
        e_.endMap();
        stack.pop_back();
        continue;
      }
      NodeId child = next;
      next = tree().node(child).nextSibling;
      openNode(child);
      stack.push_back({child, tree().node(child).firstChild});
    }
  }

  void emitDevices() {
    const auto &devices = v_.phase.devices();
    e_.beginMap(devices.size());
    for (const auto &[type, indices] : devices) {
      e_.key(deviceTypeName(type));
      e_.beginMap(indices.size());
      for (int32_t index : indices) {
        e_.key(std::to_string(index));
        DeviceInfo fallback;
        fallback.type = type;
        fallback.index = index;
        DeviceInfo info = v_.devices.get(type, index).value_or(fallback);
        e_.beginMap(info.pciBusId.empty() ? 5 : 6);
        e_.key("arch");
        e_.string(info.arch);
        e_.key("num_sms");
        e_.unsignedInteger(info.numSms);
        e_.key("clock_rate");
        e_.unsignedInteger(info.clockRateKhz);
        e_.key("memory_clock_rate");
        e_.unsignedInteger(info.memoryClockRateKhz);
        e_.key("bus_width");
        e_.unsignedInteger(info.busWidthBits);
        if (!info.pciBusId.empty()) {
          e_.key("pci_bus_id");
          e_.string(info.pciBusId);
        }
        e_.endMap();
      }
      e_.endMap();
    }
    e_.endMap();
  }

  struct RootKey {
    std::string name;
    MetricType type;
    StringId flexName;  // user metrics
    bool kernelKey;     // "time (ns)" and "count"
  };

  const ProfileView &v_;
  Encoder &e_;
  std::vector<RootKey> rootKeys_;
};

}  // namespace proton
