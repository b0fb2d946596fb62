#include "core/metric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/string_table.h"

namespace proton {
namespace {

std::string nameOf(const MetricSpec &spec) {
  return std::string(StringTable::global().view(spec.name));
}

TEST(MetricSpecTest, PlainNameIsInclusive) {
  MetricSpec s = MetricSpec::parse("flops");
  EXPECT_EQ(nameOf(s), "flops");
  EXPECT_EQ(s.aggregation, MetricAggregation::kInclusive);
}

TEST(MetricSpecTest, ExcSuffixWithSpaceIsStripped) {
  MetricSpec s = MetricSpec::parse("a (exc)");
  EXPECT_EQ(nameOf(s), "a");
  EXPECT_EQ(s.aggregation, MetricAggregation::kExclusive);
}

TEST(MetricSpecTest, PtySuffixWithoutSpaceIsStripped) {
  MetricSpec s = MetricSpec::parse("b(pty)");
  EXPECT_EQ(nameOf(s), "b");
  EXPECT_EQ(s.aggregation, MetricAggregation::kProperty);
}

TEST(MetricSpecTest, SurroundingSpacesAreTrimmed) {
  MetricSpec s = MetricSpec::parse("  bytes   (exc)  ");
  EXPECT_EQ(nameOf(s), "bytes");
  EXPECT_EQ(s.aggregation, MetricAggregation::kExclusive);
  EXPECT_EQ(MetricSpec::parse("  bytes ").name, s.name);
}

TEST(MetricSpecTest, SuffixNotAtEndIsKept) {
  MetricSpec s = MetricSpec::parse("x (exc) y");
  EXPECT_EQ(nameOf(s), "x (exc) y");
  EXPECT_EQ(s.aggregation, MetricAggregation::kInclusive);
  // Other parenthesised units stay in the name.
  EXPECT_EQ(nameOf(MetricSpec::parse("time (ns)")), "time (ns)");
}

TEST(MetricSpecTest, OnlyOneSuffixIsStripped) {
  MetricSpec s = MetricSpec::parse("c (pty) (exc)");
  EXPECT_EQ(nameOf(s), "c (pty)");
  EXPECT_EQ(s.aggregation, MetricAggregation::kExclusive);
}

TEST(MetricSpecTest, BareSuffixGivesEmptyName) {
  MetricSpec s = MetricSpec::parse("(exc)");
  EXPECT_EQ(s.name, StringId{0});
  EXPECT_EQ(s.aggregation, MetricAggregation::kExclusive);
}

TEST(CombineMetricTest, IntsSum) {
  MetricValue v = int64_t{40};
  combineMetric(v, int64_t{2}, MetricAggregation::kInclusive);
  EXPECT_EQ(std::get<int64_t>(v), 42);
  combineMetric(v, int64_t{-50}, MetricAggregation::kExclusive);
  EXPECT_EQ(std::get<int64_t>(v), -8);
}

TEST(CombineMetricTest, FloatsSum) {
  MetricValue v = 0.5;
  combineMetric(v, 0.25, MetricAggregation::kInclusive);
  EXPECT_EQ(std::get<double>(v), 0.75);
}

TEST(CombineMetricTest, StringIsReplaced) {
  MetricValue v = std::string("old");
  combineMetric(v, std::string("new"), MetricAggregation::kInclusive);
  EXPECT_EQ(std::get<std::string>(v), "new");
}

TEST(CombineMetricTest, ListsAddElementWiseAndGrow) {
  MetricValue v = std::vector<double>{1.0, 2.0};
  combineMetric(v, std::vector<double>{0.5, 0.5, 3.0}, MetricAggregation::kInclusive);
  EXPECT_EQ(std::get<std::vector<double>>(v), (std::vector<double>{1.5, 2.5, 3.0}));
  combineMetric(v, std::vector<double>{1.0}, MetricAggregation::kInclusive);
  EXPECT_EQ(std::get<std::vector<double>>(v), (std::vector<double>{2.5, 2.5, 3.0}));
}

TEST(CombineMetricTest, PropertyTakesTheLastValue) {
  MetricValue i = int64_t{5};
  combineMetric(i, int64_t{3}, MetricAggregation::kProperty);
  EXPECT_EQ(std::get<int64_t>(i), 3);
  MetricValue f = 1.5;
  combineMetric(f, 0.25, MetricAggregation::kProperty);
  EXPECT_EQ(std::get<double>(f), 0.25);
  MetricValue l = std::vector<double>{1.0, 2.0};
  combineMetric(l, std::vector<double>{7.0}, MetricAggregation::kProperty);
  EXPECT_EQ(std::get<std::vector<double>>(l), (std::vector<double>{7.0}));
}

TEST(FlexMetricsTest, KeepsFirstSeenOrderAndCombinesRepeats) {
  FlexMetrics m;
  MetricSpec b = MetricSpec::parse("b");
  MetricSpec a = MetricSpec::parse("a (pty)");
  m.add({b, int64_t{1}});
  m.add({a, 2.0});
  m.add({b, int64_t{10}});
  m.add({a, 5.0});
  ASSERT_EQ(m.entries.size(), 2u);
  EXPECT_EQ(m.entries[0].spec.name, b.name);
  EXPECT_EQ(std::get<int64_t>(m.entries[0].value), 11);
  EXPECT_EQ(m.entries[1].spec.name, a.name);
  EXPECT_EQ(std::get<double>(m.entries[1].value), 5.0);
  ASSERT_NE(m.find(a.name), nullptr);
  EXPECT_EQ(m.find(a.name), &m.entries[1]);
  EXPECT_EQ(m.find(MetricSpec::parse("missing").name), nullptr);
}

TEST(KernelMetricTest, TracksTimeCountMinMaxAndLastDevice) {
  KernelMetric k;
  EXPECT_EQ(k.count, 0u);
  EXPECT_EQ(k.deviceId, -1);
  k.add(1500, 0, DeviceType::kCuda);
  k.add(500, 1, DeviceType::kCuda);
  k.add(2500, 1, DeviceType::kHip);
  EXPECT_EQ(k.timeNs, 4500u);
  EXPECT_EQ(k.count, 3u);
  EXPECT_EQ(k.minNs, 500u);
  EXPECT_EQ(k.maxNs, 2500u);
  EXPECT_EQ(k.deviceId, 1);
  EXPECT_EQ(k.deviceType, DeviceType::kHip);
}

TEST(MetricNamesTest, TypeAndDeviceNames) {
  EXPECT_STREQ(metricTypeName(MetricType::kInt), "int");
  EXPECT_STREQ(metricTypeName(MetricType::kFloat), "float");
  EXPECT_STREQ(metricTypeName(MetricType::kString), "str");
  EXPECT_STREQ(metricTypeName(MetricType::kList), "list");
  EXPECT_STREQ(deviceTypeName(DeviceType::kCuda), "CUDA");
  EXPECT_STREQ(deviceTypeName(DeviceType::kHip), "HIP");
  EXPECT_STREQ(deviceTypeName(DeviceType::kNone), "NONE");
  EXPECT_EQ(metricTypeOf(MetricValue{int64_t{1}}), MetricType::kInt);
  EXPECT_EQ(metricTypeOf(MetricValue{1.0}), MetricType::kFloat);
  EXPECT_EQ(metricTypeOf(MetricValue{std::string("s")}), MetricType::kString);
  EXPECT_EQ(metricTypeOf(MetricValue{std::vector<double>{}}), MetricType::kList);
}

}  // namespace
}  // namespace proton
