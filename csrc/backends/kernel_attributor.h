// KernelAttributor: files vendor-neutral kernel records under the contexts their launches
// were attributed to, in every session that was recording at launch time.
//
//   KernelAttributor attributor(launches, captures);
//   attributor.add(KernelRecord{corr, startNs, endNs, device, stream, "vadd_kernel", 0});
//
// Tree data: ROOT/.../<launch context>/[<captured_at>/<capture context>/]<kernel> gets
// time (ns) and count; <kernel> is the name launch metadata gave (at launch, or at capture
// for a graph's kernel, whose metadata metrics are then added at every replay). A graph's
// kernel is not filed in sessions that were deactivated when it was captured. Trace data: one slice
// on the device's stream lane, pointing at that node for its call stack, with the launch time and
// thread for the launch->kernel arrow. Records whose launch is unknown are counted
// (kernel_records_unmatched), never guessed. While instruction sampling runs, every kernel is also
// noted in the PcSampleAttributor with the nodes it was filed under in sampling sessions, where its
// samples then go.
//
// Not thread-safe: the backend processes one activity buffer at a time.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "backends/capture_registry.h"
#include "backends/launch_table.h"
#include "core/metric.h"

namespace proton {

struct KernelRecord {
  uint64_t correlation = 0;
  uint64_t startNs = 0;
  uint64_t endNs = 0;
  int32_t device = 0;
  uint32_t stream = 0;
  const char *name = nullptr;  // as the vendor gives it (mangled or not); stable per kernel
  uint64_t graphNodeId = 0;    // 0: not launched from a graph
  int64_t gridId = 0;          // the launch's grid id (%gridid: counted per context)
  uint32_t context = 0;        // the vendor's id of the context it ran in
  DeviceType deviceType = DeviceType::kCuda;
  // False for a record with no end, or an end before its start: a flush forced out the record
  // of a kernel still running (in a context it could not synchronise).
  bool timed() const { return endNs != 0 && endNs >= startNs; }
};

class PcSampleAttributor;

// A kernel's name as users read it: demangled when it is a mangled C++ name.
std::string readableKernelName(const char *name);

class KernelAttributor {
 public:
  KernelAttributor(LaunchTable &launches, CaptureRegistry &captures);

  void add(const KernelRecord &record);
  // Kernels of sampling sessions are noted in `samples` from now on (nullptr: no longer).
  void sampleKernelsInto(PcSampleAttributor *samples) { samples_ = samples; }
  // Called with every record once it is filed (intra-kernel buffers align their slices to the
  // kernel's start), with where it went: per session, the node its kernel frame hangs under
  // (a graph's kernel: <launch context>/<captured_at>/<capture context>), `named` where that
  // frame is `launchName` rather than the kernel's own name; none for a record not filed.
  // nullptr: no observer.
  using RecordObserver = void (*)(const KernelRecord &, const LaunchEntry *filedUnder, size_t n,
                                  StringId launchName);
  void observeRecords(RecordObserver observer) { observer_ = observer; }
  // The readable (demangled) name of a kernel, interned; cached by the vendor's pointer.
  StringId kernelName(const char *name);

 private:
  struct CachedName {
    std::string text;
    StringId id;
  };

  LaunchTable &launches_;
  CaptureRegistry &captures_;
  PcSampleAttributor *samples_ = nullptr;
  RecordObserver observer_ = nullptr;
  std::unordered_map<const char *, CachedName> names_;
  StringId capturedAt_;
  bool warnedUncaptured_ = false;
};

}  // namespace proton
