// PcSampleAttributor: files instruction (PC) samples under the kernel frames of the sessions
// that sample, as children named after the sampled source line.
//
//   PcSampleAttributor samples(kernels);           // kernels: the backend's KernelAttributor
//   kernels.sampleKernelsInto(&samples);           // kernel records now feed noteKernel()
//   StallReasonMap reasons = samples.stallReasons({{0, "smsp__pcsamp_..._selected"}, ...});
//   samples.add(batch.data(), batch.size(), reasons, lines);   // one buffer read from the GPU
//   samples.closeWindow(monotonicNs(), /*final=*/false);       // after each round of reads
//
// Tree data: <kernel frame>/<file:line@function> gets num_samples, num_stalled_samples and
// one stalled_<reason> per stall reason seen (all int, inclusive). Samples whose PC has no
// line information stay on the kernel frame (counted in pc_samples_without_line_info).
//
// Which kernel frame: the GPU samples continuously and names only the function (and its
// module), not the launch. Samples are read in rounds; the samples of one round were taken
// between the previous round that had samples, less the vendor's decode latency (kLatencyNs),
// and this round. (CUPTI's continuous mode hands most samples over only when a range ends:
// at a flush, or a module load after an unload; such a round spans the whole time before.)
// They are split among the kernels of their function that ran in that interval, by the time
// each ran in it (kernel times are on Proton's clock). A kernel stands for the set of frames
// its launch was filed under in the sampling sessions; the set is empty when no sampling
// session recorded it, and its share is then set aside (pc_samples_of_unrecorded_kernels).
// A round waits kSettleNs for the records of its kernels before it is filed; a final close
// files everything, giving samples with no kernel in their interval to the function's
// kernel nearest in time, or, if it never ran, counting them (pc_samples_unattributed).
//
//   round [from, to] x function --(kernel spans overlapping it, by time)--> frame sets
//   sample (module, function, pc) --LineTable--> "file:line@function" (cached per PC)
//
// Not thread-safe: the backend serialises every call with the lock it holds to process
// kernel records.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ids.h"

namespace proton {

class KernelAttributor;
class Session;

// One sampled instruction: how often it was seen with each stall reason.
struct StallCount {
  uint32_t reason = 0;  // the vendor's stall reason index
  uint32_t samples = 0;
};

struct PcSample {
  uint64_t module = 0;             // the vendor's module id (CUPTI: the cubin's CRC)
  const char *function = nullptr;  // as the vendor names it (mangled or not)
  uint64_t pcOffset = 0;           // from the function's start
  const StallCount *stalls = nullptr;
  uint32_t numStalls = 0;
};

// A frame a kernel was filed under, in one sampling session.
struct SampleTarget {
  Session *session = nullptr;
  PhaseId phase;
  NodeId node;
};

// Source position of an instruction, from the module's line information.
struct SourceLocation {
  std::string file;  // as recorded in the module (joined with its directory)
  uint32_t line = 0;
};

// Where line information comes from (CUPTI: the cubin's line table). nullopt when the module
// or the PC has none.
class LineTable {
 public:
  virtual ~LineTable() = default;
  virtual std::optional<SourceLocation> lookup(uint64_t module, const char *function,
                                               uint64_t pcOffset) = 0;
};

// "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "long_scoreboard"; other names are
// made snake_case the same way (lower case, runs of other characters become one '_').
std::string normalizeStallReason(std::string_view vendorName);

// The vendor's stall reason indexes mapped to Proton's per-reason metric slots.
class StallReasonMap {
 public:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  // Counters the GPU lists with its stall reasons that are not one (smsp__pcsamp_sample_count);
  // samples_data_dropped is counted as dropped.
  static constexpr uint32_t kNotAStall = UINT32_MAX - 1;
  static constexpr uint32_t kDropped = UINT32_MAX - 2;
  uint32_t slot(uint32_t vendorIndex) const {
    return vendorIndex < slots_.size() ? slots_[vendorIndex] : kUnknown;
  }
  // True when the GPU reports "<reason>_not_issued" (samples where the warp issued nothing),
  // which then define stalled samples; otherwise every sample but "selected" is stalled.
  bool hasNotIssued() const { return hasNotIssued_; }

