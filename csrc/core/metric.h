// Metrics: what a context node accumulates.
//
//   KernelMetric k;  k.add(1500 /*ns*/, /*device*/ 0, DeviceType::kCuda);
//   FlexMetrics m;   m.add(MetricSpec::parse("flops (exc)"), int64_t{42});
//
// Kernel metrics are fixed fields (time, count, min, max, device). Flexible metrics are user
// metrics keyed by interned name: int, float, string or list of numbers. A name ending in
// "(exc)" is exclusive (summed at its node, never propagated to parents by readers), one
// ending in "(pty)" is a property (the last value wins); the suffix is stripped from the name.
// Other numeric values sum on repeat; strings are replaced; lists add element-wise.
// Value types; the owning session serialises access.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "core/stats.h"
#include "core/status.h"

namespace proton {

enum class DeviceType : uint8_t { kNone = 0, kCuda, kHip };
const char *deviceTypeName(DeviceType type);

struct KernelMetric {
  uint64_t timeNs = 0;
  uint64_t count = 0;
  uint64_t minNs = UINT64_MAX;
  uint64_t maxNs = 0;
  int32_t deviceId = -1;
  DeviceType deviceType = DeviceType::kNone;

  void add(uint64_t durationNs, int32_t device, DeviceType type) {
    timeNs += durationNs;
    ++count;
    minNs = durationNs < minNs ? durationNs : minNs;
    maxNs = durationNs > maxNs ? durationNs : maxNs;
    deviceId = device;
    deviceType = type;
  }
};

enum class MetricType : uint8_t { kInt = 0, kFloat, kString, kList };
const char *metricTypeName(MetricType type);

using MetricValue = std::variant<int64_t, double, std::string, std::vector<double>>;
inline MetricType metricTypeOf(const MetricValue &v) { return static_cast<MetricType>(v.index()); }

enum class MetricAggregation : uint8_t { kInclusive = 0, kExclusive, kProperty };

// How a metric's values are typed before they are added (triton.profiler's rule): "flops*"
// metrics are floats, "bytes" is an int whenever its value is whole; other names keep the
// type they are given.
enum class MetricTypeRule : uint8_t { kAsGiven = 0, kFloat, kIntWhenWhole };

// A user metric name with its suffix parsed off.
struct MetricSpec {
  StringId name;  // stripped and trimmed
  MetricAggregation aggregation = MetricAggregation::kInclusive;
  MetricTypeRule typeRule = MetricTypeRule::kAsGiven;  // from the name, by parse()

  // "a (exc)" -> {"a", kExclusive}. Interns the stripped name in the global string table.
  static MetricSpec parse(std::string_view rawName);
};

struct NamedMetric {
  MetricSpec spec;
  MetricValue value;
};
using MetricList = std::vector<NamedMetric>;

// Applies the name's type rule to a value (an int "flops" becomes a float, a whole float
// "bytes" an int).
void applyTypeRule(MetricTypeRule rule, MetricValue &value);

// How a value fits a metric whose values so far have type `recorded`:
//   kSame     the same type;
//   kConvert  converted without loss (an int into a float metric, a whole float into an int
//             metric): convertMetricValue(value, recorded);
//   kWiden    a fractional float into an int metric: the metric becomes a float metric (its
//             values so far are converted, widenToFloat);
//   kConflict anything else (a string or list against a number): the value cannot be kept.
enum class MetricFit : uint8_t { kSame, kConvert, kWiden, kConflict };
MetricFit fitMetric(MetricType recorded, const MetricValue &value);
// The type a value takes once its name's rule is applied (applyTypeRule), without copying it.
MetricType ruledTypeOf(const NamedMetric &metric);
// Whether values of these two types cannot share a metric (a string or list against anything
// else): numbers of either type always can (fitMetric converts them).
inline bool typesConflict(MetricType a, MetricType b) {
  auto number = [](MetricType t) { return t == MetricType::kInt || t == MetricType::kFloat; };
  return a != b && !(number(a) && number(b));
}
// Converts an int to a float or a whole float to an int; false (value unchanged) otherwise.
bool convertMetricValue(MetricValue &value, MetricType to);

// Metrics that could not be kept (addMetrics and friends failed with `status`, a type
// conflict): counts them in metrics_dropped_type_conflict and names the conflict on stderr
// once per distinct message, with `where` they were given (a kernel's or a scope's name).
// Thread-safe; not for hot paths (conflicts are rare).
void dropConflictingMetrics(const Status &status, StringId where);
// The counter behind it, registered by the first call (so that it shows as 0).
Counter &typeConflictCounter();

// Combines a repeated value into an existing one, by aggregation. Types must already match.
void combineMetric(MetricValue &into, const MetricValue &value, MetricAggregation aggregation);

// The flexible metrics of one node, in first-seen order.
struct FlexMetrics {
  std::vector<NamedMetric> entries;

  void add(const NamedMetric &metric);
  const NamedMetric *find(StringId name) const;
  // Makes the int value of `name`, if any, a float (its metric became a float metric).
  void widenToFloat(StringId name);
};

}  // namespace proton
