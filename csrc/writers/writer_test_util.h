// Test-only helpers shared by the Hatchet writer golden tests: the sample profile both
// writers write, and reading (or, with PROTON_UPDATE_GOLDEN=1, regenerating) a golden file.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include "writers/writer.h"

namespace proton::testing {

inline StringId S(const std::string &s) { return StringTable::global().intern(s); }

// The sample profile every hatchet golden test writes.
struct Sample {
  PhaseData phase{PhaseId{0}};
  ProfileMetadata metadata;
  DeviceTable devices;

  Sample() {
    NodeId forward = phase.tree.child(kRootNode, S("forward"));
    NodeId gemm = phase.tree.child(forward, S("gemm"));
    phase.kernelAt(gemm).add(1000, 0, DeviceType::kCuda);
    phase.kernelAt(gemm).add(1000, 0, DeviceType::kCuda);
    phase.noteDevice(DeviceType::kCuda, 0);
    FlexMetrics &f = phase.flexAt(forward);
    f.add({MetricSpec::parse("flops"), int64_t{42}});
    f.add({MetricSpec::parse("util"), 0.5});
    f.add({MetricSpec::parse("tag"), std::string("fp16")});
    f.add({MetricSpec::parse("hist"), std::vector<double>{1.0, 2.5}});
    phase.flexAt(gemm).add({MetricSpec::parse("bytes (exc)"), int64_t{4096}});
    metadata.toolVersion = "0.1.0";
    metadata.commandLine = "python train.py --tag \"run 1\"";
    metadata.startTimeUnixNs = 1700000000000000000ull;
    metadata.sessionName = "golden";
    metadata.context = "shadow";
    metadata.data = "tree";
    metadata.backend = "cupti";
    metadata.stats = {{"activity_records_dropped", 0}, {"metrics_dropped_type_conflict", 3}};
    metadata.exclusiveMetrics = {"bytes"};
    devices.set({DeviceType::kCuda, 0, "90", 132, 1980000, 2619000, 5120});
  }
  ProfileView view() const { return {phase, metadata, devices, StringTable::global()}; }
};

inline std::string readGolden(const std::string &name, const std::string &actual) {
  std::string path = std::string(PROTON_GOLDEN_DIR) + "/" + name;
  if (getenv("PROTON_UPDATE_GOLDEN")) std::ofstream(path, std::ios::binary) << actual;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing golden file " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace proton::testing
