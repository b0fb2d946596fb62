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
// Sample entries (function, frame) waiting in rounds not filed yet.
constexpr size_t kMaxHeldEntries = size_t(1) << 18;
// Kernels of one function from the same frames this close together form one span.
constexpr uint64_t kMergeGapNs = 1'000'000;
// A round whose function ran no kernel in it waits this long for one, then takes the nearest.
constexpr uint64_t kGiveUpNs = 10'000'000'000;

// The stats counters of sampling, registered together so that every profile lists them.
struct Counters {
  Counter &withoutLine = stat("pc_samples_without_line_info");
  Counter &unattributed = stat("pc_samples_unattributed");
  Counter &unrecorded = stat("pc_samples_of_unrecorded_kernels");
  Counter &apportioned = stat("pc_samples_apportioned");
  Counter &clearedPhase = stat("pc_samples_for_cleared_phase");
  Counter &unknownReason = stat("pc_samples_with_unknown_stall_reason");
  Counter &metricConflicts = stat("pc_samples_rejected_metric_type");
  Counter &dropped = stat("pc_samples_dropped_by_hardware");

  static Counter &stat(const char *name) { return Stats::global().counter(name); }
};

Counters &counters() {
  static Counters c;
  return c;
}

constexpr std::string_view kPrefixes[] = {"smsp__pcsamp_warps_issue_stalled_", "smsp__pcsamp_"};

inline size_t mix(size_t h, uint64_t v) {
  return h ^ (std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

}  // namespace

struct PcSampleAttributor::Held {
  StringId frame;
  bool notIssuedDefinesStalls;
  std::vector<uint64_t> slots;
};

// One round of reads: per function, its samples by frame.
struct PcSampleAttributor::Round {
  struct Function {
    std::vector<Held> held;
    std::unordered_map<uint64_t, uint32_t> index;  // frame << 1 | notIssuedDefinesStalls
  };
  uint64_t fromNs = 0, toNs = 0;
  std::unordered_map<StringId, Function> functions;
};

// A kernel (or a run of back-to-back kernels with the same frames) of one function.
struct PcSampleAttributor::Span {
  uint64_t startNs, endNs, busyNs;
  uint32_t set;
};

struct PcSampleAttributor::FunctionState {
  std::deque<Span> spans;  // closed: kernels before the open round, by arrival
  // The open round's kernels, one aggregate per frame set (its busy time over its extent).
  std::vector<Span> open;
  std::unordered_map<uint32_t, uint32_t> openIndex;  // set -> index in open
  uint32_t lastOpen = 0;                             // the aggregate extended last
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
  sets_.emplace_back();  // set 0: no sampling session
  setIndex_.emplace(SetKey{}, 0);
  counters();
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
    std::string_view view = name;
    if (view.starts_with(kPrefixes[1]) && !view.starts_with(kPrefixes[0])) {
      bool dropped = normalizeStallReason(name) == "samples_data_dropped";
      map.slots_[index] = dropped ? StallReasonMap::kDropped : StallReasonMap::kNotAStall;
      continue;
    }
    uint32_t slot = slotFor(normalizeStallReason(name));
    map.slots_[index] = slot;
    if (slotKind_[slot] == kNotIssued) map.hasNotIssued_ = true;
  }
  return map;
}

