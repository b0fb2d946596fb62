// Which libcupti this process uses: one library, of one CUPTI major (CUDA 12 or 13), chosen
// once and kept for the life of the process. No vendor header here: this is the neutral half
// of the CUPTI backend, compiled once; each major's backend (proton::cupti::v12, ::v13,
// compiled against that major's headers) takes the library chosen here.
//
//   Result<CuptiLibrary> lib = processCupti();   // first call searches and loads, then latched
//   if (lib.isOk()) useBackendOfMajor(lib.value().major);
//
// Search (findCupti):
//   1. a libcupti already mapped into the process (by PyTorch, JAX, another tool): it is the
//      only one allowed, since a process can use one CUPTI and a second copy would fight it
//      for the driver's tool hooks; PROTON_CUPTI_LIB_PATH naming another file is then noted
//      in the error list and ignored;
//   2. PROTON_CUPTI_LIB_PATH (a file or a directory), of either major;
//   3. for each major in cuptiMajorOrder() (preferredCuptiMajor() first, majors the driver
//      cannot run left out): the Python layer's directories (NVIDIA wheels, Triton's bundled
//      CUPTI), the CUDA toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda), then
//      libcupti.so.<major> on the system loader path.
// A file's major is read from its ELF SONAME (libcupti.so.<major>) before it is opened, so a
// library of the wrong major is never loaded; cuptiGetVersion confirms it after dlopen. Only
// the chosen library stays loaded. The error, when none is usable, names every candidate
// tried and why it was not used.
//
// Thread-safe: processCupti() serialises under a lock; CuptiLibrary values are immutable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace proton::cupti {

// The CUPTI majors this build has a backend for, oldest first.
std::vector<int> builtCuptiMajors();

// CUPTI 13 numbers its API 130000 and up; CUDA 12's CUPTI used small integers (18..28).
int cuptiMajorOfVersion(uint32_t apiVersion);

// The CUDA major of an ELF shared object named by its SONAME "libcupti.so.<major>"; 0 when
// the file has no such SONAME (not a libcupti, unreadable, not ELF64).
int sonameCuptiMajor(const std::string &path);

// What decides the search: filled from the process by fromProcess(), by hand in tests.
struct CuptiSearch {
  std::string overridePath;               // PROTON_CUPTI_LIB_PATH: a file or a directory
  std::string loadedPath;                 // a libcupti already mapped into the process
  std::vector<std::string> dirs;          // from the Python layer (wheels, Triton)
  std::vector<std::string> toolkitRoots;  // $CUDA_HOME, $CUDA_PATH, /usr/local/cuda
  int driverVersion = 0;                  // cuDriverGetVersion (12040 = CUDA 12.4); 0 unknown
  std::vector<int> builtMajors;           // majors with a backend in this build
  bool useLoaderPath = true;              // also dlopen("libcupti.so.<major>") by name

  static CuptiSearch fromProcess();
};

// The major searched first when the driver runs both: the newest one the driver runs.
// Measured on an H100 with a CUDA 13 driver and PyTorch cu13 (issue 14, item 1): CUDA 12's
// CUPTI (cheaper on a GPU-bound matmul, about 1% against 8-14%) reported kernel durations
// four orders of magnitude too long (264 s for 20 matmuls that CUDA events timed at 28 ms),
// and PyTorch mapped its own libcupti.so.13 into the process after Proton had loaded CUDA 12's,
// so two CUPTIs shared the process. CUDA 12's CUPTI is therefore used where the driver runs
// CUDA 12 only, or where the process already loaded it, or PROTON_CUPTI_LIB_PATH names it.
int preferredCuptiMajor(int driverVersion);

// The oldest driver (cuDriverGetVersion) that runs a CUPTI of `major`: CUDA 12.0 and 13.0.
int minimumDriverVersion(int major);

// The majors to search, in order: builtMajors that the driver runs (all of them when the
// driver version is unknown), preferredCuptiMajor() first. `why` (optional) gets one line per
// major left out.
std::vector<int> cuptiMajorOrder(const CuptiSearch &search, std::string *why = nullptr);

struct CuptiLibrary {
  std::string path;        // the file used
  void *handle = nullptr;  // dlopen handle, never closed
  int major = 0;
  uint32_t version = 0;  // cuptiGetVersion()
};

// Searches as described above and loads the one library chosen. kUnavailable, naming every
// candidate tried, when none is usable.
Result<CuptiLibrary> findCupti(const CuptiSearch &search);

// findCupti(CuptiSearch::fromProcess()) once per process; a success is kept for good (later
// calls return it), a failure loads nothing and the next call searches again.
Result<CuptiLibrary> processCupti();

}  // namespace proton::cupti
