#include "backends/instrumentation/ptx_rewrite.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <map>
#include <set>
#include <string>

#include "backends/instrumentation/ptx_emitter.h"

namespace proton::instrumentation {
namespace {

using detail::Emitter;
using detail::Out;
using detail::recordingUnitIds;

constexpr std::string_view kMarker = "// @proton:";

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

template <typename T>
bool parseUnsigned(std::string_view s, T &out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
bool parseU32(std::string_view s, uint32_t &out) { return parseUnsigned(s, out); }

std::string hexEncode(std::string_view s) {
  static const char *digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool hexDecode(std::string_view hex, std::string &out) {
  if (hex.size() % 2) return false;
  out.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);
    if (ec != std::errc() || p != hex.data() + i + 2) return false;
    out += static_cast<char>(v);
  }
  return true;
}

uint32_t fnv1a(std::string_view s, uint32_t h = 2166136261u) {
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

struct Marker {
  char kind = 0;  // E X C U, S F (events; made E, X or U once their scope is marked)
  std::string path;
};

// A line that emits no instruction: blank, a comment (inline-asm delimiters are comments), or
// a debug-line directive.
bool isNotCode(std::string_view line) {
  std::string_view t = trim(line);
  return t.empty() || startsWith(t, "//") || startsWith(t, ".loc");
}

bool parseMarker(std::string_view line, Marker &m) {
  size_t at = line.find(kMarker);
  if (at == std::string_view::npos) return false;
  std::string_view rest = trim(line.substr(at + kMarker.size()));
  if (rest.size() < 2 || rest[1] != ':') return false;
  m.kind = rest[0];
  return std::string_view("EXCUSF").find(m.kind) != std::string_view::npos &&
         hexDecode(rest.substr(2), m.path);
}

struct EntryInfo {
  size_t begin = 0, open = 0, end = 0;  // lines: ".entry", its "{", its closing "}"
  std::string name, lastParam;
  uint32_t threads = 0;
  bool exactThreads = false;  // .reqntid (every launch has `threads`), not only .maxntid
};

Result<EntryInfo> findEntry(const std::vector<std::string_view> &lines) {
  EntryInfo e;
  bool found = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view t = trim(lines[i]);
    size_t at = t.find(".entry ");
    if (at == std::string_view::npos || startsWith(t, "//")) continue;
    if (found) return invalidArgument("[PROTON] PTX with more than one kernel entry");
    found = true;
    e.begin = i;
    std::string_view rest = trim(t.substr(at + 7));
    e.name = std::string(rest.substr(0, rest.find_first_of("( \t")));
  }
  if (!found) return invalidArgument("[PROTON] PTX without a kernel entry");
  size_t i = e.begin;
  for (; i < lines.size(); ++i) {
    std::string_view t = trim(lines[i]);
    size_t p = t.find(".param ");
    if (p != std::string_view::npos) {
      std::string_view rest = trim(t.substr(p));
      if (!rest.empty() && rest.back() == ',') rest.remove_suffix(1);
      rest = trim(rest);
      e.lastParam = std::string(rest.substr(rest.find_last_of(" \t") + 1));
    }
    for (std::string_view key : {".reqntid ", ".maxntid "}) {
      size_t k = t.find(key);
      if (k == std::string_view::npos) continue;
      uint32_t n = 1;
      for (std::string_view part : split(trim(t.substr(k + key.size())), ',')) {
        uint32_t v = 0;
        if (parseU32(trim(part), v)) n *= v;
      }
      e.threads = n;
      e.exactThreads = key == ".reqntid ";
    }
    if (t == "{") break;
  }
  if (i == lines.size()) return invalidArgument("[PROTON] kernel entry without a body");
  e.open = i;
  // The body ends where its braces balance: inline assembly may open blocks of its own,
  // whose closing brace can stand alone on a line.
  int depth = 1;
  for (++i; i < lines.size(); ++i) {
    std::string_view t = lines[i];
    t = t.substr(0, t.find("//"));
    for (char c : t) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth <= 0) break;
  }
  e.end = i;
  if (e.lastParam.empty()) return invalidArgument("[PROTON] kernel without a buffer parameter");
  if (e.threads == 0 || e.threads % 32)
    return invalidArgument("[PROTON] kernel without a fixed block size (.reqntid)");
  return e;
}

// Whether a tree kernel's units sum into shared memory (RewriteConfig::ctaSums): only where
// it saves stores (several recording units per CTA), where one thread per 16-byte chunk can
// clear the sums, and where the extra bytes neither exceed what a CTA may have nor lower how
// many CTAs fit on an SM by shared memory (against what its threads allow; 1 KB per CTA is
// the driver's own reservation).
// Where CTA sums start: past the kernel's own shared memory, 16-byte aligned.
uint32_t ctaSumsOffset(uint32_t sharedBytes) { return (sharedBytes + 15) & ~15u; }
// One slot per unit of the CTA (a unit's id is its slot).
uint64_t ctaSlotsBytes(const ScopeTable &t) { return uint64_t(t.unitsPerCta) * t.unitBytes; }

// Whether `extra` bytes of shared memory past the kernel's own (16-byte aligned) neither
// exceed what a CTA may have nor lower how many CTAs fit on an SM.
bool sharedMemoryFits(const RewriteConfig &c, uint64_t extra, uint32_t threads) {
  if (c.maxSharedBytes == 0 || threads == 0 || threads % 32 != 0) return false;
  uint64_t before = c.sharedBytes, after = ctaSumsOffset(c.sharedBytes) + extra;
  if (after > c.maxSharedBytes) return false;
  uint64_t perSm = uint64_t(c.maxSharedBytes) + 1024;
  uint64_t byThreads = std::max<uint64_t>(1, 2048 / threads);
  uint64_t fitBefore = std::min(byThreads, perSm / (before + 1024));
  uint64_t fitAfter = std::min(byThreads, perSm / (after + 1024));
  return fitAfter >= fitBefore;
}

bool useCtaSums(const RewriteConfig &c, const ScopeTable &t, uint32_t threads) {
  size_t units = recordingUnitIds(c, t.unitsPerCta).size();
  if (c.trace || !c.ctaSums || units < 2) return false;
  return sharedMemoryFits(c, ctaSlotsBytes(t), threads);
}

// Trace with buffer_type="shared" (RewriteConfig::ctaSums): each unit's events go to its own
// circular buffer in shared memory, and its warp copies them out, coalesced, as it returns;
// where the buffers do not fit (as for CTA sums), events are stored to global memory as they
// happen.
// Per unit: its header's place, then its events (ptx_emitter.h, sharedTraceEpilogue).
uint64_t traceSharedBytes(const ScopeTable &t) {
  return uint64_t(t.unitsPerCta) * (kTraceUnitHeaderBytes + 8 * t.capacity);
}

// Whether every way out of the entry is a plain `ret;` (the lines the epilogue goes before).
// A predicated return or an `exit` would leave its warp's sums out of the CTA's, and the CTA's
// last unit would never come: CTA sums are used only when there is none.
bool onlyPlainReturns(const std::vector<std::string_view> &lines, const EntryInfo &e) {
  for (size_t i = e.open + 1; i < e.end; ++i) {
    std::string_view t = trim(lines[i]);
    if (t == "ret;" || startsWith(t, "//")) continue;
    size_t code = t.find("//");
    if (code != std::string_view::npos) t = trim(t.substr(0, code));
    if (t.size() >= 4 && (t.substr(t.size() - 4) == "ret;" || t.substr(t.size() - 4) == "xit;"))
      return false;
  }
  return true;
}

// The barrier the CTA's threads meet at before its record is stored, or -1 for none. Barrier
// 0 where the kernel uses it only for the whole CTA (Triton's __syncthreads) or not at all:
// a kernel declares how many barriers it uses, and more of them can mean fewer CTAs per SM
// (barrier 15 cost softmax 1.49x on an H100, barrier 0 1.04x). Else the lowest one it never
// uses; -1 where a barrier id is in a register (any could be taken) or bar.red is used.
int ctaBarrier(const std::vector<std::string_view> &lines, const EntryInfo &e) {
  bool used[16] = {}, partial[16] = {};
  for (size_t i = e.open + 1; i < e.end; ++i) {
    std::string_view t = trim(lines[i]);
    if (startsWith(t, "@")) t = trim(t.substr(std::min(t.size(), t.find_first_of(" \t"))));
    if (!(startsWith(t, "bar.") || startsWith(t, "barrier.")) || startsWith(t, "bar.warp"))
      continue;
    size_t op = t.find_first_of(" \t");
    if (op == std::string_view::npos) continue;
    if (startsWith(t, "bar.red") || startsWith(t, "barrier.red")) return -1;  // rare: not parsed
    std::string_view args = trim(t.substr(op));
    std::string_view id = trim(args.substr(0, args.find_first_of(",;")));
    uint32_t v = 0;
    if (!parseU32(id, v) || v > 15) return -1;
    used[v] = true;
    // A thread count after the id, or an arrive: the barrier also serves part of the CTA.
    if (args.find(',') != std::string_view::npos || startsWith(t, "bar.arrive") ||
        startsWith(t, "barrier.arrive"))
      partial[v] = true;
  }
  if (!partial[0]) return 0;
  for (int b = 1; b < 16; ++b)
    if (!used[b]) return b;
  return -1;
}

// The dynamic shared-memory array the module declares before the entry (Triton's
// `global_smem`), or "" when it declares none.
// The kernel's dynamic shared-memory symbol, where it is declared 16-byte aligned at least
// (the CTA sums and trace headers are stored 16 bytes at a time); empty otherwise, and the
// rewrite declares its own, 16-byte aligned, at the same address.
std::string sharedSymbol(const std::vector<std::string_view> &lines, size_t entry) {
  for (size_t i = 0; i < entry; ++i) {
    std::string_view t = trim(lines[i]);
    if (!startsWith(t, ".extern .shared ") || t.back() != ';') continue;
    size_t open = t.rfind("[]");
    if (open == std::string_view::npos) continue;
    size_t align = t.find(".align ");
    uint32_t bytes = 0;
    if (align == std::string_view::npos ||
        !parseU32(t.substr(align + 7, t.find(' ', align + 7) - (align + 7)), bytes) || bytes < 16)
      continue;
    size_t start = t.find_last_of(" \t", open) + 1;
    return std::string(t.substr(start, open - start));
  }
  return {};
}

}  // namespace

