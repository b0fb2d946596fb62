// Tensor metrics in the core: value decoding, and where the session manager files values
// given as tensors, through a sink that "copies" host memory (no GPU needed).
#include "core/tensor_metric.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <map>

#include "core/string_table.h"
#include "runtime/session_manager.h"

namespace proton {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }
SessionManager &mgr() { return SessionManager::global(); }

DeviceTensor tensorOf(const void *p, TensorDType dtype, uint32_t numel = 1, bool list = false) {
  DeviceTensor t;
  t.dataPtr = reinterpret_cast<uint64_t>(p);
  t.dtype = dtype;
  t.numel = numel;
  t.list = list;
  return t;
}

TEST(TensorMetric, DecodesEveryDtype) {
  int64_t i64 = -7;
  int8_t i8 = -3;
  uint8_t u8 = 200;
  uint16_t half[3] = {0x3C00, 0xC000, 0x0001};  // 1.0, -2.0, smallest subnormal
  uint16_t bf16 = 0x3FC0;                       // 1.5
  float f32[2] = {0.5f, 4.0f};
  auto bytes = [](const void *p) { return static_cast<const uint8_t *>(p); };
  EXPECT_EQ(std::get<int64_t>(decodeTensorValue(bytes(&i64), tensorOf(&i64, TensorDType::kInt64))),
            -7);
  EXPECT_EQ(std::get<int64_t>(decodeTensorValue(bytes(&i8), tensorOf(&i8, TensorDType::kInt8))),
            -3);
  EXPECT_EQ(std::get<int64_t>(decodeTensorValue(bytes(&u8), tensorOf(&u8, TensorDType::kUInt8))),
            200);
  EXPECT_EQ(std::get<double>(decodeTensorValue(bytes(half), tensorOf(half, TensorDType::kFloat16))),
            1.0);
  EXPECT_EQ(
      std::get<double>(decodeTensorValue(bytes(half + 1), tensorOf(half, TensorDType::kFloat16))),
      -2.0);
  EXPECT_FLOAT_EQ(
      std::get<double>(decodeTensorValue(bytes(half + 2), tensorOf(half, TensorDType::kFloat16))),
      5.9604645e-8f);
  EXPECT_EQ(
      std::get<double>(decodeTensorValue(bytes(&bf16), tensorOf(&bf16, TensorDType::kBFloat16))),
      1.5);
  EXPECT_EQ(std::get<std::vector<double>>(
                decodeTensorValue(bytes(f32), tensorOf(f32, TensorDType::kFloat32, 2, true))),
            (std::vector<double>{0.5, 4.0}));
  EXPECT_EQ(metricTypeOf(placeholderValue(tensorOf(f32, TensorDType::kFloat32))),
            MetricType::kFloat);
  EXPECT_EQ(metricTypeOf(placeholderValue(tensorOf(f32, TensorDType::kFloat32, 2, true))),
            MetricType::kList);
}

// Copies the tensor's (host) bytes when given; files bound values at drain().
class FakeSink : public DeviceMetricSink {
 public:
  struct Copy {
    DeviceTensor tensor;
    std::vector<uint8_t> bytes;
    bool bound = false;
    MetricSpec spec;
    std::vector<MetricTarget> targets;
  };
  bool capture = false;
  std::map<Handle, Copy> copies;
  std::vector<std::pair<CaptureContext, StringId>> captured;
  Handle next = 1;
  size_t discarded = 0;

  bool capturing(const DeviceTensor &) override { return capture; }
  Handle copy(const DeviceTensor &t) override {
    const auto *p = reinterpret_cast<const uint8_t *>(t.dataPtr);
    copies[next] = Copy{t, std::vector<uint8_t>(p, p + t.bytes())};
    return next++;
  }
  void bind(Handle h, const MetricSpec &spec, const MetricTarget *targets, size_t n) override {
    Copy &c = copies.at(h);
    c.bound = true;
    c.spec = spec;
    c.targets.assign(targets, targets + n);
  }
  void discard(Handle h) override {
    copies.erase(h);
    ++discarded;
  }
  void recordCaptured(const TensorMetric &, CaptureContext context, StringId slice) override {
    captured.emplace_back(std::move(context), slice);
  }
  size_t pending() const override { return copies.size(); }
  void drain() {
    for (auto it = copies.begin(); it != copies.end();) {
      if (!it->second.bound) {
        ++it;
        continue;
      }
      NamedMetric m{it->second.spec, decodeTensorValue(it->second.bytes.data(), it->second.tensor)};
      for (const MetricTarget &t : it->second.targets) fileTensorValue(t, m);
      it = copies.erase(it);
    }
  }
};

class TensorMetricSession : public ::testing::Test {
 protected:
  void SetUp() override { setDeviceMetricSink(&sink); }
  void TearDown() override { setDeviceMetricSink(nullptr); }

  SessionId start(const std::string &name, DataKind data) {
    std::string tmpl = ::testing::TempDir() + "proton_tm_XXXXXX";
    char *dir = mkdtemp(tmpl.data());
    SessionOptions o;
    o.path = std::string(dir ? dir : "/tmp") + "/" + name;
    o.data = data;
    Result<StartResult> r = mgr().start(o);
    EXPECT_TRUE(r.isOk());
    return r.value().id;
  }
  std::string output(SessionId id, const char *format) {
    Result<std::string> s = mgr().serialize(id, PhaseId{0}, format);
    EXPECT_TRUE(s.isOk());
    return s.isOk() ? s.value() : "";
  }
  FakeSink sink;
};

