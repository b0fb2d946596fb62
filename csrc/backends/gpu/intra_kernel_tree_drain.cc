// IntraKernelBuffers' tree drain: the ring's tree slots summed on the GPU (the driver's
// loadTreeReduce, cupti/tree_reduce.cu for CUDA), or on the host where it cannot be loaded; one
// reduced slot per launch read back, and filed into the sessions on the filing thread
// (intra_kernel_buffers.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "backends/gpu/gpu_driver.h"
#include "backends/gpu/intra_kernel_buffers.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

// A drain reduces its tree slots in chunks of this many launches.
constexpr size_t kReduceChunk = 4096;
// The tree reduction is built for blocks of this many threads (tree_reduce.cu's kThreads).
constexpr uint32_t kReduceThreads = 256;

struct SlotDesc {
  uint64_t ptr;
  uint64_t bytes;
};

Counter &stat(const char *name) { return Stats::global().counter(name); }

}  // namespace

instrumentation::IntraLaunch IntraKernelBuffers::launchOf(const Ring &ring, const SlotRecord &slot,
                                                          instrumentation::IntraTarget *targets) {
  size_t gone = 0;
  size_t n =
      kernelTargets(slot.entries, slot.numEntries, slot.symbol, slot.launchName, targets, &gone);
  // Read back after the last flush of every session that recorded it (its drain was put off
  // for a capture, or the launch was still in its call), while another session went on: lost.
  if (n == 0 && gone) stat("instrumentation_launches_unrecorded").add();
  return {targets, n, ring.device, slot.startNs, ring.cyclesPerNs};
}

void IntraKernelBuffers::fileTreeSlot(const Ring &ring, const SlotRecord &slot,
                                      const uint8_t *reduced) {
  instrumentation::IntraTarget targets[LaunchInfo::kMaxEntries];
  fileReduced(reduced, launchOf(ring, slot, targets));
}

void IntraKernelBuffers::fileReduced(const uint8_t *reduced,
                                     const instrumentation::IntraLaunch &launch) {
  // A replay's copy holds more than one launch where the graph replayed while no Proton
  // session ran (nothing copied its slot out then): those go with it (counted).
  uint32_t launches = 0;
  std::memcpy(&launches, reduced + 12, 4);
  if (launches > 1) stat("instrumentation_graph_replays_merged").add(launches - 1);
  std::lock_guard decoding(decoderMu_);
  decoder_.fileTree(reduced, launch);
}

// Reduced tree slots read back by a drain, filed on the filing thread.
struct IntraKernelBuffers::TreeJob {
  struct Launch {
    instrumentation::IntraTarget targets[LaunchInfo::kMaxEntries];
    instrumentation::IntraLaunch launch;  // its targets are `targets`
  };
  std::vector<uint8_t> reduced;  // kReducedTreeBytes per launch
  std::vector<Launch> launches;
};

void IntraKernelBuffers::postTreeJob(const Ring &ring, const SlotRecord *const *slots,
                                     std::vector<uint8_t> reduced) {
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  auto job = std::make_shared<TreeJob>();
  job->launches.resize(reduced.size() / kOut);
  for (size_t i = 0; i < job->launches.size(); ++i)
    job->launches[i].launch = launchOf(ring, *slots[i], job->launches[i].targets);
  job->reduced = std::move(reduced);
  auto file = [this, job] {
    for (size_t i = 0; i < job->launches.size(); ++i)
      fileReduced(job->reduced.data() + i * kOut, job->launches[i].launch);
  };
  try {
    filer_.post(job->reduced.size(), [this, job, file] {
      file();
      std::lock_guard spare(spareMu_);  // the buffer, for the next drain's read-back
      if (job->reduced.capacity() > spareReduced_.capacity()) spareReduced_.swap(job->reduced);
    });
  } catch (const std::exception &) {  // no filing thread: filed here
    file();
  }
}

