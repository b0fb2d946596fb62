#include "backends/instrumentation/intra_decoder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

#include "core/session.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton::instrumentation {
namespace {

Counter &stat(const char *name) { return Stats::global().counter(name); }

template <typename T>
T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string lastComponent(const std::string &path) {
  size_t at = path.rfind('\x1f');
  return at == std::string::npos ? path : path.substr(at + 1);
}

// A trace unit's own part of its header (ptx_rewrite.h, layout 9): whether it returned, its
// events, and its clock readings at its start and its return (the return's low 32 bits
// stored, unwrapped against the start as events are).
struct UnitPart {
  bool returned;
  uint32_t written;
  uint64_t c0, c1;
};
UnitPart unitPart(const uint8_t *h) {
  uint32_t word = load<uint32_t>(h + 32), c1Low = load<uint32_t>(h + 36);
  uint64_t c0 = load<uint64_t>(h + 40);
  return {(word & kTraceUnitReturned) != 0, word & ~kTraceUnitReturned, c0,
          c0 + static_cast<uint32_t>(c1Low - static_cast<uint32_t>(c0))};
}

MetricList sumMetrics(uint64_t cycles, uint64_t count, uint64_t warps, uint32_t launches,
                      bool withCount) {
  // Exclusive, as in triton.profiler: a node's cycles are what its own scope measured, which
  // already contain its children's; readers summing them into parents would count twice.
  static const MetricSpec kCycles = MetricSpec::parse("cycles (exc)");
  static const MetricSpec kNormalized = MetricSpec::parse("normalized_cycles (exc)");
  static const MetricSpec kCount = MetricSpec::parse("count");
  MetricList m;
  m.push_back({kCycles, static_cast<int64_t>(cycles)});
  m.push_back({kNormalized,
               warps ? static_cast<double>(cycles) * launches / static_cast<double>(warps) : 0.0});
  if (withCount) m.push_back({kCount, static_cast<int64_t>(count)});
  return m;
}

}  // namespace

void ScopeTables::add(ScopeTable table) {
  auto interned = std::make_shared<InternedTable>();
  StringTable &strings = StringTable::global();
  for (const std::string &path : table.paths) {
    std::vector<StringId> names;
    for (size_t start = 0; !path.empty() && start <= path.size();) {
      size_t end = std::min(path.find('\x1f', start), path.size());
      names.push_back(strings.intern(path.substr(start, end - start)));
      start = end + 1;
    }
    interned->sliceNames.push_back(names.empty() ? strings.intern(table.kernel) : names.back());
    interned->paths.push_back(std::move(names));
  }
  interned->table = std::move(table);
  std::lock_guard lock(mu_);
  tables_[interned->table.hash] = std::move(interned);
}

std::shared_ptr<const InternedTable> ScopeTables::find(uint32_t hash) const {
  std::lock_guard lock(mu_);
  auto it = tables_.find(hash);
  return it == tables_.end() ? nullptr : it->second;
}

IntraDecoder::IntraDecoder(const ScopeTables &tables) : tables_(tables) {
  for (const char *name :
       {"instrumentation_buffers_without_table", "instrumentation_events_overwritten",
        "instrumentation_unmatched_scopes", "instrumentation_crossing_scopes",
        "instrumentation_trace_events_capped"})
    stat(name);
}

NodeId IntraDecoder::scopeNode(Session &s, PhaseId phase, NodeId kernelNode,
                               const std::vector<StringId> &path) {
  NodeId node = kernelNode;
  for (StringId name : path) {
    if (node == kNoNode) break;
    node = s.child(phase, node, name);
  }
  return node;
}