Result<RewriteConfig> parseInstrumentationMode(std::string_view mode) {
  std::vector<std::string_view> f = split(mode, ':');
  if (f.size() != 6 || f[0] != "proton")
    return invalidArgument("[PROTON] malformed instrumentation mode: " + std::string(mode));
  RewriteConfig c;
  c.text = std::string(mode);
  if (f[1] != "tree" && f[1] != "trace")
    return invalidArgument("[PROTON] instrumentation data must be tree or trace");
  c.trace = f[1] == "trace";
  if (!parseU32(f[2], c.unitWarps) || (c.unitWarps & (c.unitWarps - 1)))
    return invalidArgument("[PROTON] instrumentation unit must be 0 or a power of two warps");
  if (!parseU32(f[3], c.capacity) || c.capacity == 0 || (c.capacity & (c.capacity - 1)))
    return invalidArgument("[PROTON] events per unit must be a power of two");
  if (f[4] != "*") {
    for (std::string_view part : split(f[4], ',')) {
      uint32_t u = 0;
      if (!parseU32(part, u)) return invalidArgument("[PROTON] bad selected unit list");
      c.selectedUnits.push_back(u);
    }
  }
  for (std::string_view opt : split(f[5], ',')) {
    if (opt.empty()) continue;
    if (opt == "clock32")
      c.clock32 = true;
    else if (opt == "clock64")
      c.clock32 = false;
    else if (opt == "time_shift")
      c.timeShift = true;
    else if (opt == "cta_sums")
      c.ctaSums = true;
    else if (opt.substr(0, 6) == "layout") {
      uint32_t v = 0;
      if (!parseU32(opt.substr(6), v) || v != kLayoutVersion)
        return invalidArgument("[PROTON] instrumentation mode for buffer layout " +
                               std::string(opt.substr(6)) + "; this Proton writes layout " +
                               std::to_string(kLayoutVersion));
    } else if (opt != "sched_stores" && opt != "no_triton" && opt != "no_gluon")
      // no_<language>: proton.language left that language's kernels without markers (it keys
      // Triton's caches; nothing here depends on it).
      return invalidArgument("[PROTON] unknown instrumentation optimization: " + std::string(opt));
  }
  return c;
}