bool IntraKernelBuffers::readBack(const Driver &driver, Stream stream, void *to, DevicePtr from,
                                  size_t bytes) {
  return driver.memcpyDtoHAsync(to, from, bytes, stream) == kSuccess &&
         driver.streamSynchronize(stream) == kSuccess;
}

bool IntraKernelBuffers::loadReduce(const Driver &driver, Ring &ring) {
  if (ring.reduceTried) return ring.reduce != nullptr;
  ring.reduceTried = true;
  RelaxedCaptureMode relaxed(driver);  // another thread may be capturing, in global mode
  Function fn = nullptr;
  if (driver.loadTreeReduce(&fn) != kSuccess ||
      driver.memAlloc(&ring.reduceDescs, kReduceChunk * sizeof(SlotDesc)) != kSuccess ||
      driver.memAlloc(&ring.reduceOut, kReduceChunk * instrumentation::kReducedTreeBytes) !=
          kSuccess) {
    stat("instrumentation_tree_reduced_on_host").add();
    std::fprintf(stderr,
                 "[PROTON] the GPU tree reduction could not be loaded on device %d; "
                 "intra-kernel sums are added up on the host (slower drains).\n",
                 ring.device);
    return false;
  }
  ring.reduce = fn;
  return true;
}

void IntraKernelBuffers::drainTree(const Driver &driver, Ring &ring) {
  std::vector<const SlotRecord *> tree;
  for (const SlotRecord &slot : ring.slots)
    if (!slot.trace && slot.numEntries) tree.push_back(&slot);  // (0: counted as lost)
  if (tree.empty()) return;
  constexpr size_t kOut = instrumentation::kReducedTreeBytes;
  if (!loadReduce(driver, ring)) {
    // Host fallback: copy the slots back and reduce them here.
    std::vector<uint8_t> host(ring.end);
    if (!readBack(driver, ring.ownStream, host.data(), ring.base, ring.end)) {
      stat("instrumentation_launches_unrecorded").add(tree.size());
      return;
    }
    uint8_t reduced[kOut];
    for (const SlotRecord *slot : tree) {
      instrumentation::reduceTreeSlot(host.data() + slot->offset, slot->bytes, reduced);
      fileTreeSlot(ring, *slot, reduced);
    }
    return;
  }
  std::vector<SlotDesc> descs;
  for (size_t first = 0; first < tree.size(); first += kReduceChunk) {
    size_t n = std::min(kReduceChunk, tree.size() - first);
    // A buffer a job before gave back, if any: a fresh one is zeroed and faulted in (for a
    // full 256 MB ring of 1023 softmax launches, 2 of the drain's 3.5 ms on an H100).
    std::vector<uint8_t> host;
    {
      std::lock_guard spare(spareMu_);
      host.swap(spareReduced_);
    }
    host.resize(n * kOut);
    descs.clear();
    for (size_t i = 0; i < n; ++i)
      descs.push_back({ring.base + tree[first + i]->offset, tree[first + i]->bytes});
    void *args[] = {&ring.reduceDescs, &ring.reduceOut};
    Stream stream = ring.ownStream;  // the copies and the reduction, in order
    bool ok = driver.memcpyHtoDAsync(ring.reduceDescs, descs.data(), n * sizeof(SlotDesc),
                                     stream) == kSuccess;
    // (Not a kernel of the user's: the driver files its launch in no session.)
    ok = ok && driver.launchKernel(ring.reduce, static_cast<unsigned>(n), 1, 1, kReduceThreads, 1,
                                   1, 0, stream, args, nullptr) == kSuccess;
    ok = ok && readBack(driver, stream, host.data(), ring.reduceOut, n * kOut);
    if (!ok) {  // these launches and the ones after them cannot be filed
      stat("instrumentation_launches_unrecorded").add(tree.size() - first);
      return;
    }
    postTreeJob(ring, tree.data() + first, std::move(host));
  }
}

}  // namespace proton::gpu
