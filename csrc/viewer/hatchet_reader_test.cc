#include "viewer/hatchet_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "viewer/tree_render.h"

namespace proton::viewer {
namespace {

const char *kProfile =
    R"J([{"frame":{"name":"ROOT","type":"function"},"metrics":{"time (ns)":10,"count":1},)J"
    R"J("children":[{"frame":{"name":"a\u00e9\"b","type":"function"},)J"
    R"J("metrics":{"time (ns)":2.5,"device_id":"0"},"children":[]}],)J"
    R"J("proton_metadata":{"stats":{"dropped":0}}},{"CUDA":{"0":{"arch":"90"}}}])J";

double asDouble(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

TEST(HatchetReader, ReadsJsonIntoPreOrderColumns) {
  TreeColumns t;
  ASSERT_TRUE(readHatchetJson(kProfile, &t).isOk());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.parents[0], -1);
  EXPECT_EQ(t.parents[1], 0);
  EXPECT_EQ(t.strings[t.nameIds[1]], "a\xc3\xa9\"b");
  ASSERT_EQ(t.metrics.size(), 3u);
  EXPECT_EQ(t.metrics[0].name, "time (ns)");
  EXPECT_EQ(t.metrics[0].kinds[0], ValueKind::kInt);
  EXPECT_EQ(t.metrics[0].values[0], 10u);
  EXPECT_EQ(t.metrics[0].kinds[1], ValueKind::kDouble);
  EXPECT_EQ(asDouble(t.metrics[0].values[1]), 2.5);
  EXPECT_EQ(t.metrics[1].kinds[1], ValueKind::kAbsent);
  EXPECT_EQ(t.metrics[2].kinds[1], ValueKind::kString);
  EXPECT_EQ(t.metadata, R"({"stats":{"dropped":0}})");
  EXPECT_EQ(t.devices, R"J({"CUDA":{"0":{"arch":"90"}}})J");
}

TEST(HatchetReader, ReadsMsgpackLikeJson) {
  // [{"frame":{"name":"ROOT"},"metrics":{"t":-3,"x":1.5},"children":[]}]
  const unsigned char bytes[] = {0x91, 0x83, 0xA5, 'f',  'r', 'a',  'm',  'e', 0x81, 0xA4, 'n',
                                 'a',  'm',  'e',  0xA4, 'R', 'O',  'O',  'T', 0xA7, 'm',  'e',
                                 't',  'r',  'i',  'c',  's', 0x82, 0xA1, 't', 0xFD, 0xA1, 'x',
                                 0xCB, 0x3F, 0xF8, 0,    0,   0,    0,    0,   0,    0xA8, 'c',
                                 'h',  'i',  'l',  'd',  'r', 'e',  'n',  0x90};
  std::string_view data(reinterpret_cast<const char *>(bytes), sizeof bytes);
  TreeColumns t;
  ASSERT_TRUE(readHatchetMsgpack(data, &t).isOk());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.strings[t.nameIds[0]], "ROOT");
  EXPECT_EQ(static_cast<int64_t>(t.metrics[0].values[0]), -3);
  EXPECT_EQ(asDouble(t.metrics[1].values[0]), 1.5);
  // Every truncation is an error, never a crash.
  for (size_t n = 0; n < data.size(); ++n) {
    EXPECT_FALSE(readHatchetMsgpack(data.substr(0, n), &t).isOk()) << n;
  }
}

TEST(HatchetReader, TruncatedJsonIsAnErrorAtEveryLength) {
  std::string full = kProfile;
  TreeColumns t;
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(readHatchetJson(full.substr(0, n), &t).isOk()) << n;
  }
}

TEST(HatchetReader, CorruptInputIsAnErrorNeverACrash) {
  std::string full = kProfile;
  TreeColumns t;
  for (size_t i = 0; i < full.size(); ++i) {
    for (char c : {'\0', '"', '{', ']', '\\', '\xff', '9'}) {
      std::string bad = full;
      bad[i] = c;
      (void)readHatchetJson(bad, &t);     // any status, no crash
      (void)readHatchetMsgpack(bad, &t);  // garbage for the MessagePack reader
    }
  }
  EXPECT_FALSE(readHatchetJson(std::string(5000, '['), &t).isOk());
  EXPECT_FALSE(readHatchetJson("{}", &t).isOk());  // other shapes: the Python reader's job
  EXPECT_FALSE(readHatchetJson(R"J([{"frame":{"name":1}}])J", &t).isOk());
  EXPECT_FALSE(readHatchetJson(R"J([{"frame":{"name":"a"},"metrics":{"x":true}}])J", &t).isOk());
  EXPECT_FALSE(readHatchetJson(R"J([{"frame":{"name":"a\ud800"}}])J", &t).isOk());
  EXPECT_FALSE(readHatchetJson(R"J([{"frame":{"name":"a"},"metrics":{"x":1e999}}])J", &t).isOk());
  EXPECT_FALSE(readHatchetFile("/nonexistent/file", false, &t).isOk());
}

TEST(TreeRender, FormatsLikePython) {
  auto text = [](CellValue v) {
    std::string s;
    appendValue(v, &s);
    return s;
  };
  EXPECT_EQ(text(CellValue::none()), "-");
  EXPECT_EQ(text(CellValue::ofInt(-42)), "-42");
  EXPECT_EQ(text(CellValue::ofDouble(1.5)), "1.500");
  EXPECT_EQ(text(CellValue::ofDouble(0.0625)), "0.062");
  EXPECT_EQ(text(CellValue::ofDouble(0.0001)), "1.000e-04");
  EXPECT_EQ(text(CellValue::ofDouble(2e9)), "2.000e+09");
  EXPECT_EQ(text(CellValue::ofDouble(0.0 / 0.0)), "-");
}

TEST(TreeRender, DrawsTheTree) {
  RenderRows in;
  in.order = {0, 1, 2, 3};
  in.names = {"ROOT", "a", "b", "c"};
  in.parents = {-1, 0, 1, 0};
  in.depths = {0, 1, 2, 1};
  in.columns = {
      {CellValue::ofInt(10), CellValue::ofInt(5), CellValue::none(), CellValue::ofDouble(2.0)}};
  in.titles = {"t"};
  in.titleLengths = {1};
  EXPECT_EQ(renderTreeRows(in),
            "    t  name\n   10  ROOT\n    5  \u251c\u2500 a\n    -  \u2502  \u2514\u2500 b\n"
            "2.000  \u2514\u2500 c");
}

}  // namespace
}  // namespace proton::viewer
