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
  std::deque<Span> spans;  // by arrival, roughly by time
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
    uint32_t slot = slotFor(normalizeStallReason(name));
    map.slots_[index] = slot;
    if (slotKind_[slot] == kNotIssued) map.hasNotIssued_ = true;
  }
  return map;
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
  if (!f->spans.empty()) {
    // Back-to-back launches from the same frames (the common case) extend one span; the
    // frame set is compared in place, without building its key.
    Span &last = f->spans.back();
    const std::vector<SampleTarget> &set = sets_[last.set];
    bool same = set.size() == n;
    for (size_t i = 0; same && i < n; ++i)
      same = set[i].session == targets[i].session && set[i].phase == targets[i].phase &&
             set[i].node == targets[i].node;
    if (same && startNs >= last.startNs && startNs <= last.endNs + kMergeGapNs) {
      last.endNs = std::max(last.endNs, endNs);
      last.busyNs += endNs - startNs;
      return;
    }
  }
  f->spans.push_back(Span{startNs, endNs, endNs - startNs, targetSet(targets, n)});
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
      if (slot == StallReasonMap::kUnknown) {
        counters().unknownReason.add(stall.samples);
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
  if (it != functions_.end()) {
    for (const Span &span : it->second->spans) {
      uint64_t lo = std::max(span.startNs, fromNs), hi = std::min(span.endNs, toNs);
      if (lo <= hi) {
        // A span's share of the round: its overlap, thinned by the gaps between its kernels.
        double length = double(span.endNs - span.startNs);
        double overlap = double(hi - lo);
        weigh(span.set, length > 0 ? std::max(overlap, 1.0) * double(span.busyNs) / length : 1.0);
        continue;
      }
      uint64_t gap = span.startNs > toNs ? span.startNs - toNs : fromNs - span.endNs;
      if (gap < nearestGap) nearestGap = gap, nearest = &span;
    }
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
    current_->fromNs = lastCloseNs_ > kLatencyNs ? lastCloseNs_ - kLatencyNs : 0;
    current_->toNs = nowNs;
    pending_.push_back(std::move(*current_));
  }
  current_.reset();
  lastCloseNs_ = nowNs;
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
  // Kernels older than every round still to be filed (and than the next one) can go; each
  // function keeps its latest kernel for samples read long after it.
  uint64_t keepAfter = lastCloseNs_ > kLatencyNs ? lastCloseNs_ - kLatencyNs : 0;
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