void IntraDecoder::noteLosses(const ScopeTable &table, const Losses &losses) {
  if (table.droppedMarkers) noteDroppedMarkers(table);
  if (losses.unmatched == 0 && losses.crossing == 0 && losses.overwritten == 0) return;
  stat("instrumentation_unmatched_scopes").add(losses.unmatched);
  stat("instrumentation_crossing_scopes").add(losses.crossing);
  stat("instrumentation_events_overwritten").add(losses.overwritten);
  if (losses.unmatched + losses.crossing) {
    std::string perKernel = "instrumentation_unmatched_scopes[" + table.kernel + "]";
    stat(perKernel.c_str()).add(losses.unmatched + losses.crossing);
  }
  if (losses.overwritten) {
    std::string perKernel = "instrumentation_events_overwritten[" + table.kernel + "]";
    stat(perKernel.c_str()).add(losses.overwritten);
  }
  // One warning per kernel and kind of loss: a kind seen first in a later launch is told too.
  auto fresh = [&](uint64_t n, char kind) {
    return n && warned_.insert(table.kernel + '\x1f' + kind).second ? n : 0;
  };
  uint64_t overwritten = fresh(losses.overwritten, 'o'), unmatched = fresh(losses.unmatched, 'u'),
           crossing = fresh(losses.crossing, 'c');
  if (!overwritten && !unmatched && !crossing) return;
  std::string scopes;
  for (size_t i = 1; i < table.paths.size(); ++i)
    scopes += (scopes.empty() ? "" : ", ") + lastComponent(table.paths[i]);
  std::string what;
  auto part = [&](uint64_t n, const std::string &text) {
    if (n) what += (what.empty() ? "" : "; ") + std::to_string(n) + text;
  };
  part(overwritten, " trace events were written over in full buffers of " +
                        std::to_string(table.capacity) +
                        " events per recording unit (a larger mode buffer_size keeps "
                        "them; stats: instrumentation_events_overwritten)");
  part(unmatched,
       " scope exits had no matching enter or scopes were still open at the "
       "return (stats: instrumentation_unmatched_scopes)");
  part(crossing,
       " scopes were closed by an enclosing exit (stats: "
       "instrumentation_crossing_scopes)");
  if (!scopes.empty()) scopes = " (scopes: " + scopes + ")";
  std::fprintf(stderr, "[PROTON] kernel %s%s: %s. Those scopes are not in the profile.\n",
               table.kernel.c_str(), scopes.c_str(), what.c_str());
}

void IntraDecoder::fileSums(const InternedTable &interned, const std::vector<ScopeSums> &sums,
                            uint32_t launches, const IntraLaunch &launch) {
  const ScopeTable &table = interned.table;
  for (size_t t = 0; t < launch.numTargets; ++t) {
    const IntraTarget &target = launch.targets[t];
    Session &s = *target.session;
    if (s.options().data == DataKind::kTrace) continue;  // trace sessions get slices only
    for (size_t i = 0; i < sums.size() && i < table.paths.size(); ++i) {
      if (sums[i].warps == 0) continue;
      NodeId node = scopeNode(s, target.phase, target.kernelNode, interned.paths[i]);
      if (node == kNoNode) continue;
      // The kernel's own node already has the launch count from kernel tracing.
      (void)s.addMetrics(
          target.phase, node,
          sumMetrics(sums[i].cycles, sums[i].count, sums[i].warps, launches, i != 0));
    }
  }
}

bool reduceTreeSlot(const uint8_t *slot, size_t size, uint8_t *out) {
  std::memset(out, 0, kReducedTreeBytes);
  if (size < kTreeHeaderBytes) return false;
  uint32_t hash = load<uint32_t>(slot), unitBytes = load<uint32_t>(slot + 4);
  std::memcpy(out, &hash, 4);
  uint32_t scopes =
      unitBytes >= kTreeUnitHeaderBytes ? (unitBytes - kTreeUnitHeaderBytes) / kTreeScopeBytes : 0;
  if (hash == 0 || scopes == 0 || scopes > kMaxScopes || unitBytes % kTreeScopeBytes)
    return hash == 0;
  uint32_t unmatched = 0, crossing = 0;
  for (size_t at = kTreeHeaderBytes; at + unitBytes <= size; at += unitBytes) {
    const uint8_t *rec = slot + at;
    if (load<uint32_t>(rec + 8) == 0) continue;  // this unit (or CTA) did not record
    unmatched += load<uint32_t>(rec);
    crossing += load<uint32_t>(rec + 4);
    for (uint32_t i = 0; i < scopes; ++i) {
      const uint8_t *v = rec + kTreeUnitHeaderBytes + kTreeScopeBytes * i;
      uint32_t count = load<uint32_t>(v + 8);
      if (count == 0) continue;
      uint8_t *o = out + kTreeHeaderBytes + kReducedScopeBytes * i;
      uint64_t cycles = load<uint64_t>(o) + load<uint64_t>(v), c = load<uint64_t>(o + 8) + count;
      uint32_t w = load<uint32_t>(o + 16) + load<uint32_t>(v + 12);
      std::memcpy(o, &cycles, 8);
      std::memcpy(o + 8, &c, 8);
      std::memcpy(o + 16, &w, 4);
    }
  }
  std::memcpy(out + 4, &unmatched, 4);
  std::memcpy(out + 8, &crossing, 4);
  std::memcpy(out + 12, slot + 8, 4);  // the launches that added into the slot
  return true;
}

