#include "backends/pc_sample_attributor.h"

#include <algorithm>
#include <cctype>

#include "backends/kernel_attributor.h"
#include "core/metric.h"
#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton {
namespace {

constexpr StringId kNoFrame{UINT32_MAX};
constexpr uint8_t kAll = 0, kNotIssued = 1, kSelected = 2;
// Samples held for functions with no kernel yet, in (function, frame) entries.
constexpr size_t kMaxHeldEntries = size_t(1) << 16;

Counter &stat(const char *name) { return Stats::global().counter(name); }

Counter &withoutLine() {
  static Counter &c = stat("pc_samples_without_line_info");
  return c;
}
Counter &unattributed() {
  static Counter &c = stat("pc_samples_unattributed");
  return c;
}
Counter &apportioned() {
  static Counter &c = stat("pc_samples_apportioned");
  return c;
}
Counter &clearedPhase() {
  static Counter &c = stat("pc_samples_for_cleared_phase");
  return c;
}
Counter &unknownReason() {
  static Counter &c = stat("pc_samples_with_unknown_stall_reason");
  return c;
}
Counter &metricConflicts() {
  static Counter &c = stat("pc_samples_rejected_metric_type");
  return c;
}

constexpr std::string_view kPrefixes[] = {"smsp__pcsamp_warps_issue_stalled_", "smsp__pcsamp_"};

inline size_t mix(size_t h, uint64_t v) {
  return h ^ (std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

}  // namespace

// A frame a function's kernels were filed under in this window (or the last one). expected
// and assigned carry the split of samples among several frames of one session.
struct PcSampleAttributor::Target {
  Session *session;
  PhaseId phase;
  NodeId node;
  uint64_t weightNs;
  double expected = 0;
  uint64_t assigned = 0;
};

struct PcSampleAttributor::Held {
  StringId frame;
  bool notIssuedDefinesStalls;
  std::vector<uint64_t> slots;
};

struct PcSampleAttributor::FunctionState {
  std::vector<Target> recent;  // this window
  std::vector<Target> last;    // the latest earlier window with kernels of this function
  std::vector<Held> held;
  std::unordered_map<GatherKey, uint32_t, KeyHash> recentIndex;  // frame unused
  bool recentSorted = true;  // by session, so that a session's targets are one run

  void sortRecent() {
    if (recentSorted) return;
    std::stable_sort(recent.begin(), recent.end(), [](const Target &a, const Target &b) {
      return std::less<const Session *>{}(a.session, b.session);
    });
    recentIndex.clear();
    for (size_t i = 0; i < recent.size(); ++i)
      recentIndex[GatherKey{recent[i].session, recent[i].phase, recent[i].node, {}}] = uint32_t(i);
    recentSorted = true;
  }
};

struct PcSampleAttributor::Gathered {
  GatherKey key;
  Session *session;
  uint64_t samples = 0;
  uint64_t stalled = 0;
  std::vector<uint64_t> slots;
};

std::string normalizeStallReason(std::string_view name) {
  for (std::string_view prefix : kPrefixes) {
    if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  std::string out;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out += static_cast<char>(std::tolower(u));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "unknown" : out;
}

size_t PcSampleAttributor::KeyHash::operator()(const PcKey &k) const noexcept {
  return mix(mix(std::hash<uint64_t>{}(k.module), k.function.value), k.pcOffset);
}

size_t PcSampleAttributor::KeyHash::operator()(const GatherKey &k) const noexcept {
  size_t h = std::hash<const void *>{}(k.session);
  return mix(mix(mix(h, k.phase.value), k.node.value), k.frame.value);
}

PcSampleAttributor::PcSampleAttributor(KernelAttributor &kernels)
    : kernels_(kernels),
      numSamples_(StringTable::global().intern("num_samples")),
      numStalled_(StringTable::global().intern("num_stalled_samples")) {
  withoutLine();
  unattributed();
  apportioned();
  clearedPhase();
  unknownReason();
  metricConflicts();
}

PcSampleAttributor::~PcSampleAttributor() = default;

bool PcSampleAttributor::samples(const Session &session) {
  return session.options().mode.name == "pcsampling";
}

uint32_t PcSampleAttributor::slotFor(const std::string &reason) {
  auto it = slotByReason_.find(reason);
  if (it != slotByReason_.end()) return it->second;
  uint32_t slot = static_cast<uint32_t>(slotMetrics_.size());
  slotMetrics_.push_back(StringTable::global().intern("stalled_" + reason));
  constexpr std::string_view kSuffix = "_not_issued";
  bool notIssued = reason.size() > kSuffix.size() &&
                   std::string_view(reason).substr(reason.size() - kSuffix.size()) == kSuffix;
  slotKind_.push_back(notIssued ? kNotIssued : reason == "selected" ? kSelected : kAll);
  slotByReason_.emplace(reason, slot);
  return slot;
}

StallReasonMap PcSampleAttributor::stallReasons(
    const std::vector<std::pair<uint32_t, std::string>> &reasons) {
  StallReasonMap map;
  for (const auto &[index, name] : reasons) {
    if (index >= map.slots_.size()) map.slots_.resize(index + 1, StallReasonMap::kUnknown);
    uint32_t slot = slotFor(normalizeStallReason(name));
    map.slots_[index] = slot;
    if (slotKind_[slot] == kNotIssued) map.hasNotIssued_ = true;
  }
  return map;
}

PcSampleAttributor::FunctionState &PcSampleAttributor::function(StringId name) {
  std::unique_ptr<FunctionState> &f = functions_[name];
  if (!f) f = std::make_unique<FunctionState>();
  return *f;
}

void PcSampleAttributor::noteKernel(StringId function, Session &s, PhaseId phase, NodeId node,
                                    uint64_t durationNs) {
  if (node == kNoNode) return;
  FunctionState &f = this->function(function);
  uint64_t weight = std::max<uint64_t>(durationNs, 1);
  auto [it, inserted] =
      f.recentIndex.try_emplace(GatherKey{&s, phase, node, {}}, uint32_t(f.recent.size()));
  if (!inserted) {
    f.recent[it->second].weightNs += weight;
    return;
  }
  if (!f.recent.empty() && std::less<const Session *>{}(&s, f.recent.back().session))
    f.recentSorted = false;
  f.recent.push_back(Target{&s, phase, node, weight});
}

StringId PcSampleAttributor::frameFor(const PcSample &sample, StringId function,
                                      LineTable &lines) {
  PcKey key{sample.module, function, sample.pcOffset};
  auto it = frames_.find(key);
  if (it != frames_.end()) return it->second;
  StringId frame = kNoFrame;
  if (std::optional<SourceLocation> loc =
          lines.lookup(sample.module, sample.function, sample.pcOffset)) {
    StringTable &strings = StringTable::global();
    frame = strings.intern(loc->file + ":" + std::to_string(loc->line) + "@" +
                           std::string(strings.view(function)));
  }
  frames_.emplace(key, frame);
  return frame;
}

void PcSampleAttributor::add(const PcSample *samples, size_t n, const StallReasonMap &reasons,
                             LineTable &lines) {
  std::vector<uint64_t> slots;
  for (size_t i = 0; i < n; ++i) {
    const PcSample &sample = samples[i];
    slots.assign(slotMetrics_.size(), 0);
    uint64_t total = 0;
    for (uint32_t k = 0; k < sample.numStalls; ++k) {
      const StallCount &stall = sample.stalls[k];
      uint32_t slot = reasons.slot(stall.reason);
      if (slot == StallReasonMap::kUnknown) {
        unknownReason().add(stall.samples);
        continue;
      }
      slots[slot] += stall.samples;
      if (slotKind_[slot] != kNotIssued) total += stall.samples;
    }
    if (total == 0) continue;
    StringId name = kernels_.kernelName(sample.function);
    StringId frame = frameFor(sample, name, lines);
    if (frame == kNoFrame) withoutLine().add(total);
    file(function(name), frame, slots, reasons.hasNotIssued());
  }
}

void PcSampleAttributor::file(FunctionState &f, StringId frame, const std::vector<uint64_t> &slots,
                              bool notIssuedDefinesStalls) {
  f.sortRecent();
  std::vector<Target> &targets = f.recent.empty() ? f.last : f.recent;
  if (targets.empty()) return hold(f, frame, slots, notIssuedDefinesStalls);
  std::vector<uint64_t> share;
  std::vector<Target *> group;
  for (size_t begin = 0, end = 0; begin < targets.size(); begin = end) {
    Session *s = targets[begin].session;
    group.clear();
    uint64_t weight = 0;
    for (end = begin; end < targets.size() && targets[end].session == s; ++end) {
      group.push_back(&targets[end]);
      weight += targets[end].weightNs;
    }
    if (group.size() == 1) {
      gather(*group[0], frame, slots.data(), slots.size(), notIssuedDefinesStalls);
      continue;
    }
    // Several frames: each slot's count is dealt out by kernel time, keeping each frame's
    // running deficit (what its share says minus what it got) small across samples.
    share.assign(group.size() * slots.size(), 0);
    uint64_t dealt = 0;
    for (size_t slot = 0; slot < slots.size(); ++slot) {
      uint64_t count = slots[slot];
      if (count == 0) continue;
      if (slotKind_[slot] != kNotIssued) dealt += count;
      uint64_t given = 0;
      for (size_t g = 0; g < group.size(); ++g) {
        Target &t = *group[g];
        double exact = double(count) * double(t.weightNs) / double(weight);
        t.expected += exact;
        uint64_t bulk = static_cast<uint64_t>(exact);
        share[g * slots.size() + slot] += bulk;
        t.assigned += bulk;
        given += bulk;
      }
      for (; given < count; ++given) {
        size_t best = 0;
        for (size_t g = 1; g < group.size(); ++g)
          if (group[g]->expected - group[g]->assigned >
              group[best]->expected - group[best]->assigned)
            best = g;
        ++share[best * slots.size() + slot];
        ++group[best]->assigned;
      }
    }
    apportioned().add(dealt);
    for (size_t g = 0; g < group.size(); ++g)
      gather(*group[g], frame, share.data() + g * slots.size(), slots.size(),
             notIssuedDefinesStalls);
  }
}

void PcSampleAttributor::hold(FunctionState &f, StringId frame, const std::vector<uint64_t> &slots,
                              bool notIssuedDefinesStalls) {
  for (Held &h : f.held) {
    if (h.frame == frame && h.notIssuedDefinesStalls == notIssuedDefinesStalls) {
      if (h.slots.size() < slots.size()) h.slots.resize(slots.size(), 0);
      for (size_t i = 0; i < slots.size(); ++i) h.slots[i] += slots[i];
      return;
    }
  }
  if (heldEntries_ >= kMaxHeldEntries) {
    uint64_t total = 0;
    for (size_t i = 0; i < slots.size(); ++i)
      if (slotKind_[i] != kNotIssued) total += slots[i];
    unattributed().add(total);
    return;
  }
  ++heldEntries_;
  f.held.push_back(Held{frame, notIssuedDefinesStalls, slots});
}

void PcSampleAttributor::gather(const Target &t, StringId frame, const uint64_t *slots, size_t n,
                                bool notIssuedDefinesStalls) {
  uint64_t samples = 0, notIssued = 0, selected = 0;
  for (size_t i = 0; i < n; ++i) {
    if (slotKind_[i] == kNotIssued) {
      notIssued += slots[i];
    } else {
      samples += slots[i];
      if (slotKind_[i] == kSelected) selected += slots[i];
    }
  }
  if (samples == 0) return;
  GatherKey key{t.session, t.phase, t.node, frame};
  auto [it, inserted] = gatheredIndex_.try_emplace(key, static_cast<uint32_t>(gathered_.size()));
  if (inserted) gathered_.push_back(Gathered{key, t.session, 0, 0, {}});
  Gathered &g = gathered_[it->second];
  if (g.slots.size() < n) g.slots.resize(n, 0);
  for (size_t i = 0; i < n; ++i) g.slots[i] += slots[i];
  g.samples += samples;
  g.stalled += notIssuedDefinesStalls ? notIssued : samples - selected;
}

void PcSampleAttributor::writeGathered() {
  MetricList metrics;
  for (const Gathered &g : gathered_) {
    Session &s = *g.session;
    PhaseId phase = g.key.phase;
    // A cleared phase keeps its id but starts over with an empty tree.
    bool alive = false;
    s.readPhase(phase, [&](const PhaseData &p) { alive = g.key.node.value < p.tree.size(); });
    NodeId node = !alive                   ? kNoNode
                  : g.key.frame == kNoFrame ? g.key.node
                                            : s.child(phase, g.key.node, g.key.frame);
    if (node == kNoNode) {
      clearedPhase().add(g.samples);
      continue;
    }
    metrics.clear();
    metrics.push_back({MetricSpec{numSamples_}, static_cast<int64_t>(g.samples)});
    metrics.push_back({MetricSpec{numStalled_}, static_cast<int64_t>(g.stalled)});
    for (size_t i = 0; i < g.slots.size(); ++i)
      if (g.slots[i] > 0)
        metrics.push_back({MetricSpec{slotMetrics_[i]}, static_cast<int64_t>(g.slots[i])});
    if (!s.addMetrics(phase, node, metrics).isOk()) metricConflicts().add(g.samples);
  }
  gathered_.clear();
  gatheredIndex_.clear();
}

void PcSampleAttributor::closeWindow(bool final) {
  for (auto &[name, f] : functions_) {
    if (f->held.empty()) continue;
    bool targets = !f->recent.empty() || !f->last.empty();
    if (!targets && !final) continue;
    std::vector<Held> held = std::move(f->held);
    f->held.clear();
    heldEntries_ -= held.size();
    for (Held &h : held) {
      if (targets) {
        file(*f, h.frame, h.slots, h.notIssuedDefinesStalls);
        continue;
      }
      uint64_t total = 0;
      for (size_t i = 0; i < h.slots.size(); ++i)
        if (slotKind_[i] != kNotIssued) total += h.slots[i];
      unattributed().add(total);
    }
  }
  writeGathered();
  for (auto &[name, f] : functions_) {
    if (f->recent.empty()) continue;
    f->sortRecent();
    f->last = std::move(f->recent);
    f->recent.clear();
    f->recentIndex.clear();
  }
}

void PcSampleAttributor::forgetSession(const Session &s) {
  auto gone = [&](const Target &t) { return t.session == &s; };
  for (auto &[name, f] : functions_) {
    std::erase_if(f->recent, gone);
    std::erase_if(f->last, gone);
    f->recentSorted = false;  // rebuilds the index
    f->sortRecent();
  }
  std::erase_if(gathered_, [&](const Gathered &g) { return g.session == &s; });
  gatheredIndex_.clear();
  for (size_t i = 0; i < gathered_.size(); ++i) gatheredIndex_[gathered_[i].key] = uint32_t(i);
}

}  // namespace proton
