#include "core/metric.h"

#include "core/string_table.h"

namespace proton {

const char *deviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCuda:
      return "CUDA";
    case DeviceType::kHip:
      return "HIP";
    case DeviceType::kNone:
      break;
  }
  return "NONE";
}

const char *metricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kInt:
      return "int";
    case MetricType::kFloat:
      return "float";
    case MetricType::kString:
      return "str";
    case MetricType::kList:
      return "list";
  }
  return "unknown";
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool stripSuffix(std::string_view &s, std::string_view suffix) {
  if (s.size() < suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  s.remove_suffix(suffix.size());
  return true;
}

}  // namespace

MetricSpec MetricSpec::parse(std::string_view rawName) {
  MetricSpec spec;
  std::string_view name = trim(rawName);
  if (stripSuffix(name, "(exc)")) {
    spec.aggregation = MetricAggregation::kExclusive;
  } else if (stripSuffix(name, "(pty)")) {
    spec.aggregation = MetricAggregation::kProperty;
  }
  spec.name = StringTable::global().intern(trim(name));
  return spec;
}

void combineMetric(MetricValue &into, const MetricValue &value, MetricAggregation aggregation) {
  PROTON_CHECK(into.index() == value.index());
  if (aggregation == MetricAggregation::kProperty) {
    into = value;
    return;
  }
  switch (metricTypeOf(value)) {
    case MetricType::kInt:
      std::get<int64_t>(into) += std::get<int64_t>(value);
      return;
    case MetricType::kFloat:
      std::get<double>(into) += std::get<double>(value);
      return;
    case MetricType::kString:
      into = value;
      return;
    case MetricType::kList: {
      auto &dst = std::get<std::vector<double>>(into);
      const auto &src = std::get<std::vector<double>>(value);
      if (dst.size() < src.size()) dst.resize(src.size(), 0.0);
      for (size_t i = 0; i < src.size(); ++i) dst[i] += src[i];
      return;
    }
  }
}

void FlexMetrics::add(const NamedMetric &metric) {
  for (NamedMetric &e : entries) {
    if (e.spec.name == metric.spec.name) {
      combineMetric(e.value, metric.value, metric.spec.aggregation);
      return;
    }
  }
  entries.push_back(metric);
}

const NamedMetric *FlexMetrics::find(StringId name) const {
  for (const NamedMetric &e : entries)
    if (e.spec.name == name) return &e;
  return nullptr;
}

}  // namespace proton