void IntraDecoder::fileTree(const uint8_t *reduced, const IntraLaunch &launch) {
  uint32_t hash = load<uint32_t>(reduced);
  if (hash == 0) return;  // no recording warp returned (or recording was off)
  std::shared_ptr<const InternedTable> interned = tables_.find(hash);
  if (!interned) {
    stat("instrumentation_buffers_without_table").add();
    return;
  }
  const ScopeTable &table = interned->table;
  std::vector<ScopeSums> sums(std::min<size_t>(table.paths.size(), kMaxScopes));
  for (size_t i = 0; i < sums.size(); ++i) {
    const uint8_t *v = reduced + kTreeHeaderBytes + kReducedScopeBytes * i;
    sums[i].cycles = load<uint64_t>(v);
    sums[i].count = load<uint64_t>(v + 8);
    sums[i].warps = load<uint32_t>(v + 16);
  }
  // A slot that a CUDA graph's replays added into holds the sums of `launches` launches:
  // normalized_cycles is per warp and launch, summed over launches.
  const uint32_t launches = std::max<uint32_t>(1, load<uint32_t>(reduced + 12));
  // The units' own counts: every execution of an unmatched or crossing marker by a recording
  // warp (the table's static counts are for traces, which keep no such count).
  noteLosses(table, {load<uint32_t>(reduced + 4), load<uint32_t>(reduced + 8), 0});
  fileSums(*interned, sums, launches, launch);
}

// Markers the rewrite could not turn into recording (ScopeTable::droppedScopes): per launch
// that recorded, and named once per kernel. Nothing of them is in the profile.
void IntraDecoder::noteDroppedMarkers(const ScopeTable &table) {
  stat("instrumentation_markers_not_recorded").add(table.droppedMarkers);
  std::string perKernel = "instrumentation_markers_not_recorded[" + table.kernel + "]";
  stat(perKernel.c_str()).add(table.droppedMarkers);
  if (!warned_.insert(table.kernel + "\x1f" + 'd').second) return;
  // A name may also be a scope the kernel does record (its own body's): the markers are what
  // is not recorded.
  std::string of;
  for (size_t i = 0; i < table.droppedScopes.size(); ++i)
    of += (i ? ", " : "") + table.droppedScopes[i];
  if (!of.empty()) of = (table.droppedScopes.size() == 1 ? " of scope " : " of scopes ") + of;
  std::fprintf(stderr,
               "[PROTON] kernel %s: %u scope markers%s are not recorded: a kernel records "
               "scopes in its own body only, not in a function the compiler did not inline "
               "(noinline=True), and at most %u of them (stats: "
               "instrumentation_markers_not_recorded).\n",
               table.kernel.c_str(), table.droppedMarkers, of.c_str(), kMaxScopes - 1);
}

struct IntraDecoder::Unit {
  const uint8_t *header;
  uint32_t cta, unit;
};

