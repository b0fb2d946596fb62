// The CUPTI selector on stand-in libraries (testdata/fake_cupti.cc built as libcupti.so.12 and
// libcupti.so.13 with those SONAMEs): which major and file are chosen, which are refused and
// why, and that the error names every candidate. No GPU, no vendor header.
#include "backends/cupti/cupti_select.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace proton::cupti {
namespace {

namespace fs = std::filesystem;

const std::string kDir12 = std::string(PROTON_FAKE_CUPTI_DIR) + "/fake_cupti12";
const std::string kDir13 = std::string(PROTON_FAKE_CUPTI_DIR) + "/fake_cupti13";
const std::string kLib12 = kDir12 + "/libcupti.so.12";
const std::string kLib13 = kDir13 + "/libcupti.so.13";

// Both majors built, a driver that runs both, nothing loaded, no system loader path.
CuptiSearch search(std::vector<std::string> dirs = {}) {
  CuptiSearch s;
  s.dirs = std::move(dirs);
  s.driverVersion = 13000;
  s.builtMajors = {12, 13};
  s.useLoaderPath = false;
  return s;
}

// A fresh directory under the test's temporary directory.
std::string tempDir(const char *name) {
  fs::path dir =
      fs::temp_directory_path() / ("proton_select_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

TEST(CuptiSelect, ReadsTheMajorFromTheSoname) {
  EXPECT_EQ(sonameCuptiMajor(kLib12), 12);
  EXPECT_EQ(sonameCuptiMajor(kLib13), 13);
  EXPECT_EQ(sonameCuptiMajor(kDir13 + "/libcupti.so"), 13);  // the symlink CMake made
  EXPECT_EQ(sonameCuptiMajor("/proc/self/exe"), 0);          // ELF, not a libcupti
  EXPECT_EQ(sonameCuptiMajor(kDir12 + "/absent.so"), 0);
}

TEST(CuptiSelect, MajorOfApiVersion) {
  EXPECT_EQ(cuptiMajorOfVersion(18), 12);
  EXPECT_EQ(cuptiMajorOfVersion(28), 12);
  EXPECT_EQ(cuptiMajorOfVersion(130001), 13);
  EXPECT_EQ(cuptiMajorOfVersion(130500), 13);
}

TEST(CuptiSelect, OrderPutsThePreferredMajorFirstAndDropsWhatTheDriverCannotRun) {
  CuptiSearch s = search();  // a CUDA 13 driver runs both: CUDA 13's first
  EXPECT_EQ(cuptiMajorOrder(s), (std::vector<int>{13, 12}));
  s.driverVersion = 12040;
  std::string why;
  EXPECT_EQ(cuptiMajorOrder(s, &why), std::vector<int>{12});
  EXPECT_NE(why.find("CUDA 13's CUPTI left out: the driver runs CUDA 12.4 at most"),
            std::string::npos)
      << why;
  s.builtMajors = {13};
  s.driverVersion = 0;  // unknown: nothing left out
  EXPECT_EQ(cuptiMajorOrder(s), std::vector<int>{13});
}

// CUDA 12's CUPTI only where the driver runs nothing newer (cupti_select.h says why).
TEST(CuptiSelect, DefaultPolicyIsTheNewestMajorTheDriverRuns) {
  EXPECT_EQ(preferredCuptiMajor(12080), 12);  // a CUDA 12 driver runs CUDA 12's only
  EXPECT_EQ(preferredCuptiMajor(13000), 13);
  EXPECT_EQ(preferredCuptiMajor(13020), 13);
  EXPECT_EQ(preferredCuptiMajor(0), 13);  // driver version unknown
}

TEST(CuptiSelect, BothAvailableChoosesThePreferredMajor) {
  for (const std::vector<std::string> &dirs : {std::vector{kDir13, kDir12}, {kDir12, kDir13}}) {
    Result<CuptiLibrary> lib = findCupti(search(dirs));  // a CUDA 13 driver
    ASSERT_TRUE(lib.isOk()) << lib.status().message();
    EXPECT_EQ(lib.value().major, 13);
    EXPECT_EQ(lib.value().path, kLib13);
    EXPECT_EQ(lib.value().version, 130001u);  // the stand-in's cuptiGetVersion
  }
  CuptiSearch cuda12 = search({kDir13, kDir12});
  cuda12.driverVersion = 12080;
  Result<CuptiLibrary> lib = findCupti(cuda12);
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value().path, kLib12);
  EXPECT_EQ(lib.value().version, 28u);
}

TEST(CuptiSelect, OnlyTheOtherMajorAvailableIsUsed) {
  Result<CuptiLibrary> lib = findCupti(search({kDir13}));
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value().major, 13);
  EXPECT_EQ(lib.value().path, kLib13);
}

TEST(CuptiSelect, DriverTooOldForCuda13RefusesItAndSaysWhy) {
  CuptiSearch s = search({kDir13});
  s.driverVersion = 12040;
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_FALSE(lib.isOk());
  const std::string &m = lib.status().message();
  EXPECT_NE(m.find(kDir13 + "/libcupti.so: CUDA 13's CUPTI (looking for CUDA 12)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("the driver runs CUDA 12.4 at most"), std::string::npos) << m;
  EXPECT_NE(m.find("PROTON_CUPTI_LIB_PATH"), std::string::npos) << m;
}

TEST(CuptiSelect, OverrideFileWinsOverThePreference) {
  CuptiSearch s = search({kDir12, kDir13});
  s.overridePath = kLib12;  // CUDA 13's is preferred on this driver
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value().path, s.overridePath);
}

TEST(CuptiSelect, OverrideDirectoryWithBothMajorsUsesThePreferredOne) {
  std::string dir = tempDir("both");
  fs::create_symlink(kLib12, dir + "/libcupti.so.12");
  fs::create_symlink(kLib13, dir + "/libcupti.so.13");
  CuptiSearch s = search();
  s.overridePath = dir;
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value().major, 13);
  EXPECT_EQ(lib.value().path, dir + "/libcupti.so.13");
}

TEST(CuptiSelect, ALoadedCuptiIsTheOnlyOneUsed) {
  CuptiSearch s = search({kDir12, kDir13});
  s.loadedPath = kLib13;
  s.overridePath = kLib12;
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_TRUE(lib.isOk()) << lib.status().message();
  EXPECT_EQ(lib.value().major, 13);
  EXPECT_EQ(lib.value().path, kLib13);
}

TEST(CuptiSelect, ALoadedCuptiOfAMajorNotBuiltIsAnErrorNotASecondCupti) {
  CuptiSearch s = search({kDir12});
  s.builtMajors = {12};
  s.loadedPath = kLib13;
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_FALSE(lib.isOk());
  const std::string &m = lib.status().message();
  EXPECT_NE(m.find("already loaded in this process (" + kLib13 + ")"), std::string::npos) << m;
  EXPECT_NE(m.find(kLib13 + ": CUDA 13's CUPTI (looking for CUDA 12)"), std::string::npos) << m;
  EXPECT_NE(m.find("This build supports CUDA 12."), std::string::npos) << m;
}

TEST(CuptiSelect, AFileWhoseSonameDisagreesWithItsNameIsRefusedUnopened) {
  std::string dir = tempDir("liar");
  fs::copy_file(kLib13, dir + "/libcupti.so.12");  // named 12, SONAME libcupti.so.13
  CuptiSearch s = search({dir});
  s.builtMajors = {12};
  Result<CuptiLibrary> lib = findCupti(s);
  ASSERT_FALSE(lib.isOk());
  EXPECT_NE(lib.status().message().find(dir + "/libcupti.so.12: CUDA 13's CUPTI (looking for "
                                              "CUDA 12)"),
            std::string::npos)
      << lib.status().message();
}

TEST(CuptiSelect, NotALibraryIsNamedInTheError) {
  std::string dir = tempDir("junk");
  fs::copy_file("/proc/self/exe", dir + "/libcupti.so.12");
  Result<CuptiLibrary> lib = findCupti(search({dir}));
  ASSERT_FALSE(lib.isOk());
  EXPECT_NE(lib.status().message().find(dir + "/libcupti.so.12: no libcupti.so.<major> SONAME"),
            std::string::npos)
      << lib.status().message();
}

TEST(CuptiSelect, NothingFoundSaysSo) {
  Result<CuptiLibrary> lib = findCupti(search({tempDir("empty")}));
  ASSERT_FALSE(lib.isOk());
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(lib.status().message().find("(no candidate found)"), std::string::npos)
      << lib.status().message();
}

}  // namespace
}  // namespace proton::cupti