 private:
  friend class PcSampleAttributor;
  std::vector<uint32_t> slots_;
  bool hasNotIssued_ = false;
};

class PcSampleAttributor {
 public:
  // Samples may be decoded this long after the GPU took them.
  static constexpr uint64_t kLatencyNs = 200'000'000;
  // A round is filed once the records of its kernels had this long to arrive.
  static constexpr uint64_t kSettleNs = 300'000'000;

  explicit PcSampleAttributor(KernelAttributor &kernels);
  ~PcSampleAttributor();

  // Whether the session records samples (its mode is "pcsampling").
  static bool samples(const Session &session);

  // Registers the stall reasons a GPU reports, by the vendor's index and name.
  StallReasonMap stallReasons(const std::vector<std::pair<uint32_t, std::string>> &reasons);

  // A kernel of `function` (its readable name) ran from startNs to endNs (Proton's clock),
  // filed under `targets` in the sampling sessions (none: no sampling session recorded it).
  void noteKernel(StringId function, const SampleTarget *targets, size_t n, uint64_t startNs,
                  uint64_t endNs);
  // One buffer of samples of the current round; `function` pointers need only live for the
  // call.
  void add(const PcSample *samples, size_t n, const StallReasonMap &reasons, LineTable &lines);
  // Ends the round read at nowNs and files every round that has settled (all when final).
  void closeWindow(uint64_t nowNs, bool final);
  // The session stops recording: it gets no more samples.
  void forgetSession(const Session &s);

 private:
  struct Held;
  struct Round;
  struct Span;
  struct FunctionState;
  struct Gathered;
  struct PcKey {
    uint64_t module;
    StringId function;
    uint64_t pcOffset;
    bool operator==(const PcKey &) const = default;
  };
  struct GatherKey {
    const Session *session;
    PhaseId phase;
    NodeId node;
    StringId frame;
    bool operator==(const GatherKey &) const = default;
  };
  struct KeyHash {
    size_t operator()(const PcKey &k) const noexcept;
    size_t operator()(const GatherKey &k) const noexcept;
  };
  using SetKey = std::vector<std::tuple<const Session *, uint64_t, uint32_t>>;

  uint32_t slotFor(const std::string &reason);
  uint32_t targetSet(const SampleTarget *targets, size_t n);
  bool sameTargets(uint32_t set, const SampleTarget *targets, size_t n) const;
  StringId frameFor(const PcSample &sample, StringId function, LineTable &lines);
  // Files one function's samples of a round; false: no kernel yet, keep them.
  bool fileRound(StringId function, uint64_t fromNs, uint64_t toNs, uint64_t nowNs,
                 std::vector<Held> &held, bool final);
  void gather(const SampleTarget &t, StringId frame, const uint64_t *slots, size_t n,
              bool notIssuedDefinesStalls);
  void writeGathered();
  uint64_t samplesIn(const uint64_t *slots, size_t n) const;

  KernelAttributor &kernels_;
  // Per-reason metric slots, shared by every GPU's stall reason map.
  std::vector<StringId> slotMetrics_;  // slot -> "stalled_<reason>"
  std::vector<uint8_t> slotKind_;      // slot -> all / not issued / selected
  std::unordered_map<std::string, uint32_t> slotByReason_;
  // Frame sets of launches, interned; set 0 is empty (no sampling session).
  std::vector<std::vector<SampleTarget>> sets_;
  std::map<SetKey, uint32_t> setIndex_;
  std::unordered_map<StringId, std::unique_ptr<FunctionState>> functions_;
  std::unordered_map<PcKey, StringId, KeyHash> frames_;  // kNoFrame: no line information
  std::unique_ptr<Round> current_;
  std::deque<Round> pending_;
  uint64_t lastRoundNs_ = 0;  // when the latest round with samples was read
  uint64_t openSinceNs_ = 0;  // kernels starting since then are aggregated per frame set
  size_t heldEntries_ = 0;
  std::vector<Gathered> gathered_;
  std::unordered_map<GatherKey, uint32_t, KeyHash> gatheredIndex_;
  StringId numSamples_, numStalled_;
};

}  // namespace proton