// Where a trace launch's clock readings lie on the GPU's clock. Each CTA's first recording
// unit stored the CTA's globaltimer readings beside its own clock readings (the SM's clock,
// the same for all of the CTA): the SM clock's rate is measured from those pairs, and a
// unit's clock reading is its CTA's globaltimer reading plus the cycles since. Times are
// kept as ns after the first CTA's reading, which a double holds exactly (a globaltimer
// reading itself, ~2^60 ns, it would round to 256 ns).
class IntraDecoder::TraceClock {
 public:
  // ctaHeaders: per CTA, the header of its first recording unit (null where none recorded).
  TraceClock(std::vector<const uint8_t *> ctaHeaders, double fallbackRate)
      : ctaHeaders_(std::move(ctaHeaders)) {
    uint64_t clocks = 0, nanos = 0;
    for (const uint8_t *h : ctaHeaders_) {
      if (!h) continue;
      if (!base_) base_ = load<uint64_t>(h + 8);
      uint64_t gt0 = load<uint64_t>(h + 8), gt1 = load<uint64_t>(h + 16);
      UnitPart own = unitPart(h);
      if (own.returned && gt1 > gt0 && own.c1 > own.c0) {
        clocks += own.c1 - own.c0;
        nanos += gt1 - gt0;
      }
    }
    rate_ = nanos > 0 ? static_cast<double>(clocks) / static_cast<double>(nanos)
                      : (fallbackRate > 0 ? fallbackRate : 1.0);
    origin_ = base_;
  }
  const uint8_t *ctaHeader(uint32_t cta) const {
    return cta < ctaHeaders_.size() ? ctaHeaders_[cta] : nullptr;
  }
  uint64_t base() const { return base_; }
  double sinceBase(const uint8_t *ctaHeader, uint64_t clock) const {
    int64_t cycles = static_cast<int64_t>(clock - load<uint64_t>(ctaHeader + 40));
    int64_t ns = static_cast<int64_t>(load<uint64_t>(ctaHeader + 8) - base_);
    return static_cast<double>(ns) + static_cast<double>(cycles) / rate_;
  }
  // The earliest unit start (sinceBase) is the kernel's start by its CUPTI record; without
  // the record, the GPU's clock is kept.
  void alignStart(double earliest, uint64_t kernelStartNs) {
    if (!kernelStartNs || !std::isfinite(earliest)) return;
    origin_ = kernelStartNs;
    zero_ = earliest;
  }
  uint64_t ns(const uint8_t *ctaHeader, uint64_t clock) const {
    return origin_ + static_cast<uint64_t>(std::llround(sinceBase(ctaHeader, clock) - zero_));
  }

 private:
  std::vector<const uint8_t *> ctaHeaders_;
  uint64_t base_ = 0, origin_ = 0;
  double rate_ = 1.0, zero_ = 0.0;
};

struct IntraDecoder::TraceTally {
  explicit TraceTally(size_t scopes) : sums(scopes), lastUnitSeen(scopes, UINT64_MAX) {}
  std::vector<ScopeSums> sums;
  std::vector<uint64_t> lastUnitSeen;
  Losses losses;
  std::vector<Half> halves;  // of cross-warp events, for linkEvents
};

struct IntraDecoder::TraceSlot {
  std::shared_ptr<const InternedTable> interned;
  std::vector<Unit> units;                  // the units that returned, in buffer order
  std::vector<const uint8_t *> ctaHeaders;  // per CTA, its first recording unit's header
  const uint8_t *ctaHeader(uint32_t cta) const {
    return cta < ctaHeaders.size() ? ctaHeaders[cta] : nullptr;
  }
};

std::shared_ptr<const InternedTable> IntraDecoder::traceTableOf(const TraceSlotView &slot,
                                                                bool *unknown) const {
  if (slot.stride < kTraceUnitHeaderBytes || slot.stride > slot.unitBytes) return nullptr;
  for (size_t off = 0; off + slot.stride <= slot.size; off += slot.stride) {
    uint32_t hash = load<uint32_t>(slot.data + off + 24);  // in CTA parts
    if (hash == 0) continue;
    std::shared_ptr<const InternedTable> interned = tables_.find(hash);
    *unknown = !interned;
    return interned;
  }
  return nullptr;
}

bool IntraDecoder::readTraceSlot(const TraceSlotView &slot, TraceSlot &out,
                                 bool countLosses) const {
  bool unknown = false;
  out.interned = traceTableOf(slot, &unknown);
  if (unknown && countLosses) stat("instrumentation_buffers_without_table").add();
  if (!out.interned) return false;  // no unit recorded, or no table for it
  const ScopeTable &table = out.interned->table;
  if (table.unitBytes != slot.unitBytes || !table.trace || table.unitsPerCta == 0) {
    // Units laid out otherwise than this buffer's (another buffer_size): not walked.
    if (countLosses) stat("instrumentation_buffers_of_another_layout").add();
    return false;
  }
  for (size_t off = 0; off + slot.stride <= slot.size; off += slot.stride) {
    const uint8_t *h = slot.data + off;
    uint32_t index = static_cast<uint32_t>(off / slot.stride), cta = index / table.unitsPerCta;
    // The CTA's part, from its first recording unit (stored as that unit started, where
    // events go to global memory: there even if the unit never returned).
    if (load<uint64_t>(h + 8) != 0) {
      if (out.ctaHeaders.size() <= cta) out.ctaHeaders.resize(cta + 1);
      out.ctaHeaders[cta] = h;
    }
    // A unit that does not record, or never returned, has not said so.
    if (unitPart(h).returned) out.units.push_back({h, cta, index % table.unitsPerCta});
  }
  return true;
}