bool PcSampleAttributor::sameTargets(uint32_t set, const SampleTarget *targets, size_t n) const {
  const std::vector<SampleTarget> &have = sets_[set];
  if (have.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (have[i].session != targets[i].session || have[i].phase != targets[i].phase ||
        have[i].node != targets[i].node)
      return false;
  return true;
}

uint32_t PcSampleAttributor::targetSet(const SampleTarget *targets, size_t n) {
  if (n == 0) return 0;
  SetKey key;
  for (size_t i = 0; i < n; ++i)
    key.emplace_back(targets[i].session, targets[i].phase.value, targets[i].node.value);
  std::sort(key.begin(), key.end());
  auto [it, inserted] = setIndex_.try_emplace(std::move(key), uint32_t(sets_.size()));
  if (inserted) sets_.emplace_back(targets, targets + n);
  return it->second;
}

void PcSampleAttributor::noteKernel(StringId function, const SampleTarget *targets, size_t n,
                                    uint64_t startNs, uint64_t endNs) {
  std::unique_ptr<FunctionState> &f = functions_[function];
  if (!f) f = std::make_unique<FunctionState>();
  endNs = std::max(endNs, startNs);
  if (startNs < openSinceNs_) {
    // A late record of a kernel from before the open round: kept on its own, for the
    // rounds whose interval reaches back to it.
    f->spans.push_back(Span{startNs, endNs, endNs - startNs, targetSet(targets, n)});
    return;
  }
  // The open round will cover this kernel whole: only its frames' total time matters.
  // Back-to-back launches from the same frames (the common case) skip building the set key.
  uint32_t set = UINT32_MAX;
  if (!f->open.empty() && sameTargets(f->open[f->lastOpen].set, targets, n))
    set = f->open[f->lastOpen].set;
  if (set == UINT32_MAX) set = targetSet(targets, n);
  auto [it, inserted] = f->openIndex.try_emplace(set, uint32_t(f->open.size()));
  if (inserted) {
    f->open.push_back(Span{startNs, endNs, endNs - startNs, set});
  } else {
    Span &span = f->open[it->second];
    span.startNs = std::min(span.startNs, startNs);
    span.endNs = std::max(span.endNs, endNs);
    span.busyNs += endNs - startNs;
  }
  f->lastOpen = it->second;
}

StringId PcSampleAttributor::frameFor(const PcSample &sample, StringId function, LineTable &lines) {
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

uint64_t PcSampleAttributor::samplesIn(const uint64_t *slots, size_t n) const {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i)
    if (slotKind_[i] != kNotIssued) total += slots[i];
  return total;
}

void PcSampleAttributor::add(const PcSample *samples, size_t n, const StallReasonMap &reasons,
                             LineTable &lines) {
  if (!current_) current_ = std::make_unique<Round>();
  std::vector<uint64_t> slots;
  for (size_t i = 0; i < n; ++i) {
    const PcSample &sample = samples[i];
    slots.assign(slotMetrics_.size(), 0);
    for (uint32_t k = 0; k < sample.numStalls; ++k) {
      const StallCount &stall = sample.stalls[k];
      uint32_t slot = reasons.slot(stall.reason);
      if (slot >= StallReasonMap::kDropped) {
        if (slot == StallReasonMap::kUnknown) counters().unknownReason.add(stall.samples);
        if (slot == StallReasonMap::kDropped) counters().dropped.add(stall.samples);
        continue;
      }
      slots[slot] += stall.samples;
    }
    uint64_t total = samplesIn(slots.data(), slots.size());
    if (total == 0) continue;
    StringId name = kernels_.kernelName(sample.function);
    StringId frame = frameFor(sample, name, lines);
    if (frame == kNoFrame) counters().withoutLine.add(total);
    Round::Function &f = current_->functions[name];
    uint64_t key = uint64_t(frame.value) << 1 | uint64_t(reasons.hasNotIssued());
    auto [it, inserted] = f.index.try_emplace(key, uint32_t(f.held.size()));
    if (inserted) {
      if (heldEntries_ >= kMaxHeldEntries) {
        f.index.erase(it);
        counters().unattributed.add(total);
        continue;
      }
      ++heldEntries_;
      f.held.push_back(Held{frame, reasons.hasNotIssued(), {}});
    }
    Held &h = f.held[it->second];
    if (h.slots.size() < slots.size()) h.slots.resize(slots.size(), 0);
    for (size_t k = 0; k < slots.size(); ++k) h.slots[k] += slots[k];
  }
}

bool PcSampleAttributor::fileRound(StringId function, uint64_t fromNs, uint64_t toNs,
                                   uint64_t nowNs, std::vector<Held> &held, bool final) {
  std::vector<std::pair<uint32_t, double>> weights;  // frame set -> kernel time in the round
  auto weigh = [&](uint32_t set, double w) {
    for (auto &[s, total] : weights)
      if (s == set) return void(total += w);
    weights.emplace_back(set, w);
  };
  auto it = functions_.find(function);
  const Span *nearest = nullptr;
  uint64_t nearestGap = UINT64_MAX;
  auto consider = [&](const Span &span) {
    uint64_t lo = std::max(span.startNs, fromNs), hi = std::min(span.endNs, toNs);
    if (lo <= hi) {
      // A span's share of the round: its overlap, thinned by the gaps between its kernels.
      double length = double(span.endNs - span.startNs);
      double overlap = double(hi - lo);
      weigh(span.set, length > 0 ? std::max(overlap, 1.0) * double(span.busyNs) / length : 1.0);
      return;
    }
    uint64_t gap = span.startNs > toNs ? span.startNs - toNs : fromNs - span.endNs;
    if (gap < nearestGap) nearestGap = gap, nearest = &span;
  };
  if (it != functions_.end()) {
    for (const Span &span : it->second->spans) consider(span);
    for (const Span &span : it->second->open) consider(span);
  }
  if (weights.empty()) {
    // No kernel of the function ran in the round: its record may still be on its way (a long
    // kernel ends late). Past the final close, or after kGiveUpNs, take the nearest kernel.
    if (!final && nowNs < toNs + kGiveUpNs) return false;
    if (!nearest) {
      for (const Held &h : held)
        counters().unattributed.add(samplesIn(h.slots.data(), h.slots.size()));
      return true;
    }
    weigh(nearest->set, 1.0);
  }
  double total = 0;
  for (const auto &[set, w] : weights) total += w;
  // Each count is dealt out by weight; a set's running deficit (what its weight says it should
  // have minus what it got) decides where the indivisible remainder goes.
  std::vector<double> expected(weights.size(), 0);
  std::vector<uint64_t> assigned(weights.size(), 0);
  std::vector<uint64_t> share;
  for (const Held &h : held) {
    size_t n = h.slots.size();
    share.assign(weights.size() * n, 0);
    for (size_t slot = 0; slot < n; ++slot) {
      uint64_t count = h.slots[slot];
      if (count == 0) continue;
      uint64_t given = 0;
      for (size_t g = 0; g < weights.size(); ++g) {
        double exact = double(count) * weights[g].second / total;
        expected[g] += exact;
        uint64_t bulk = std::min<uint64_t>(static_cast<uint64_t>(exact), count - given);
        share[g * n + slot] += bulk;
        assigned[g] += bulk;
        given += bulk;
      }
      for (; given < count; ++given) {
        size_t best = 0;
        for (size_t g = 1; g < weights.size(); ++g)
          if (expected[g] - double(assigned[g]) > expected[best] - double(assigned[best])) best = g;
        ++share[best * n + slot];
        ++assigned[best];
      }
    }
    if (weights.size() > 1) counters().apportioned.add(samplesIn(h.slots.data(), n));
    for (size_t g = 0; g < weights.size(); ++g) {
      const uint64_t *part = share.data() + g * n;
      const std::vector<SampleTarget> &set = sets_[weights[g].first];
      if (set.empty()) counters().unrecorded.add(samplesIn(part, n));
      for (const SampleTarget &t : set) gather(t, h.frame, part, n, h.notIssuedDefinesStalls);
    }
  }
  return true;
}

void PcSampleAttributor::gather(const SampleTarget &t, StringId frame, const uint64_t *slots,
                                size_t n, bool notIssuedDefinesStalls) {
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
    NodeId node = !alive                    ? kNoNode
                  : g.key.frame == kNoFrame ? g.key.node
                                            : s.child(phase, g.key.node, g.key.frame);
    if (node == kNoNode) {
      counters().clearedPhase.add(g.samples);
      continue;
    }
    metrics.clear();
    metrics.push_back({MetricSpec{numSamples_}, static_cast<int64_t>(g.samples)});
    metrics.push_back({MetricSpec{numStalled_}, static_cast<int64_t>(g.stalled)});
    for (size_t i = 0; i < g.slots.size(); ++i)
      if (g.slots[i] > 0)
        metrics.push_back({MetricSpec{slotMetrics_[i]}, static_cast<int64_t>(g.slots[i])});
    if (!s.addMetrics(phase, node, metrics).isOk()) counters().metricConflicts.add(g.samples);
  }
  gathered_.clear();
  gatheredIndex_.clear();
}

