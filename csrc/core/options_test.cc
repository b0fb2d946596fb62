#include "core/options.h"

#include <gtest/gtest.h>

namespace proton {
namespace {

TEST(OptionsTest, ParsesEnumsCaseInsensitively) {
  EXPECT_EQ(parseContextKind("shadow").value(), ContextKind::kShadow);
  EXPECT_EQ(parseContextKind("PYTHON").value(), ContextKind::kPython);
  EXPECT_EQ(parseDataKind("Trace").value(), DataKind::kTrace);
  EXPECT_EQ(parseDataKind("tree").value(), DataKind::kTree);
  EXPECT_EQ(parseBackendKind("").value(), BackendKind::kAuto);
  EXPECT_EQ(parseBackendKind("CUPTI").value(), BackendKind::kCupti);
  EXPECT_EQ(parseBackendKind("rocprofiler").value(), BackendKind::kRocprofiler);
  EXPECT_EQ(parseOutputFormat("").value(), OutputFormat::kDefault);
  EXPECT_EQ(parseOutputFormat("hatchet_msgpack").value(), OutputFormat::kHatchetMsgpack);
  EXPECT_EQ(parseOutputFormat("chrome_trace").value(), OutputFormat::kChromeTrace);
}

TEST(OptionsTest, UnknownValueListsAllowedValues) {
  Result<ContextKind> c = parseContextKind("Cuda");
  ASSERT_FALSE(c.isOk());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "[PROTON] Unknown context source: 'Cuda'. Allowed values: shadow, python, native");
  EXPECT_EQ(parseDataKind("").status().message(),
            "[PROTON] Unknown data: ''. Allowed values: tree, trace");
  EXPECT_EQ(parseBackendKind("none").status().message(),
            "[PROTON] Unknown backend: 'none'. Allowed values: cupti, roctracer, rocprofiler, "
            "instrumentation");
  EXPECT_EQ(parseOutputFormat("json").status().message(),
            "[PROTON] Unknown output format: 'json'. Allowed values: hatchet, hatchet_msgpack, "
            "chrome_trace");
}

TEST(OptionsTest, NamesRoundTrip) {
  EXPECT_STREQ(contextKindName(ContextKind::kPython), "python");
  EXPECT_STREQ(dataKindName(DataKind::kTrace), "trace");
  EXPECT_STREQ(backendKindName(BackendKind::kAuto), "none");
  EXPECT_STREQ(backendKindName(BackendKind::kInstrumentation), "instrumentation");
  EXPECT_STREQ(outputFormatName(OutputFormat::kHatchet), "hatchet");
  EXPECT_STREQ(outputFormatName(OutputFormat::kDefault), "");
  for (OutputFormat f :
       {OutputFormat::kHatchet, OutputFormat::kHatchetMsgpack, OutputFormat::kChromeTrace})
    EXPECT_EQ(parseOutputFormat(outputFormatName(f)).value(), f);
}

TEST(ModeSpecTest, EmptyAndDefaultAreTheDefaultMode) {
  EXPECT_EQ(parseModeSpec("").value().name, "");
  EXPECT_EQ(parseModeSpec("DEFAULT").value().name, "");
  EXPECT_TRUE(parseModeSpec("default").value().options.empty());
}

TEST(ModeSpecTest, ParsesNameAndOptions) {
  ModeSpec m = parseModeSpec("PCSampling:Interval=1000:Extra=AbC").value();
  EXPECT_EQ(m.name, "pcsampling");
  EXPECT_EQ(m.options,
            (std::map<std::string, std::string>{{"interval", "1000"}, {"extra", "AbC"}}));
  EXPECT_EQ(m.toString(), "pcsampling:extra=AbC:interval=1000");
  EXPECT_EQ(parseModeSpec("mma:x=").value().options.at("x"), "");
  // The default mode with options reads back as it was written (it read ":granularity=warp").
  EXPECT_EQ(parseModeSpec("default:granularity=warp").value().toString(),
            "default:granularity=warp");
  EXPECT_EQ(parseModeSpec("default").value().toString(), "");
}

TEST(ModeSpecTest, MalformedOptionIsAnError) {
  for (const char *bad : {"pcsampling:interval", "pcsampling:=5", "pcsampling:"}) {
    Result<ModeSpec> m = parseModeSpec(bad);
    ASSERT_FALSE(m.isOk()) << bad;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(parseModeSpec("pcsampling:interval").status().message(),
            "[PROTON] Malformed mode option 'interval': expected key=value, as in "
            "'pcsampling:interval=1000'");
}

TEST(ModeSpecTest, UnknownModeListsModes) {
  EXPECT_EQ(parseModeSpec("fast:x=1").status().message(),
            "[PROTON] Unknown mode: 'fast'. Allowed values: default, pcsampling, "
            "periodic_flushing, mma, instrumentation");
}

TEST(SessionOptionsTest, ParsesAllFields) {
  SessionOptions o = parseSessionOptions("out/run", "shadow", "trace", "", "mma").value();
  EXPECT_EQ(o.path, "out/run");
  EXPECT_EQ(o.context, ContextKind::kShadow);
  EXPECT_EQ(o.data, DataKind::kTrace);
  EXPECT_EQ(o.backend, BackendKind::kAuto);
  EXPECT_EQ(o.mode.name, "mma");
}

TEST(SessionOptionsTest, FirstBadFieldIsReported) {
  Result<SessionOptions> o = parseSessionOptions("p", "shadow", "tree", "nccl", "bogus");
  ASSERT_FALSE(o.isOk());
  EXPECT_EQ(o.status().message().rfind("[PROTON] Unknown backend: 'nccl'", 0), 0u);
}

TEST(FormatTest, DefaultFormatFollowsData) {
  EXPECT_EQ(defaultFormat(DataKind::kTree), OutputFormat::kHatchet);
  EXPECT_EQ(defaultFormat(DataKind::kTrace), OutputFormat::kChromeTrace);
}

TEST(FormatTest, SupportedCombinations) {
  EXPECT_TRUE(checkFormatSupported(DataKind::kTree, OutputFormat::kDefault).isOk());
  EXPECT_TRUE(checkFormatSupported(DataKind::kTree, OutputFormat::kHatchet).isOk());
  EXPECT_TRUE(checkFormatSupported(DataKind::kTree, OutputFormat::kHatchetMsgpack).isOk());
  EXPECT_TRUE(checkFormatSupported(DataKind::kTrace, OutputFormat::kDefault).isOk());
  EXPECT_TRUE(checkFormatSupported(DataKind::kTrace, OutputFormat::kChromeTrace).isOk());
}

TEST(FormatTest, UnsupportedCombinationsSayWhatToUse) {
  Status s = checkFormatSupported(DataKind::kTree, OutputFormat::kChromeTrace);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "[PROTON] Output format 'chrome_trace' cannot be written for data='tree'. Use "
            "'hatchet' or 'hatchet_msgpack' or data='trace'");
  EXPECT_EQ(checkFormatSupported(DataKind::kTrace, OutputFormat::kHatchetMsgpack).message(),
            "[PROTON] Output format 'hatchet_msgpack' cannot be written for data='trace'. Use "
            "'chrome_trace' or data='tree'");
}

}  // namespace
}  // namespace proton