bool IntraDecoder::pastTraceCap(const IntraLaunch &launch) {
  if (!traceFull()) return false;
  for (size_t t = 0; t < launch.numTargets; ++t)
    if (launch.targets[t].session->options().data != DataKind::kTrace) return false;  // sums
  stat("instrumentation_launches_past_trace_cap").add();
  return true;
}

uint64_t IntraDecoder::countTraceSlices(const TraceSlotView &slot, size_t part,
                                        size_t parts) const {
  if (parts > 1) {  // whole CTAs: a unit's slices need its CTA's first recording unit
    bool unknown = false;
    std::shared_ptr<const InternedTable> interned = traceTableOf(slot, &unknown);
    if (!interned || interned->table.unitsPerCta == 0) return 0;
    size_t ctaBytes = size_t{interned->table.unitsPerCta} * slot.stride;
    size_t ctas = slot.size / ctaBytes;
    size_t begin = ctas * part / parts * ctaBytes;
    size_t end = part + 1 == parts ? slot.size : ctas * (part + 1) / parts * ctaBytes;
    return countTraceSlices(
        TraceSlotView{slot.data + begin, end - begin, slot.unitBytes, slot.stride});
  }
  TraceSlot parsed;
  if (!readTraceSlot(slot, parsed, /*countLosses=*/false)) return 0;
  uint64_t slices = 0;
  Losses ignored;
  for (const Unit &u : parsed.units)
    if (parsed.ctaHeader(u.cta))
      walkTraceUnit(
          parsed.interned->table, u.header, slot.stride, ignored,
          [&](uint32_t, uint64_t, uint64_t) { ++slices; },
          [&](uint32_t, uint64_t, bool) { ++slices; });  // a link's half is a slice
  return slices;
}

uint64_t IntraDecoder::kernelStart(const IntraLaunch &launch, uint64_t base, double earliest) {
  if (!std::isfinite(earliest)) return launch.kernelStartNs;
  const int64_t gpuStart = static_cast<int64_t>(base) + std::llround(earliest);
  if (launch.kernelStartNs) {
    kernelMinusGpuNs_[launch.device] = static_cast<int64_t>(launch.kernelStartNs) - gpuStart;
    return launch.kernelStartNs;
  }
  // No record of its own (a CUDA graph replay): the offset of the device's last launch that
  // had one, else the GPU's clock as it is.
  auto known = kernelMinusGpuNs_.find(launch.device);
  return known == kernelMinusGpuNs_.end() ? 0 : static_cast<uint64_t>(gpuStart + known->second);
}

void IntraDecoder::fileTrace(const TraceSlotView &slot, const IntraLaunch &launch) {
  if (pastTraceCap(launch)) return;
  TraceSlot parsed;
  if (!readTraceSlot(slot, parsed, /*countLosses=*/true)) return;
  const ScopeTable &table = parsed.interned->table;
  TraceClock clock(parsed.ctaHeaders, launch.cyclesPerNs);
  // A unit may start before its CTA's first recording unit.
  double earliest = std::numeric_limits<double>::infinity();
  for (const Unit &u : parsed.units)
    if (const uint8_t *c = clock.ctaHeader(u.cta))
      earliest = std::min(earliest, clock.sinceBase(c, unitPart(u.header).c0));
  clock.alignStart(earliest, kernelStart(launch, clock.base(), earliest));
  TraceTally tally(table.paths.size());
  beginSlices(launch, table.paths.size());
  for (size_t u = 0; u < parsed.units.size(); ++u)
    fileTraceUnit(*parsed.interned, parsed.units[u], u, slot.stride, clock, launch, tally);
  linkEvents(*parsed.interned, tally.halves, launch, tally.losses);
  // Crossing exits show in the events; an unmatched exit has none: the table's count of them
  // stands for it, once per launch.
  noteLosses(table, {tally.losses.unmatched + table.staticUnmatched, tally.losses.crossing,
                     tally.losses.overwritten});
  fileSlices(launch);
  fileSums(*parsed.interned, tally.sums, 1, launch);
}

