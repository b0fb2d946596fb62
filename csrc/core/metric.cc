#include "core/metric.h"

#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>

#include "core/stats.h"
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
  name = trim(name);
  if (name.substr(0, 5) == "flops") {
    spec.typeRule = MetricTypeRule::kFloat;
  } else if (name == "bytes") {
    spec.typeRule = MetricTypeRule::kIntWhenWhole;
  }
  spec.name = StringTable::global().intern(name);
  return spec;
}

namespace {

// A float that an int64 holds exactly.
bool isWhole(double v) { return std::trunc(v) == v && v >= -9.2e18 && v <= 9.2e18; }

}  // namespace

void applyTypeRule(MetricTypeRule rule, MetricValue &value) {
  if (rule == MetricTypeRule::kFloat && metricTypeOf(value) == MetricType::kInt) {
    convertMetricValue(value, MetricType::kFloat);
  } else if (rule == MetricTypeRule::kIntWhenWhole && metricTypeOf(value) == MetricType::kFloat) {
    convertMetricValue(value, MetricType::kInt);  // a fractional value stays a float
  }
}

MetricType ruledTypeOf(const NamedMetric &metric) {
  MetricType type = metricTypeOf(metric.value);
  if (metric.spec.typeRule == MetricTypeRule::kFloat && type == MetricType::kInt)
    return MetricType::kFloat;
  if (metric.spec.typeRule == MetricTypeRule::kIntWhenWhole && type == MetricType::kFloat &&
      isWhole(std::get<double>(metric.value)))
    return MetricType::kInt;
  return type;
}

MetricFit fitMetric(MetricType recorded, const MetricValue &value) {
  MetricType type = metricTypeOf(value);
  if (type == recorded) return MetricFit::kSame;
  if (recorded == MetricType::kFloat && type == MetricType::kInt) return MetricFit::kConvert;
  if (recorded == MetricType::kInt && type == MetricType::kFloat)
    return isWhole(std::get<double>(value)) ? MetricFit::kConvert : MetricFit::kWiden;
  return MetricFit::kConflict;
}

bool convertMetricValue(MetricValue &value, MetricType to) {
  MetricType from = metricTypeOf(value);
  if (from == MetricType::kInt && to == MetricType::kFloat) {
    value = static_cast<double>(std::get<int64_t>(value));
    return true;
  }
  if (from == MetricType::kFloat && to == MetricType::kInt && isWhole(std::get<double>(value))) {
    value = static_cast<int64_t>(std::get<double>(value));
    return true;
  }
  return from == to;
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

Counter &typeConflictCounter() {
  static Counter &dropped = Stats::global().counter("metrics_dropped_type_conflict");
  return dropped;
}

void dropConflictingMetrics(const Status &status, StringId where) {
  typeConflictCounter().add();
  static std::mutex mu;
  static std::set<std::string> *warned = new std::set<std::string>;  // outlives exit-time use
  std::lock_guard lock(mu);
  if (!warned->insert(status.message()).second) return;
  std::string at = where == StringId{}
                       ? std::string()
                       : " given at '" + std::string(StringTable::global().view(where)) + "'";
  std::fprintf(stderr,
               "%s; the metrics%s are dropped (counted in metrics_dropped_type_conflict; said "
               "once)\n",
               status.message().c_str(), at.c_str());
}

void FlexMetrics::widenToFloat(StringId name) {
  for (NamedMetric &e : entries)
    if (e.spec.name == name) convertMetricValue(e.value, MetricType::kFloat);
}

const NamedMetric *FlexMetrics::find(StringId name) const {
  for (const NamedMetric &e : entries)
    if (e.spec.name == name) return &e;
  return nullptr;
}

}  // namespace proton