Result<RewriteResult> rewritePtx(std::string_view ptx, const RewriteConfig &config) {
  std::vector<std::string_view> lines = splitLines(ptx);
  Result<EntryInfo> found = findEntry(lines);
  if (!found.isOk()) return found.status();
  const EntryInfo &e = found.value();

  ScopeTable t;
  t.kernel = e.name;
  t.trace = config.trace;
  t.numWarps = e.threads / 32;
  // A unit is a power of two of warps (warp ids are split by mask and shift): a CTA of 12
  // warps (Gluon's warp_specialize) recorded per CTA is one unit of 16, led by warp 0.
  const uint32_t wholeCta = std::bit_ceil(std::max<uint32_t>(t.numWarps, 1));
  t.unitWarps = config.unitWarps == 0 ? wholeCta : std::min(config.unitWarps, wholeCta);
  t.unitsPerCta = (t.numWarps + t.unitWarps - 1) / t.unitWarps;
  t.paths.push_back("");
  std::map<std::string, size_t> ids{{"", 0}};
  std::vector<Marker> markers(lines.size());
  auto drop = [&t](Marker &m) {
    m.kind = 'D';
    ++t.droppedMarkers;
    std::string name = m.path;  // shown as outer/inner
    std::replace(name.begin(), name.end(), '\x1f', '/');
    if (std::find(t.droppedScopes.begin(), t.droppedScopes.end(), name) == t.droppedScopes.end())
      t.droppedScopes.push_back(std::move(name));
  };
  std::set<std::string> eventPaths;  // scopes that are events (an S or F marker)
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!parseMarker(lines[i], markers[i])) continue;
    if (i <= e.open || i >= e.end) {
      drop(markers[i]);
      continue;
    }
    // An event's start is an enter; its end where it did not start (another warp's code, a
    // warp-specialized partition) is an exit in a trace, whose decoder links the two warps'
    // halves, and unmeasurable in a tree (counted as an exit of a scope not open).
    if (markers[i].kind == 'S' || markers[i].kind == 'F') {
      eventPaths.insert(markers[i].path);
      markers[i].kind = markers[i].kind == 'S' ? 'E' : (config.trace ? 'X' : 'U');
    }
    if (markers[i].kind == 'U') {
      ++t.staticUnmatched;
      continue;
    }
    if (markers[i].kind == 'C') ++t.staticCrossing;
    if (ids.count(markers[i].path)) continue;
    if (t.paths.size() >= kMaxScopes) {
      drop(markers[i]);
      continue;
    }
    ids[markers[i].path] = t.paths.size();
    t.paths.push_back(markers[i].path);
  }
  for (const std::string &path : eventPaths)
    if (auto id = ids.find(path); id != ids.end()) t.eventScopes |= uint64_t{1} << id->second;
  int barrier = -1;
  const bool plainReturns = onlyPlainReturns(lines, e);
  size_t returns = 0;
  for (size_t i = e.open + 1; i < e.end; ++i) returns += trim(lines[i]) == "ret;";
  // Every warp leaves through the one plain return, all of its lanes together.
  const bool wholeWarps = plainReturns && returns == 1;
  if (config.trace) {
    t.capacity = config.capacity;
    t.unitBytes = kTraceUnitHeaderBytes + 8 * config.capacity;
    t.slotBytes = t.unitBytes * t.unitsPerCta;
    // The unit header leaves in 16-byte stores: units must start 16-byte aligned. A launch of
    // fewer threads than .maxntid could end in a partial warp, which cannot copy as a whole.
    if (config.ctaSums && wholeWarps && e.exactThreads && t.unitBytes % 16 == 0 &&
        sharedMemoryFits(config, traceSharedBytes(t), e.threads)) {
      t.ctaSumsOffset = ctaSumsOffset(config.sharedBytes);
      t.sharedBytes = t.ctaSumsOffset + static_cast<uint32_t>(traceSharedBytes(t));
    }
  } else {
    t.unitBytes = kTreeUnitHeaderBytes + kTreeScopeBytes * static_cast<uint32_t>(t.paths.size());
    t.slotBytes = t.unitBytes * t.unitsPerCta;
    barrier = ctaBarrier(lines, e);
    if (useCtaSums(config, t, e.threads) && plainReturns && barrier >= 0 && e.exactThreads) {
      t.ctaSumsOffset = ctaSumsOffset(config.sharedBytes);
      t.sharedBytes = t.ctaSumsOffset + static_cast<uint32_t>(ctaSlotsBytes(t));
      t.slotBytes = t.unitBytes;
    }
  }
  // The same kernel compiled with another layout (an autotuned num_warps, another shared
  // memory budget) has the same name, scopes and mode: its layout keys the table too.
  uint32_t h = fnv1a(config.text, fnv1a(e.name));
  for (const std::string &p : t.paths) h = fnv1a(p, fnv1a("\x1e", h));
  for (uint32_t v : {t.numWarps, t.unitWarps, t.unitsPerCta, t.capacity, t.unitBytes, t.slotBytes,
                     t.ctaSumsOffset, t.sharedBytes})
    h = fnv1a(std::to_string(v), fnv1a("\x1e", h));
  h = fnv1a(std::to_string(t.eventScopes), fnv1a("\x1e", h));
  t.hash = h == 0 ? 1 : h;

  // CTA sums live in the kernel's dynamic shared memory: the symbol it declares, else ours.
  std::string smem = t.sharedBytes ? sharedSymbol(lines, e.begin) : std::string();
  bool declareSmem = t.sharedBytes && smem.empty();
  if (declareSmem) smem = "__proton_smem";
  Emitter emit(config, t, smem, barrier, wholeWarps);
  std::string out;
  out.reserve(ptx.size() + 4096);
  size_t insertAt = e.open + 1;
  while (insertAt < e.end) {
    std::string_view s = trim(lines[insertAt]);
    if (!(s.empty() || startsWith(s, ".reg") || startsWith(s, ".local") ||
          startsWith(s, ".shared")))
      break;
    ++insertAt;
  }
  // Markers with no instruction between them: the later one takes the earlier one's clock
  // reading (tree, Emitter::enter), or the two are stored as one event (trace).
  auto recorded = [&](size_t i) {
    char k = markers[i].kind;
    return (k == 'E' || k == 'X' || k == 'C') && ids.count(markers[i].path);
  };
  auto nextAdjacent = [&](size_t i) {
    size_t j = i + 1;
    while (j < e.end && markers[j].kind == 0 && isNotCode(lines[j])) ++j;
    return j < e.end && recorded(j) ? j : std::string::npos;
  };
  std::vector<std::string> reading(lines.size());
  std::vector<size_t> pairedWith(lines.size(), std::string::npos);  // trace: on the second
  std::vector<bool> stored(lines.size(), true);  // trace: false on the first of a pair
  for (size_t i = e.open + 1; i < e.end; ++i) {
    if (!recorded(i)) continue;
    size_t j = nextAdjacent(i);
    if (j == std::string::npos) continue;
    if (config.trace && stored[i] && pairedWith[i] == std::string::npos) {
      stored[i] = false;
      pairedWith[j] = i;
      ++t.pairedEvents;
    } else if (emit.sharesReadings()) {
      // An exit that reused a reading passes it on (it did not read into its own register).
      char kind = markers[i].kind;
      reading[j] = !reading[i].empty() && kind != 'E' ? reading[i]
                                                      : emit.clockOf(kind, ids[markers[i].path]);
    }
  }
  size_t rets = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == e.begin && declareSmem) out += ".extern .shared .align 16 .b8 __proton_smem[];\n";
    if (i == insertAt) out += emit.declarations() + emit.prologue(e.lastParam);
    const Marker &m = markers[i];
    bool inEntry = i > e.open && i < e.end;
    if (m.kind == 0 && inEntry && trim(lines[i]) == "ret;") out += emit.epilogue(rets++);
    out += lines[i];
    out += '\n';
    if (m.kind == 0 || m.kind == 'D') continue;
    auto id = ids.find(m.path);
    auto tagOf = [&](const Marker &k) {
      return static_cast<uint32_t>(ids[k.path] << 1 | (k.kind == 'E' ? 0 : 1));
    };
    if (m.kind == 'U' || id == ids.end())
      out += emit.unmatched();
    else if (!stored[i])
      continue;  // stored with the marker after it
    else if (pairedWith[i] != std::string::npos)
      out += emit.pairedEvent(tagOf(markers[pairedWith[i]]), tagOf(m));
    else if (m.kind == 'E')
      out += emit.enter(id->second, reading[i]);
    else
      out += emit.exit(id->second, m.kind == 'C', reading[i]);
  }
  if (rets == 0) return invalidArgument("[PROTON] kernel entry without a return");
  return RewriteResult{std::move(out), std::move(t)};
}