template <typename OnClose, typename OnHalf>
void IntraDecoder::walkTraceUnit(const ScopeTable &table, const uint8_t *h, uint32_t stride,
                                 Losses &losses, OnClose &&onClose, OnHalf &&onHalf) {
  auto isEvent = [&](uint32_t id) { return id < 64 && (table.eventScopes >> id & 1); };
  const auto [returned, written, c0, c1] = unitPart(h);
  uint32_t kept = std::min(written, table.capacity);
  // The places read back: all of them, or (a shorter stride) as many as any unit wrote; a
  // unit that wrote more than were read back has lost them all.
  if (kept > (stride - kTraceUnitHeaderBytes) / 8) kept = 0;
  // A unit that wrote more than its buffer holds lost its first events: an exit whose enter
  // was among them is the overflow's loss, counted there, not an unmatched scope (as many
  // exits without an enter as the lost events may have held enters: two per event where the
  // kernel pairs markers; any more are unmatched).
  uint32_t lost = written - kept, excused = 0;
  losses.overwritten += lost;
  if (table.pairedEvents) lost *= 2;
  struct Open {
    uint32_t id;
    uint64_t clock;
  };
  // The kernel scope: the unit's start and return, from its header's clock pair.
  std::vector<Open> stack{{0, c0}};
  // One marker: an enter opens its scope, an exit closes the innermost open one of its scope
  // (any opened inside it and still open are crossing pairs).
  auto marker = [&](uint32_t tag, uint64_t at) {
    uint32_t id = tag >> 1;
    if (id == 0 || id >= table.paths.size()) {
      ++losses.unmatched;
      return;
    }
    if (!(tag & 1)) {
      stack.push_back({id, at});
      return;
    }
    auto open =
        std::find_if(stack.rbegin(), stack.rend(), [&](const Open &o) { return o.id == id; });
    if (open == stack.rend()) {
      if (isEvent(id))
        onHalf(id, at, /*end=*/true);  // started in another warp
      else if (excused < lost)
        ++excused;  // its enter may have been written over
      else
        ++losses.unmatched;
      return;
    }
    losses.crossing += static_cast<uint64_t>(open - stack.rbegin());
    uint64_t begin = open->clock;
    stack.erase(std::next(open).base(), stack.end());
    onClose(id, begin, at);
  };
  for (uint32_t j = written - kept; j < written; ++j) {
    const uint8_t *ev = h + kTraceUnitHeaderBytes + 8 * (j & (table.capacity - 1));
    uint32_t tag = load<uint32_t>(ev), low = load<uint32_t>(ev + 4);
    uint64_t at = c0 + static_cast<uint32_t>(low - static_cast<uint32_t>(c0));
    if (tag & kPairedEventTag) {  // two adjacent markers, one reading
      marker(tag >> 8 & 0x7f, at);
      marker(tag & 0x7f, at);
    } else {
      marker(tag, at);
    }
  }
  for (size_t i = 1; i < stack.size(); ++i) {  // still open when the warp returned
    if (isEvent(stack[i].id))
      onHalf(stack[i].id, stack[i].clock, /*end=*/false);  // ended in another warp
    else
      ++losses.unmatched;
  }
  onClose(0, c0, c1);
}

void IntraDecoder::fileTraceUnit(const InternedTable &interned, const Unit &unit, size_t index,
                                 uint32_t stride, const TraceClock &clock,
                                 const IntraLaunch &launch, TraceTally &tally) {
  const ScopeTable &table = interned.table;
  // The CTA's part of the header: its SM, its time_shift and its place on the GPU's clock.
  const uint8_t *ctaHeader = clock.ctaHeader(unit.cta);
  if (!ctaHeader) {
    stat("instrumentation_trace_units_without_cta_time").add();
    return;
  }
  uint32_t smid = load<uint32_t>(ctaHeader), shiftCycles = load<uint32_t>(ctaHeader + 4);
  walkTraceUnit(
      table, unit.header, stride, tally.losses,
      [&](uint32_t id, uint64_t begin, uint64_t end) {
        uint64_t cycles = end > begin ? end - begin : 0;
        cycles -= std::min<uint64_t>(cycles, shiftCycles);
        ScopeSums &sum = tally.sums[id];
        sum.cycles += cycles;
        sum.count += 1;
        if (tally.lastUnitSeen[id] != index) {
          tally.lastUnitSeen[id] = index;
          sum.warps += 1;
        }
        addSlice(launch, interned.paths[id], id, interned.sliceNames[id], unit.cta,
                 unit.unit * table.unitWarps, smid, clock.ns(ctaHeader, begin),
                 clock.ns(ctaHeader, end), cycles);
      },
      [&](uint32_t id, uint64_t at, bool end) {
        tally.halves.push_back(
            Half{unit.cta, unit.unit * table.unitWarps, smid, id, clock.ns(ctaHeader, at), end});
      });
}

