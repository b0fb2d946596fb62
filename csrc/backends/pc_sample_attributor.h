// PcSampleAttributor: files instruction (PC) samples under the kernel frames of the sessions
// that sample, as children named after the sampled source line.
//
//   PcSampleAttributor samples(kernels);           // kernels: the backend's KernelAttributor
//   kernels.sampleKernelsInto(&samples);           // kernel records now feed noteKernel()
//   StallReasonMap reasons = samples.stallReasons({{0, "smsp__pcsamp_..._selected"}, ...});
//   samples.add(batch.data(), batch.size(), reasons, lines);   // one buffer read from the GPU
//   samples.closeWindow(/*final=*/false);          // after every read of every context
//
// Tree data: <kernel frame>/<file:line@function> gets num_samples, num_stalled_samples and
// one stalled_<reason> per stall reason seen (all int, inclusive). Samples whose PC has no
// line information stay on the kernel frame (counted in pc_samples_without_line_info).
//
// Which kernel frame: the vendor samples continuously and names only the function (and its
// module), not the launch. A window runs from one read of the sample buffers to the next;
// a function's samples go to the frames its kernels were filed under in that window (in the
// previous one when none of its kernels finished in this one), in every sampling session.
// When one function ran under several frames of a session in a window, its samples are
// split among them in proportion to kernel time (pc_samples_apportioned counts them).
// Samples of a function with no kernel yet are held for later windows; at a final close
// they are dropped and counted (pc_samples_unattributed).
//
//   sample ──(function)──> window targets {session, phase, kernel node, kernel ns}
//          ──(module, pc)──> LineTable ──> "file:line@function" (cached per PC)
//
// Not thread-safe: the backend serialises add/noteKernel/closeWindow/forgetSession with the
// lock it already holds to process kernel records.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

// Source position of an instruction, from the module's line information.
struct SourceLocation {
  std::string file;  // as recorded in the module (joined with its directory)
  uint32_t line = 0;
};

// Where line information comes from (CUPTI: the cubin's line table). Called once per
// distinct (module, function, pc); nullopt when the module or the PC has none.
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
  uint32_t slot(uint32_t vendorIndex) const {
    return vendorIndex < slots_.size() ? slots_[vendorIndex] : kUnknown;
  }
  // True when the GPU reports "<reason>_not_issued" (samples where the warp issued nothing),
  // which then define stalled samples; otherwise every sample but "selected" is stalled.
  bool hasNotIssued() const { return hasNotIssued_; }
  size_t size() const { return slots_.size(); }

 private:
  friend class PcSampleAttributor;
  std::vector<uint32_t> slots_;
  bool hasNotIssued_ = false;
};

class PcSampleAttributor {
 public:
  explicit PcSampleAttributor(KernelAttributor &kernels);
  ~PcSampleAttributor();

  // Whether the session records samples (its mode is "pcsampling").
  static bool samples(const Session &session);

  // Registers the stall reasons a GPU reports, by the vendor's index and name.
  StallReasonMap stallReasons(const std::vector<std::pair<uint32_t, std::string>> &reasons);

  // A kernel of `function` (its readable name) ran for durationNs under node of session s.
  void noteKernel(StringId function, Session &s, PhaseId phase, NodeId node, uint64_t durationNs);
  // One buffer of samples; `function` pointers need only live for the call.
  void add(const PcSample *samples, size_t n, const StallReasonMap &reasons, LineTable &lines);
  // Ends a window: writes what add() gathered into the sessions. final: samples still without
  // a kernel are dropped and counted instead of being held.
  void closeWindow(bool final);
  // The session stops recording: forget every target and sample of it.
  void forgetSession(const Session &s);

 private:
  struct Target;
  struct Held;
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

  FunctionState &function(StringId name);
  StringId frameFor(const PcSample &sample, StringId function, LineTable &lines);
  // Files per-slot counts under the function's targets (split within each session by kernel
  // time), or holds them while the function has none.
  void file(FunctionState &f, StringId frame, const std::vector<uint64_t> &slots,
            bool notIssuedDefinesStalls);
  void hold(FunctionState &f, StringId frame, const std::vector<uint64_t> &slots,
            bool notIssuedDefinesStalls);
  void gather(const Target &t, StringId frame, const uint64_t *slots, size_t n,
              bool notIssuedDefinesStalls);
  void writeGathered();
  uint32_t slotFor(const std::string &reason);

  KernelAttributor &kernels_;
  // Per-reason metric slots, shared by every GPU's stall reason map.
  std::vector<StringId> slotMetrics_;  // slot -> "stalled_<reason>"
  std::vector<uint8_t> slotKind_;      // slot -> kAll / kNotIssued / kSelected
  std::unordered_map<std::string, uint32_t> slotByReason_;
  std::unordered_map<StringId, std::unique_ptr<FunctionState>> functions_;
  std::unordered_map<PcKey, StringId, KeyHash> frames_;  // kNoFrame: no line information
  std::vector<Gathered> gathered_;
  std::unordered_map<GatherKey, uint32_t, KeyHash> gatheredIndex_;
  size_t heldEntries_ = 0;
  StringId numSamples_, numStalled_;
};

}  // namespace proton