std::string encodeTable(const ScopeTable &t) {
  Out o;
  o << "v3\t" << hexEncode(t.kernel) << '\t' << t.hash << '\t' << (t.trace ? 1 : 0) << '\t'
    << t.numWarps << '\t' << t.unitWarps << '\t' << t.unitsPerCta << '\t' << t.capacity << '\t'
    << t.unitBytes << '\t' << t.slotBytes << '\t' << t.staticUnmatched << '\t' << t.staticCrossing
    << '\t' << t.droppedMarkers << '\t' << t.pairedEvents << '\t' << t.eventScopes << '\t'
    << t.droppedScopes.size();
  for (const std::string &s : t.droppedScopes) o << '\t' << hexEncode(s);
  for (const std::string &p : t.paths) o << '\t' << hexEncode(p);
  return o.str();
}

Result<ScopeTable> decodeTable(std::string_view text) {
  std::vector<std::string_view> f = split(text, '\t');
  ScopeTable t;
  uint32_t trace = 0;
  // v2: the paired events, then the names of the dropped markers' scopes after their count;
  // v3: the event scopes between the two; v1 (an older Proton's cached binaries) has none.
  const bool v3 = !f.empty() && f[0] == "v3";
  const bool v2 = v3 || (!f.empty() && f[0] == "v2");
  bool ok = f.size() >= 14 && (v2 || f[0] == "v1") && hexDecode(f[1], t.kernel) &&
            parseU32(f[2], t.hash) && parseU32(f[3], trace) && parseU32(f[4], t.numWarps) &&
            parseU32(f[5], t.unitWarps) && parseU32(f[6], t.unitsPerCta) &&
            parseU32(f[7], t.capacity) && parseU32(f[8], t.unitBytes) &&
            parseU32(f[9], t.slotBytes) && parseU32(f[10], t.staticUnmatched) &&
            parseU32(f[11], t.staticCrossing) && parseU32(f[12], t.droppedMarkers);
  size_t first = 13;
  uint32_t dropped = 0;
  if (ok && v2) {
    size_t at = 14;
    ok = f.size() >= 16 && parseU32(f[13], t.pairedEvents) &&
         (!v3 || parseUnsigned(f[at++], t.eventScopes)) && f.size() > at &&
         parseU32(f[at], dropped) && f.size() >= at + 2 + size_t{dropped};
    for (size_t i = at + 1; ok && i < at + 1 + size_t{dropped}; ++i) {
      std::string name;
      ok = hexDecode(f[i], name);
      t.droppedScopes.push_back(std::move(name));
    }
    first = at + 1 + size_t{dropped};
  }
  for (size_t i = first; ok && i < f.size(); ++i) {
    std::string path;
    ok = hexDecode(f[i], path);
    t.paths.push_back(std::move(path));
  }
  // A v1 trace table describes an older unit header than the decoder walks.
  if (!ok || t.paths.empty() || t.unitWarps == 0 || t.unitsPerCta == 0 || (!v2 && trace))
    return invalidArgument("[PROTON] malformed instrumentation table");
  t.trace = trace != 0;
  return t;
}

}  // namespace proton::instrumentation