void IntraDecoder::linkEvents(const InternedTable &interned, std::vector<Half> &halves,
                              const IntraLaunch &launch, Losses &losses) {
  if (halves.empty()) return;
  static std::atomic<uint64_t> nextLink{1};  // unique in every trace of the process
  std::sort(halves.begin(), halves.end(), [](const Half &a, const Half &b) {
    return std::tie(a.cta, a.scope, a.end, a.warp, a.ns) <
           std::tie(b.cta, b.scope, b.end, b.warp, b.ns);
  });
  for (size_t i = 0; i < halves.size();) {
    // One event of one CTA: its starts [i, mid), its ends [mid, j).
    size_t mid = i, j = i;
    while (j < halves.size() && halves[j].cta == halves[i].cta &&
           halves[j].scope == halves[i].scope) {
      if (!halves[j].end) mid = j + 1;
      ++j;
    }
    size_t pairs = std::min(mid - i, j - mid);
    losses.unmatched += (mid - i) + (j - mid) - 2 * pairs;
    for (size_t k = 0; k < pairs; ++k) {
      uint64_t link = nextLink.fetch_add(1, std::memory_order_relaxed);
      for (const Half &h : {halves[i + k], halves[mid + k]})
        addSlice(launch, interned.paths[h.scope], h.scope, interned.sliceNames[h.scope], h.cta,
                 h.warp, h.sm, h.ns, h.ns, 0, link, h.end);
    }
    i = j;
  }
  halves.clear();
}

void IntraDecoder::beginSlices(const IntraLaunch &launch, size_t scopes) {
  if (batches_.size() < launch.numTargets) batches_.resize(launch.numTargets);
  cachedScopes_ = scopes;
  resolved_.assign(launch.numTargets * scopes, 0);
  nodes_.resize(launch.numTargets * scopes);
}

void IntraDecoder::addSlice(const IntraLaunch &launch, const std::vector<StringId> &path,
                            size_t scope, StringId name, uint32_t cta, uint32_t warp, uint32_t sm,
                            uint64_t beginNs, uint64_t endNs, uint64_t cycles, uint64_t link,
                            bool linkEnd) {
  for (size_t t = 0; t < launch.numTargets; ++t) {
    const IntraTarget &target = launch.targets[t];
    Session &s = *target.session;
    if (s.options().data != DataKind::kTrace) continue;
    if (events_ >= maxEvents_) {
      ++capped_;
      continue;
    }
    ++events_;
    TraceEvent event;
    event.name = name;
    if (scope < cachedScopes_) {
      size_t at = t * cachedScopes_ + scope;
      if (!resolved_[at]) {
        nodes_[at] = scopeNode(s, target.phase, target.kernelNode, path);
        resolved_[at] = 1;
      }
      event.context = nodes_[at];
    } else {
      event.context = scopeNode(s, target.phase, target.kernelNode, path);
    }
    event.lane.kind = Lane::Kind::kWarp;
    event.lane.device = static_cast<uint32_t>(launch.device);
    event.lane.id = Lane::warpLaneId(cta, warp);
    event.beginNs = beginNs;
    event.endNs = std::max(beginNs, endNs);
    event.sm = sm;
    event.cycles = cycles;
    event.kernel = target.kernelNode;
    event.launchNs = launch.kernelStartNs;
    event.link = link;
    event.linkEnd = linkEnd;
    batches_[t].push_back(event);
  }
}

void IntraDecoder::fileSlices(const IntraLaunch &launch) {
  for (size_t t = 0; t < launch.numTargets && t < batches_.size(); ++t) {
    std::vector<TraceEvent> &batch = batches_[t];
    if (batch.empty()) continue;
    launch.targets[t].session->addEvents(launch.targets[t].phase, batch.data(), batch.size());
    batch.clear();
  }
  if (capped_) stat("instrumentation_trace_events_capped").add(std::exchange(capped_, 0));
}