TEST_F(TensorMetricSession, ScopeValuesSumAtTheScopeNodeOnceDrained) {
  SessionId id = start("tree", DataKind::kTree);
  int64_t value = 5;
  std::vector<TensorMetric> tensors{
      {MetricSpec::parse("tokens"), tensorOf(&value, TensorDType::kInt64)}};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(mgr().enterScope(S("step"), false, nullptr, nullptr, &tensors).isOk());
    value = 7;  // the copy was taken at entry
    ASSERT_TRUE(mgr().exitScope(std::nullopt, {}).isOk());
    value = 5;
  }
  EXPECT_EQ(output(id, "hatchet").find("\"tokens\":10"), std::string::npos);  // not yet read
  sink.drain();
  EXPECT_NE(output(id, "hatchet").find("\"tokens\":10"), std::string::npos)
      << output(id, "hatchet");
  ASSERT_TRUE(mgr().finalize(id, "", nullptr).isOk());
}

TEST_F(TensorMetricSession, TraceEntryAndExitValuesGoToTheScopesSlice) {
  SessionId id = start("trace", DataKind::kTrace);
  double entry = 1.5;
  int32_t exit = 3;
  std::vector<TensorMetric> in{{MetricSpec::parse("a"), tensorOf(&entry, TensorDType::kFloat64)}};
  std::vector<TensorMetric> out{{MetricSpec::parse("b"), tensorOf(&exit, TensorDType::kInt32)}};
  ASSERT_TRUE(mgr().enterScope(S("slice"), false, nullptr, nullptr, &in).isOk());
  ASSERT_TRUE(mgr().exitScope(S("slice"), {}, nullptr, &out).isOk());
  sink.drain();
  std::string trace = output(id, "chrome_trace");
  EXPECT_NE(trace.find("\"a\":1.5"), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"b\":3"), std::string::npos) << trace;
  ASSERT_TRUE(mgr().finalize(id, "", nullptr).isOk());
}

TEST_F(TensorMetricSession, CapturedValuesCarryTheirContextAndTheSessionsNotRecording) {
  SessionId on = start("on", DataKind::kTree);
  SessionId off = start("off", DataKind::kTree);
  ASSERT_TRUE(mgr().deactivate(off, false).isOk());
  sink.capture = true;
  int64_t value = 1;
  std::vector<TensorMetric> tensors{
      {MetricSpec::parse("n"), tensorOf(&value, TensorDType::kInt64)}};
  ASSERT_TRUE(mgr().enterScope(S("outer"), false, nullptr).isOk());
  ASSERT_TRUE(mgr().enterScope(S("inner"), false, nullptr, nullptr, &tensors).isOk());
  ASSERT_TRUE(mgr().exitScope(S("inner"), {}).isOk());
  ASSERT_TRUE(mgr().exitScope(S("outer"), {}).isOk());
  ASSERT_EQ(sink.captured.size(), 1u);
  EXPECT_EQ(sink.captured[0].first.names, (std::vector<StringId>{S("outer"), S("inner")}));
  EXPECT_FALSE(sink.captured[0].first.records(off));
  EXPECT_TRUE(sink.captured[0].first.records(on));
  EXPECT_EQ(sink.captured[0].second, S("inner"));
  EXPECT_TRUE(sink.copies.empty());
  ASSERT_TRUE(mgr().finalize(std::nullopt, "", nullptr).isOk());
}

TEST_F(TensorMetricSession, LaunchMetadataValuesAreKeptOnlyForALaunchThatRan) {
  SessionId id = start("launch", DataKind::kTree);
  int64_t value = 4;
  std::vector<TensorMetric> tensors{
      {MetricSpec::parse("bytes"), tensorOf(&value, TensorDType::kInt64)}};
  LaunchEntry entries[4];
  uint64_t thread = 0;
  mgr().pushLaunchMetadata(S("failed_kernel"), {}, &tensors);
  size_t n = mgr().launchContext(entries, 4, &thread);
  mgr().endLaunch(entries, n, /*ran=*/false);
  EXPECT_EQ(sink.discarded, 1u);
  mgr().pushLaunchMetadata(S("kernel_4"), {}, &tensors);
  n = mgr().launchContext(entries, 4, &thread);
  mgr().endLaunch(entries, n, /*ran=*/true);
  sink.drain();
  std::string tree = output(id, "hatchet");
  EXPECT_NE(tree.find("kernel_4"), std::string::npos);
  EXPECT_NE(tree.find("\"bytes\":4"), std::string::npos) << tree;
  EXPECT_EQ(tree.find("failed_kernel"), std::string::npos);
  ASSERT_TRUE(mgr().finalize(id, "", nullptr).isOk());
}

TEST_F(TensorMetricSession, AMetadataNoLaunchConsumedIsDiscarded) {
  SessionId id = start("popped", DataKind::kTree);
  int64_t value = 4;
  std::vector<TensorMetric> tensors{
      {MetricSpec::parse("bytes"), tensorOf(&value, TensorDType::kInt64)}};
  mgr().pushLaunchMetadata(S("never"), {}, &tensors);
  mgr().popLaunchMetadata();
  EXPECT_EQ(sink.discarded, 1u);
  EXPECT_TRUE(sink.copies.empty());
  ASSERT_TRUE(mgr().finalize(id, "", nullptr).isOk());
}

}  // namespace
}  // namespace proton