void PcSampleAttributor::closeWindow(uint64_t nowNs, bool final) {
  if (current_ && !current_->functions.empty()) {
    // The round's samples were taken after the previous round's (less the decode latency).
    current_->fromNs = lastRoundNs_ > kLatencyNs ? lastRoundNs_ - kLatencyNs : 0;
    current_->toNs = nowNs;
    pending_.push_back(std::move(*current_));
    lastRoundNs_ = nowNs;
    // Kernels from here on belong to the next round: close the open aggregates.
    openSinceNs_ = nowNs;
    for (auto &[name, f] : functions_) {
      for (const Span &span : f->open) f->spans.push_back(span);
      f->open.clear();
      f->openIndex.clear();
    }
  }
  current_.reset();
  for (Round &round : pending_) {
    if (!final && nowNs < round.toNs + kSettleNs) break;  // later rounds are newer still
    for (auto it = round.functions.begin(); it != round.functions.end();) {
      std::vector<Held> &held = it->second.held;
      if (!fileRound(it->first, round.fromNs, round.toNs, nowNs, held, final)) {
        ++it;
        continue;
      }
      heldEntries_ -= held.size();
      it = round.functions.erase(it);
    }
  }
  std::erase_if(pending_, [](const Round &r) { return r.functions.empty(); });
  writeGathered();
  // Closed kernels older than every round still to be filed (and than the next one) can go;
  // each function keeps its latest for samples read long after it.
  uint64_t keepAfter = lastRoundNs_ > kLatencyNs ? lastRoundNs_ - kLatencyNs : 0;
  for (const Round &r : pending_) keepAfter = std::min(keepAfter, r.fromNs);
  for (auto &[name, f] : functions_)
    while (f->spans.size() > 1 && f->spans.front().endNs < keepAfter) f->spans.pop_front();
}

void PcSampleAttributor::forgetSession(const Session &s) {
  for (std::vector<SampleTarget> &set : sets_)
    std::erase_if(set, [&](const SampleTarget &t) { return t.session == &s; });
  std::erase_if(gathered_, [&](const Gathered &g) { return g.session == &s; });
  gatheredIndex_.clear();
  for (size_t i = 0; i < gathered_.size(); ++i) gatheredIndex_[gathered_[i].key] = uint32_t(i);
}

}  // namespace proton