void IntraDecoder::fileNative(const NativeEvent *events, size_t n, const std::string &kernel,
                              const std::function<StringId(uint64_t)> &nameOf,
                              const IntraLaunch &launch) {
  if (n == 0) return;
  beginSlices(launch, 0);
  // A warp's slices are placed from its first event: that event's %globaltimer plus the cycles
  // since, at the SM clock's rate measured over the launch's warps (first to last event), as a
  // Triton trace's are. Each end from its own %globaltimer instead would be quantised apart
  // from its cycles (a child ending after its parent); the device's nominal clock, which the
  // SM may run below, is the fallback for warps too brief to measure.
  struct Anchor {
    uint64_t clock, ns, lastClock, lastNs;
  };
  std::map<std::pair<uint32_t, uint32_t>, Anchor> anchors;  // (cta, warp)
  uint64_t firstNs = UINT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    const NativeEvent &e = events[i];
    firstNs = std::min(firstNs, e.globaltimer);
    auto [it, fresh] = anchors.try_emplace({e.cta, (e.where >> 1) & 0x7fff},
                                           Anchor{e.clock, e.globaltimer, e.clock, e.globaltimer});
    if (!fresh) {
      it->second.lastClock = e.clock;
      it->second.lastNs = e.globaltimer;
    }
  }
  uint64_t clocks = 0, nanos = 0;
  for (const auto &[warp, a] : anchors) {
    if (a.lastClock <= a.clock || a.lastNs <= a.ns) continue;
    clocks += a.lastClock - a.clock;
    nanos += a.lastNs - a.ns;
  }
  double rate = nanos > 0 ? static_cast<double>(clocks) / static_cast<double>(nanos)
                          : (launch.cyclesPerNs > 0 ? launch.cyclesPerNs : 1.0);
  int64_t shift = launch.kernelStartNs
                      ? static_cast<int64_t>(launch.kernelStartNs) - static_cast<int64_t>(firstNs)
                      : 0;
  struct Open {
    StringId name;
    uint64_t clock;
  };
  // Each warp's events in the order it wrote them.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<Open>> stacks;  // (cta, warp)
  std::map<std::vector<StringId>, ScopeSums> sums;
  std::set<std::tuple<uint32_t, uint32_t, std::vector<StringId>>> warpsSeen;
  uint64_t unmatched = 0, crossing = 0;
  for (size_t i = 0; i < n; ++i) {
    const NativeEvent &e = events[i];
    uint32_t warp = (e.where >> 1) & 0x7fff, sm = e.where >> 16;
    std::vector<Open> &stack = stacks[{e.cta, warp}];
    StringId name = nameOf(e.name);
    if (!(e.where & 1)) {
      stack.push_back({name, e.clock});
      continue;
    }
    auto open =
        std::find_if(stack.rbegin(), stack.rend(), [&](const Open &o) { return o.name == name; });
    if (open == stack.rend()) {
      ++unmatched;
      continue;
    }
    crossing += static_cast<uint64_t>(open - stack.rbegin());
    std::vector<StringId> path;
    for (auto it = stack.begin(); it != open.base(); ++it) path.push_back(it->name);
    uint64_t begin = open->clock;
    stack.erase(std::prev(open.base()), stack.end());
    uint64_t cycles = e.clock > begin ? e.clock - begin : 0;
    ScopeSums &sum = sums[path];
    sum.cycles += cycles;
    sum.count += 1;
    if (warpsSeen.insert({e.cta, warp, path}).second) sum.warps += 1;
    const Anchor &a = anchors[{e.cta, warp}];
    auto nsAt = [&](uint64_t clock) {
      double since = static_cast<double>(static_cast<int64_t>(clock - a.clock)) / rate;
      return static_cast<uint64_t>(static_cast<int64_t>(a.ns) + shift + std::llround(since));
    };
    uint64_t at = nsAt(begin);
    addSlice(launch, path, kNoScopeId, name, e.cta, warp, sm, at, std::max(at, nsAt(e.clock)),
             cycles);
  }
  fileSlices(launch);
  for (const auto &[key, stack] : stacks) unmatched += stack.size();
  if (unmatched || crossing) {
    ScopeTable table;
    table.kernel = kernel;
    noteLosses(table, {unmatched, crossing, 0});
  }
  for (size_t t = 0; t < launch.numTargets; ++t) {
    const IntraTarget &target = launch.targets[t];
    Session &s = *target.session;
    if (s.options().data == DataKind::kTrace) continue;
    for (const auto &[path, sum] : sums) {
      NodeId node = scopeNode(s, target.phase, target.kernelNode, path);
      if (node != kNoNode)
        (void)s.addMetrics(target.phase, node,
                           sumMetrics(sum.cycles, sum.count, sum.warps, 1, true));
    }
  }
}

}  // namespace proton::instrumentation
