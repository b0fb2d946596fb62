// Pieces every writer encodes the same way, templated on the encoder (JsonEncoder or
// MsgpackEncoder): a metric value, and the profile metadata block.
//
//   encodeMetricValue(encoder, metric.value);
//   encodeMetadata(encoder, view.metadata);   // {"version": ..., "stats": {...}, ...}
#pragma once

#include <variant>

#include "core/metric.h"
#include "core/profile_metadata.h"

namespace proton {

template <typename Encoder>
void encodeMetricValue(Encoder &e, const MetricValue &value) {
  switch (metricTypeOf(value)) {
    case MetricType::kInt:
      return e.integer(std::get<int64_t>(value));
    case MetricType::kFloat:
      return e.floating(std::get<double>(value));
    case MetricType::kString:
      return e.string(std::get<std::string>(value));
    case MetricType::kList: {
      const auto &list = std::get<std::vector<double>>(value);
      e.beginArray(list.size());
      for (double d : list) e.floating(d);
      return e.endArray();
    }
  }
}

template <typename Encoder>
void encodeStringList(Encoder &e, const std::vector<std::string> &list) {
  e.beginArray(list.size());
  for (const std::string &s : list) e.string(s);
  e.endArray();
}

template <typename Encoder>
void encodeMetadata(Encoder &e, const ProfileMetadata &m) {
  bool ranked = m.rank >= 0;
  bool hasCwd = !m.workingDirectory.empty(), hasScript = !m.script.empty();
  e.beginMap((ranked ? 15 : 12) + hasCwd + hasScript);
  e.key("tool");
  e.string("proton");
  e.key("version");
  e.string(m.toolVersion);
  e.key("command_line");
  e.string(m.commandLine);
  if (hasCwd) {
    e.key("working_directory");
    e.string(m.workingDirectory);
  }
  if (hasScript) {
    e.key("script");
    e.string(m.script);
  }
  e.key("start_time_unix_ns");
  e.unsignedInteger(m.startTimeUnixNs);
  e.key("session");
  e.string(m.sessionName);
  e.key("context");
  e.string(m.context);
  e.key("data");
  e.string(m.data);
  e.key("backend");
  e.string(m.backend);
  e.key("mode");
  e.string(m.mode);
  e.key("phase");
  e.unsignedInteger(m.phase);
  if (ranked) {
    e.key("rank");
    e.unsignedInteger(static_cast<uint64_t>(m.rank));
    e.key("world_size");
    e.unsignedInteger(static_cast<uint64_t>(m.worldSize));
    e.key("host");
    e.string(m.host);
  }
  e.key("stats");
  e.beginMap(m.stats.size());
  for (const auto &[name, value] : m.stats) {
    e.key(name);
    e.unsignedInteger(value);
  }
  e.endMap();
  e.key("metric_aggregation");
  e.beginMap(2);
  e.key("exclusive");
  encodeStringList(e, m.exclusiveMetrics);
  e.key("property");
  encodeStringList(e, m.propertyMetrics);
  e.endMap();
  e.endMap();
}

}  // namespace proton
