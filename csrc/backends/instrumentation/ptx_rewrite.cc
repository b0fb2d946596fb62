#include "backends/instrumentation/ptx_rewrite.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <type_traits>

namespace proton::instrumentation {
namespace {

constexpr std::string_view kMarker = "// @proton:";

// Text builder. No iostreams: the extension links libstdc++ statically, and iostreams' locale
// state breaks when a process also loads a shared libstdc++ (PyTorch does).
class Out {
 public:
  Out &operator<<(std::string_view s) {
    text_ += s;
    return *this;
  }
  Out &operator<<(const char *s) { return *this << std::string_view(s); }
  Out &operator<<(const std::string &s) { return *this << std::string_view(s); }
  Out &operator<<(char c) {
    text_ += c;
    return *this;
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Out &operator<<(T v) {
    text_ += std::to_string(v);
    return *this;
  }
  std::string str() { return std::move(text_); }

 private:
  std::string text_;
};

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

bool parseU32(std::string_view s, uint32_t &out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

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
  char kind = 0;  // E X C U
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
  return std::string_view("EXCU").find(m.kind) != std::string_view::npos &&
         hexDecode(rest.substr(2), m.path);
}

// The ids of a CTA's units that record: all of them, or the selected ones that exist.
std::vector<uint32_t> recordingUnitIds(const RewriteConfig &c, uint32_t unitsPerCta) {
  std::vector<uint32_t> ids;
  for (uint32_t u = 0; u < unitsPerCta; ++u)
    if (c.selectedUnits.empty() ||
        std::find(c.selectedUnits.begin(), c.selectedUnits.end(), u) != c.selectedUnits.end())
      ids.push_back(u);
  return ids;
}

// The PTX that the rewrite inserts, written into one string.
class Emitter {
 public:
  // smem: the dynamic shared-memory symbol that CTA sums are addressed from (when t has them).
  // barrier: the named barrier the CTA's threads meet at before its record is stored.
  // wholeWarps: every warp leaves through the one plain return, all of its lanes together.
  Emitter(const RewriteConfig &c, const ScopeTable &t, std::string smem = {}, int barrier = -1,
          bool wholeWarps = false)
      : c_(c), t_(t), smem_(std::move(smem)), barrier_(barrier), wholeWarps_(wholeWarps) {}

  bool ctaSums() const { return t_.sharedBytes != 0; }  // tree only (useCtaSums)

  std::string declarations() const {
    Out o;
    size_t k = t_.paths.size();
    o << "\t.reg .pred \t%pt_q<4>;\n\t.reg .pred \t%pt_lead;\n"
      << "\t.reg .b32 \t%pt_w<12>;\n\t.reg .b64 \t%pt_d<9>;\n"
      << "\t.reg .b32 \t%pt_u, %pt_x, %pt_sh, %pt_n;\n";
    if (!c_.trace) {
      o << "\t.reg ." << (c_.clock32 ? "b32" : "b64") << " \t%pt_s<" << k << ">;\n"
        << "\t.reg .b64 \t%pt_a<" << k << ">;\n\t.reg .b32 \t%pt_c<" << k << ">;\n"
        << "\t.reg .b32 \t%pt_e<" << k << ">;\n";
    }
    return o.str();
  }

  std::string prologue(std::string_view param) const {
    Out o;
    o << "\t// proton: instrumentation prologue\n"
      << "\tld.param.u64 \t%pt_d0, [" << param << "];\n"
      << "\tmov.u32 \t%pt_w0, %tid.x;\n"
      << "\tshr.u32 \t%pt_w1, %pt_w0, 5;\n"
      << "\tand.b32 \t%pt_w2, %pt_w0, 31;\n"
      << "\tsetp.ne.u64 \t%pt_q0, %pt_d0, 0;\n"
      << "\tsetp.eq.u32 \t%pt_q1, %pt_w2, 0;\n"
      << "\tand.pred \t%pt_q0, %pt_q0, %pt_q1;\n"
      << "\tand.b32 \t%pt_w3, %pt_w1, " << (t_.unitWarps - 1) << ";\n"
      << "\tsetp.eq.u32 \t%pt_q1, %pt_w3, 0;\n"
      << "\tand.pred \t%pt_q0, %pt_q0, %pt_q1;\n"
      << "\tshr.u32 \t%pt_w3, %pt_w1, " << log2(t_.unitWarps) << ";\n";
    if (c_.selectedUnits.empty()) {
      o << "\tmov.pred \t%pt_lead, %pt_q0;\n";
    } else {
      selectedUnit(o);
      o << "\tand.pred \t%pt_lead, %pt_q0, %pt_q1;\n";
    }
    o << "\tmov.u32 \t%pt_u, 0;\n\tmov.u32 \t%pt_x, 0;\n\tmov.u32 \t%pt_n, 0;\n";
    if (c_.timeShift) {
      o << "\tmov.u32 \t%pt_w4, %clock;\n\tmov.u32 \t%pt_w5, %clock;\n"
        << "\tsub.u32 \t%pt_sh, %pt_w5, %pt_w4;\n";
    } else {
      o << "\tmov.u32 \t%pt_sh, 0;\n";
    }
    if (c_.trace) {
      // The unit's start (its timer pair and the kernel's enter event) is read before the
      // buffer's address arithmetic, which would otherwise sit in front of a clock read that
      // nothing passes; the stores follow.
      o << "\t@%pt_lead mov.u64 \t%pt_d6, %globaltimer;\n"
        << "\t@%pt_lead mov.u64 \t%pt_d7, %clock64;\n"
        << "\tmov.u32 \t%pt_w8, %clock;\n";
      unitAddress(o);
      traceHeaderStart(o);
      event(o, 0, /*readClock=*/false);
      return o.str();
    } else {
      // A tree unit needs its record's address only when it returns: computed there, so the
      // special-register reads and the multiply chain do not delay the kernel's first work
      // (ptxas moves nothing across the clock read below; CTA sums' addresses computed here
      // cost a 3.4 us vector add 3% on an H100).
      for (size_t i = 0; i < t_.paths.size(); ++i)
        o << "\tmov.u64 \t%pt_a" << i << ", 0;\n\tmov.u32 \t%pt_c" << i << ", 0;\n"
          << "\tmov.u32 \t%pt_e" << i << ", 0;\n\tmov." << (c_.clock32 ? "u32" : "u64")
          << " \t%pt_s" << i << ", 0;\n";
    }
    o << enter(0);
    return o.str();
  }

  // Markers with no instruction between them (nested or adjacent scopes: `with scope("a"):
  // with scope("b"):`, or `exit_scope("a"); enter_scope("b")`) share one clock reading: the
  // later one takes `reading`, the register the earlier one read the clock into (clockOf).
  // A chain of k markers then costs one clock read, not k. Not with time_shift, which takes
  // one read's cost off every scope end.
  std::string enter(size_t id, const std::string &reading = {}) const {
    Out o;
    if (c_.trace) {
      event(o, static_cast<uint32_t>(id << 1));
      return o.str();
    }
    // Two instructions: the clock, and the enter count (enters and exits that do not pair up
    // are found at the end, from the counts). The read is predicated on the recording lane:
    // a value only some lanes compute cannot live in a uniform register, so ptxas emits the
    // fixed-latency CS2R rather than S2UR.
    const char *type = c_.clock32 ? "u32" : "u64";
    if (!reading.empty())
      o << "\tmov." << type << " \t%pt_s" << id << ", " << reading << ";\n";
    else
      o << "\t@%pt_lead mov." << type << " \t%pt_s" << id << ", "
        << (c_.clock32 ? "%clock" : "%clock64") << ";\n";
    o << "\tadd.u32 \t%pt_e" << id << ", %pt_e" << id << ", 1;\n";
    return o.str();
  }

  std::string exit(size_t id, bool crossing, const std::string &reading = {}) const {
    Out o;
    if (crossing) o << "\tadd.u32 \t%pt_x, %pt_x, 1;\n";
    if (c_.trace) {
      event(o, static_cast<uint32_t>(id << 1 | 1));
      return o.str();
    }
    std::string now = reading.empty() ? clockOf('X', id) : reading;
    if (c_.clock32) {
      if (reading.empty()) o << "\tmov.u32 \t%pt_w9, 0;\n\t@%pt_lead mov.u32 \t%pt_w9, %clock;\n";
      o << "\tsub.u32 \t%pt_w6, " << now << ", %pt_s" << id << ";\n";
      if (c_.timeShift)
        o << "\tmin.u32 \t%pt_w7, %pt_w6, %pt_sh;\n"
          << "\tsub.u32 \t%pt_w6, %pt_w6, %pt_w7;\n";
      o << "\tcvt.u64.u32 \t%pt_d6, %pt_w6;\n";
    } else {
      if (reading.empty()) o << "\tmov.u64 \t%pt_d8, 0;\n\t@%pt_lead mov.u64 \t%pt_d8, %clock64;\n";
      o << "\tsub.u64 \t%pt_d6, " << now << ", %pt_s" << id << ";\n";
      if (c_.timeShift)
        o << "\tcvt.u64.u32 \t%pt_d7, %pt_sh;\n"
          << "\tmin.u64 \t%pt_d7, %pt_d6, %pt_d7;\n"
          << "\tsub.u64 \t%pt_d6, %pt_d6, %pt_d7;\n";
    }
    o << "\tadd.u64 \t%pt_a" << id << ", %pt_a" << id << ", %pt_d6;\n"
      << "\tadd.u32 \t%pt_c" << id << ", %pt_c" << id << ", 1;\n";
    return o.str();
  }

  // Tree: the register that holds the clock reading of an enter ('E') or exit of scope `id`.
  std::string clockOf(char kind, size_t id) const {
    if (kind == 'E') return "%pt_s" + std::to_string(id);
    return c_.clock32 ? "%pt_w9" : "%pt_d8";
  }
  bool sharesReadings() const { return !c_.trace && !c_.timeShift; }

  std::string unmatched() const { return "\tadd.u32 \t%pt_u, %pt_u, 1;\n"; }

  std::string epilogue(size_t retIndex) const {
    Out o;
    o << "\t// proton: instrumentation epilogue\n";
    // CTA sums: the record's addresses are worked out before the kernel scope's last clock
    // read, where ptxas can overlap them with the kernel's own last work, not after it, where
    // the special-register and constant reads they wait for lengthen every CTA's end.
    if (!c_.trace && ctaSums()) {
      recordAddress(o, /*ctaRecord=*/true);
      ctaSumsAddress(o);
    }
    o << exit(0, false);
    std::string skip = "$pt_skip" + std::to_string(retIndex);
    if (c_.trace) {
      o << "\t@!%pt_lead bra \t" << skip << ";\n"
        << "\tst.global.u32 \t[%pt_d1], %pt_n;\n"
        << "\tmov.u64 \t%pt_d6, %globaltimer;\n"
        << "\tst.global.u64 \t[%pt_d1+24], %pt_d6;\n"
        << "\tmov.u64 \t%pt_d6, %clock64;\n"
        << "\tst.global.u64 \t[%pt_d1+32], %pt_d6;\n"
        << "\tmov.u32 \t%pt_w6, " << t_.hash << ";\n"
        << "\tst.global.u32 \t[%pt_d1+40], %pt_w6;\n"
        << "\tst.global.u32 \t[%pt_d1+44], %pt_sh;\n";
    } else {
      // Enters and exits that did not pair up: |enters - exits| per scope.
      for (size_t i = 0; i < t_.paths.size(); ++i)
        o << "\tsub.s32 \t%pt_w6, %pt_e" << i << ", %pt_c" << i << ";\n"
          << "\tabs.s32 \t%pt_w6, %pt_w6;\n"
          << "\tadd.u32 \t%pt_u, %pt_u, %pt_w6;\n";
      if (ctaSums()) {
        ctaSumsEpilogue(o, skip, retIndex);
        o << skip << ":\n";
        return o.str();
      }
      if (wholeWarps_)
        unitEpilogue(o, skip);
      else
        leaderEpilogue(o, skip);
    }
    o << skip << ":\n";
    return o.str();
  }

 private:
  static uint32_t log2(uint32_t v) {
    uint32_t r = 0;
    while ((1u << r) < v) ++r;
    return r;
  }

  uint32_t chunks() const { return static_cast<uint32_t>(t_.paths.size()) + 1; }

  // %pt_q1: unit %pt_w3 is one of the selected ones.
  void selectedUnit(Out &o) const {
    o << "\tsetp.ne.u32 \t%pt_q1, %pt_w3, %pt_w3;\n";  // false
    for (uint32_t u : c_.selectedUnits)
      o << "\tsetp.eq.or.u32 \t%pt_q1, %pt_w3, " << u << ", %pt_q1;\n";
  }

  // The launch slot's header [hash | unitBytes], stored where %pt_q3 (one thread of the grid).
  void slotHeader(Out &o) const {
    o << "\tmov.u32 \t%pt_w6, " << t_.hash << ";\n"
      << "\tmov.u32 \t%pt_w7, " << t_.unitBytes << ";\n"
      << "\t@%pt_q3 st.global.v2.u32 \t[%pt_d0], {%pt_w6, %pt_w7};\n";
  }

  // %pt_w10: the CTA sums in shared memory.
  void ctaSumsAddress(Out &o) const {
    o << "\tmov.u32 \t%pt_w10, " << smem_ << ";\n"
      << "\tadd.u32 \t%pt_w10, %pt_w10, " << t_.ctaSumsOffset << ";\n";
  }

  // Every recording unit's leader writes its sums, in the layout of a unit record, into its
  // own slot in shared memory (every word: nothing to clear first); then all of the CTA's
  // threads meet at one barrier, and thread j adds up 8-byte chunk j over the slots and stores
  // it, so that the CTA's record leaves in one coalesced store. No atomics, and no barrier at
  // the kernel's entry: the CTA ends with its last warp anyway, so the wait costs it little.
  void ctaSumsEpilogue(Out &o, const std::string &skip, size_t retIndex) const {
    std::string arrive = "$pt_arrive" + std::to_string(retIndex);
    o << "\tsetp.eq.u64 \t%pt_q2, %pt_d0, 0;\n"  // recording off: the same for every thread
      << "\t@%pt_q2 bra \t" << skip << ";\n"
      << "\tmov.u32 \t%pt_w0, %tid.x;\n"
      << "\t@!%pt_lead bra \t" << arrive << ";\n"
      << "\tmad.lo.u32 \t%pt_w11, %pt_w3, " << t_.unitBytes << ", %pt_w10;\n"
      << "\tmov.u32 \t%pt_w6, 1;\n\tmov.u32 \t%pt_w7, 0;\n"
      << "\tst.shared.v4.u32 \t[%pt_w11], {%pt_u, %pt_x, %pt_w6, %pt_w7};\n";
    for (size_t i = 0; i < t_.paths.size(); ++i)
      o << "\tsetp.ne.u32 \t%pt_q2, %pt_c" << i << ", 0;\n"
        << "\tselp.u32 \t%pt_w6, 1, 0, %pt_q2;\n"
        << "\tmov.b64 \t{%pt_w4, %pt_w5}, %pt_a" << i << ";\n"
        << "\tst.shared.v4.u32 \t[%pt_w11+" << kTreeUnitHeaderBytes + kTreeScopeBytes * i
        << "], {%pt_w4, %pt_w5, %pt_c" << i << ", %pt_w6};\n";
    const uint32_t chunks = t_.unitBytes / 8, threads = t_.numWarps * 32;
    o << arrive << ":\n"
      << "\tsetp.eq.and.u32 \t%pt_q3, %pt_w0, 0, %pt_q3;\n"  // CTA 0's thread 0: the header
      << "\tbar.sync \t" << barrier_ << ";\n"
      << "\tsetp.ge.u32 \t%pt_q2, %pt_w0, " << chunks << ";\n"
      << "\t@%pt_q2 bra \t" << skip << ";\n";
    for (uint32_t first = 0; first < chunks; first += threads) {
      o << "\tadd.u32 \t%pt_w1, %pt_w0, " << first << ";\n";
      if (first > 0)
        o << "\tsetp.ge.u32 \t%pt_q2, %pt_w1, " << chunks << ";\n"
          << "\t@%pt_q2 bra \t" << skip << ";\n";
      o << "\tshl.b32 \t%pt_w2, %pt_w1, 3;\n\tadd.u32 \t%pt_w2, %pt_w2, %pt_w10;\n"
        << "\tmov.u64 \t%pt_d6, 0;\n\tmov.u32 \t%pt_w4, 0;\n\tmov.u32 \t%pt_w5, 0;\n";
      for (uint32_t u : recordingUnitIds(c_, t_.unitsPerCta))
        o << "\tld.shared.v2.u32 \t{%pt_w6, %pt_w7}, [%pt_w2+" << u * t_.unitBytes << "];\n"
          << "\tadd.u32 \t%pt_w4, %pt_w4, %pt_w6;\n\tadd.u32 \t%pt_w5, %pt_w5, %pt_w7;\n"
          << "\tmov.b64 \t%pt_d7, {%pt_w6, %pt_w7};\n\tadd.u64 \t%pt_d6, %pt_d6, %pt_d7;\n";
      // A scope's cycles (even chunks past the header's two) are one u64; the rest two u32s.
      o << "\tand.b32 \t%pt_w6, %pt_w1, 1;\n\tsetp.eq.u32 \t%pt_q1, %pt_w6, 0;\n"
        << "\tsetp.ge.and.u32 \t%pt_q1, %pt_w1, 2, %pt_q1;\n"
        << "\tmov.b64 \t{%pt_w6, %pt_w7}, %pt_d6;\n"
        << "\tselp.b32 \t%pt_w4, %pt_w6, %pt_w4, %pt_q1;\n"
        << "\tselp.b32 \t%pt_w5, %pt_w7, %pt_w5, %pt_q1;\n"
        << "\tmul.wide.u32 \t%pt_d7, %pt_w1, 8;\n\tadd.u64 \t%pt_d7, %pt_d1, %pt_d7;\n"
        << "\tst.global.v2.u32 \t[%pt_d7], {%pt_w4, %pt_w5};\n";
      if (first == 0) slotHeader(o);
    }
  }

  // A record per unit where a warp may reach a return with only some of its lanes (a
  // predicated return, an exit, or more than one return): its leader stores it alone.
  void leaderEpilogue(Out &o, const std::string &skip) const {
    o << "\t@!%pt_lead bra \t" << skip << ";\n"
      << "\tmov.u32 \t%pt_w0, %tid.x;\n\tshr.u32 \t%pt_w1, %pt_w0, 5;\n"
      << "\tshr.u32 \t%pt_w3, %pt_w1, " << log2(t_.unitWarps) << ";\n";
    unitAddress(o);
    slotHeader(o);
    o << "\tmov.u32 \t%pt_w6, 1;\n\tmov.u32 \t%pt_w7, 0;\n"
      << "\tst.global.v4.u32 \t[%pt_d1], {%pt_u, %pt_x, %pt_w6, %pt_w7};\n";
    for (size_t i = 0; i < t_.paths.size(); ++i)
      o << "\tcvt.u64.u32 \t%pt_d6, %pt_c" << i << ";\n"
        << "\tst.global.v2.u64 \t[%pt_d1+" << kTreeUnitHeaderBytes + kTreeScopeBytes * i
        << "], {%pt_a" << i << ", %pt_d6};\n";
  }

  // A record per unit (buffer_type="global", or where CTA sums are not possible), every warp
  // leaving through the one plain return: the unit's first warp passes its leader's sums to
  // all of its lanes, and lane j stores 8-byte chunk j, so the record leaves in one coalesced
  // store (four 16-byte stores by the leader alone cost softmax 12% on an H100, at the end of
  // the kernel where they delay it). Warps that store nothing branch away on conditions that
  // are the same for all of their lanes, so the shuffles see the whole warp.
  void unitEpilogue(Out &o, const std::string &skip) const {
    o << "\tsetp.eq.u64 \t%pt_q2, %pt_d0, 0;\n\t@%pt_q2 bra \t" << skip << ";\n"
      << "\tmov.u32 \t%pt_w0, %tid.x;\n\tshr.u32 \t%pt_w1, %pt_w0, 5;\n"
      << "\tand.b32 \t%pt_w2, %pt_w0, 31;\n"
      << "\tand.b32 \t%pt_w4, %pt_w1, " << (t_.unitWarps - 1) << ";\n"
      << "\tsetp.ne.u32 \t%pt_q2, %pt_w4, 0;\n\t@%pt_q2 bra \t" << skip << ";\n"
      << "\tshr.u32 \t%pt_w3, %pt_w1, " << log2(t_.unitWarps) << ";\n";
    if (!c_.selectedUnits.empty()) {
      selectedUnit(o);
      o << "\t@!%pt_q1 bra \t" << skip << ";\n";
    }
    unitAddress(o);
    o << "\tsetp.eq.and.u32 \t%pt_q3, %pt_w2, 0, %pt_q3;\n";  // its lane 0: the slot header
    for (const char *r : {"%pt_u", "%pt_x"})
      o << "\tshfl.sync.idx.b32 \t" << r << ", " << r << ", 0, 31, -1;\n";
    for (size_t i = 0; i < t_.paths.size(); ++i)
      o << "\tmov.b64 \t{%pt_w4, %pt_w5}, %pt_a" << i << ";\n"
        << "\tshfl.sync.idx.b32 \t%pt_w4, %pt_w4, 0, 31, -1;\n"
        << "\tshfl.sync.idx.b32 \t%pt_w5, %pt_w5, 0, 31, -1;\n"
        << "\tmov.b64 \t%pt_a" << i << ", {%pt_w4, %pt_w5};\n"
        << "\tshfl.sync.idx.b32 \t%pt_c" << i << ", %pt_c" << i << ", 0, 31, -1;\n";
    slotHeader(o);
    // Chunks: 0 {unmatched, crossing}, 1 {recorded = 1, 0}, then per scope i: 2 + 2i its
    // cycles, 3 + 2i {count, 0}.
    const uint32_t chunks = t_.unitBytes / 8;
    for (uint32_t first = 0; first < chunks; first += 32) {
      o << "\tadd.u32 \t%pt_w1, %pt_w2, " << first << ";\n"
        << "\tsetp.ge.u32 \t%pt_q2, %pt_w1, " << chunks << ";\n"
        << "\t@%pt_q2 bra \t" << skip << ";\n"
        << "\tmov.u32 \t%pt_w4, %pt_u;\n\tmov.u32 \t%pt_w5, %pt_x;\n";
      for (uint32_t c = std::max(first, 1u); c < std::min(chunks, first + 32); ++c) {
        o << "\tsetp.eq.u32 \t%pt_q1, %pt_w1, " << c << ";\n";
        size_t i = (c - 2) / 2;
        if (c == 1)
          o << "\tselp.b32 \t%pt_w4, 1, %pt_w4, %pt_q1;\n\tselp.b32 \t%pt_w5, 0, %pt_w5, %pt_q1;\n";
        else if (c % 2 == 0)
          o << "\tmov.b64 \t{%pt_w6, %pt_w7}, %pt_a" << i << ";\n"
            << "\tselp.b32 \t%pt_w4, %pt_w6, %pt_w4, %pt_q1;\n"
            << "\tselp.b32 \t%pt_w5, %pt_w7, %pt_w5, %pt_q1;\n";
        else
          o << "\tselp.b32 \t%pt_w4, %pt_c" << i << ", %pt_w4, %pt_q1;\n"
            << "\tselp.b32 \t%pt_w5, 0, %pt_w5, %pt_q1;\n";
      }
      o << "\tmul.wide.u32 \t%pt_d7, %pt_w1, 8;\n\tadd.u64 \t%pt_d7, %pt_d1, %pt_d7;\n"
        << "\tst.global.v2.u32 \t[%pt_d7], {%pt_w4, %pt_w5};\n";
    }
  }

  // %pt_d1: this unit's record (tree) or header (trace), from the CTA-linear index.
  void unitAddress(Out &o) const { recordAddress(o, false); }

  // ctaRecord: the CTA's one record (CTA sums), where %pt_q3 is CTA 0 alone (its last unit
  // writes the slot header).
  void recordAddress(Out &o, bool ctaRecord) const {
    o << "\tmov.u32 \t%pt_w4, %ctaid.z;\n\tmov.u32 \t%pt_w5, %nctaid.y;\n"
      << "\tmov.u32 \t%pt_w6, %ctaid.y;\n"
      << "\tmad.lo.u32 \t%pt_w4, %pt_w4, %pt_w5, %pt_w6;\n"
      << "\tmov.u32 \t%pt_w5, %nctaid.x;\n\tmov.u32 \t%pt_w6, %ctaid.x;\n"
      << "\tmad.lo.u32 \t%pt_w4, %pt_w4, %pt_w5, %pt_w6;\n"
      << "\tmul.wide.u32 \t%pt_d1, %pt_w4, " << t_.slotBytes << ";\n"
      << "\tadd.u64 \t%pt_d1, %pt_d0, %pt_d1;\n";
    if (!ctaRecord)
      o << "\tmul.wide.u32 \t%pt_d2, %pt_w3, " << t_.unitBytes << ";\n"
        << "\tadd.u64 \t%pt_d1, %pt_d1, %pt_d2;\n";
    if (c_.trace) return;
    o << "\tadd.u64 \t%pt_d1, %pt_d1, " << kTreeHeaderBytes << ";\n";
    // %pt_q3: the one unit of the grid that writes the slot header (the first recording unit
    // of the first CTA), so that no address is written by every warp.
    o << "\tsetp.eq.u32 \t%pt_q3, %pt_w4, 0;\n";
    if (ctaRecord) return;
    uint32_t first = 0;
    if (!c_.selectedUnits.empty())
      first = *std::min_element(c_.selectedUnits.begin(), c_.selectedUnits.end());
    o << "\tsetp.eq.and.u32 \t%pt_q3, %pt_w3, " << first << ", %pt_q3;\n";
  }

  void traceHeaderStart(Out &o) const {
    o << "\tadd.u64 \t%pt_d2, %pt_d1, " << kTraceUnitHeaderBytes << ";\n"
      << "\t@%pt_lead mov.u32 \t%pt_w6, %smid;\n"
      << "\t@%pt_lead st.global.u32 \t[%pt_d1+4], %pt_w6;\n"
      << "\t@%pt_lead st.global.u64 \t[%pt_d1+8], %pt_d6;\n"  // 8-byte aligned: no v2
      << "\t@%pt_lead st.global.u64 \t[%pt_d1+16], %pt_d7;\n";
  }

  // readClock false: %pt_w8 already holds the event's clock.
  void event(Out &o, uint32_t tag, bool readClock = true) const {
    if (readClock) o << "\tmov.u32 \t%pt_w8, %clock;\n";
    o << "\tand.b32 \t%pt_w9, %pt_n, " << (t_.capacity - 1) << ";\n"
      << "\tmul.wide.u32 \t%pt_d5, %pt_w9, 8;\n"
      << "\tadd.u64 \t%pt_d5, %pt_d2, %pt_d5;\n"
      << "\tmov.u32 \t%pt_w10, " << tag << ";\n"
      << "\t@%pt_lead st.global.v2.u32 \t[%pt_d5], {%pt_w10, %pt_w8};\n"
      << "\tadd.u32 \t%pt_n, %pt_n, 1;\n";
  }

  const RewriteConfig &c_;
  const ScopeTable &t_;
  std::string smem_;
  int barrier_;
  bool wholeWarps_;
};

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
  for (++i; i < lines.size(); ++i)
    if (lines[i] == "}" || trim(lines[i]) == "}") break;
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

bool useCtaSums(const RewriteConfig &c, const ScopeTable &t, uint32_t threads) {
  size_t units = recordingUnitIds(c, t.unitsPerCta).size();
  if (c.trace || !c.ctaSums || c.maxSharedBytes == 0 || units < 2) return false;
  uint64_t before = c.sharedBytes, after = ctaSumsOffset(c.sharedBytes) + ctaSlotsBytes(t);
  if (after > c.maxSharedBytes) return false;
  uint64_t perSm = uint64_t(c.maxSharedBytes) + 1024;
  uint64_t byThreads = std::max<uint64_t>(1, 2048 / threads);
  uint64_t fitBefore = std::min(byThreads, perSm / (before + 1024));
  uint64_t fitAfter = std::min(byThreads, perSm / (after + 1024));
  return fitAfter >= fitBefore;
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
std::string sharedSymbol(const std::vector<std::string_view> &lines, size_t entry) {
  for (size_t i = 0; i < entry; ++i) {
    std::string_view t = trim(lines[i]);
    if (!startsWith(t, ".extern .shared ") || t.back() != ';') continue;
    size_t open = t.rfind("[]");
    if (open == std::string_view::npos) continue;
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
    } else if (opt != "sched_stores")
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
  t.unitWarps = config.unitWarps == 0 ? t.numWarps : std::min(config.unitWarps, t.numWarps);
  t.unitsPerCta = (t.numWarps + t.unitWarps - 1) / t.unitWarps;
  t.paths.push_back("");
  std::map<std::string, size_t> ids{{"", 0}};
  std::vector<Marker> markers(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!parseMarker(lines[i], markers[i])) continue;
    if (i <= e.open || i >= e.end) {
      ++t.droppedMarkers;
      markers[i].kind = 'D';
      continue;
    }
    if (markers[i].kind == 'U') {
      ++t.staticUnmatched;
      continue;
    }
    if (markers[i].kind == 'C') ++t.staticCrossing;
    if (ids.count(markers[i].path)) continue;
    if (t.paths.size() >= kMaxScopes) {
      markers[i].kind = 'D';
      ++t.droppedMarkers;
      continue;
    }
    ids[markers[i].path] = t.paths.size();
    t.paths.push_back(markers[i].path);
  }
  int barrier = -1;
  const bool plainReturns = onlyPlainReturns(lines, e);
  if (config.trace) {
    t.capacity = config.capacity;
    t.unitBytes = kTraceUnitHeaderBytes + 8 * config.capacity;
    t.slotBytes = t.unitBytes * t.unitsPerCta;
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
  uint32_t h = fnv1a(config.text, fnv1a(e.name));
  for (const std::string &p : t.paths) h = fnv1a(p, fnv1a("\x1e", h));
  t.hash = h == 0 ? 1 : h;

  // CTA sums live in the kernel's dynamic shared memory: the symbol it declares, else ours.
  std::string smem = t.sharedBytes ? sharedSymbol(lines, e.begin) : std::string();
  bool declareSmem = t.sharedBytes && smem.empty();
  if (declareSmem) smem = "__proton_smem";
  size_t returns = 0;
  for (size_t i = e.open + 1; i < e.end; ++i) returns += trim(lines[i]) == "ret;";
  Emitter emit(config, t, smem, barrier, plainReturns && returns == 1);
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
  // Which markers take the clock reading of the marker just before them (Emitter::enter).
  std::vector<std::string> reading(lines.size());
  if (emit.sharesReadings()) {
    for (size_t i = 0; i < lines.size(); ++i) {
      char kind = markers[i].kind;
      if ((kind != 'E' && kind != 'X' && kind != 'C') || !ids.count(markers[i].path)) continue;
      size_t j = i + 1;
      while (j < e.end && markers[j].kind == 0 && isNotCode(lines[j])) ++j;
      char next = j < e.end ? markers[j].kind : 0;
      if ((next != 'E' && next != 'X' && next != 'C') || !ids.count(markers[j].path)) continue;
      // An exit that reused a reading passes it on (it did not read into its own register).
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
    if (m.kind == 'U' || id == ids.end())
      out += emit.unmatched();
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
  o << "v1\t" << hexEncode(t.kernel) << '\t' << t.hash << '\t' << (t.trace ? 1 : 0) << '\t'
    << t.numWarps << '\t' << t.unitWarps << '\t' << t.unitsPerCta << '\t' << t.capacity << '\t'
    << t.unitBytes << '\t' << t.slotBytes << '\t' << t.staticUnmatched << '\t' << t.staticCrossing
    << '\t' << t.droppedMarkers;
  for (const std::string &p : t.paths) o << '\t' << hexEncode(p);
  return o.str();
}

Result<ScopeTable> decodeTable(std::string_view text) {
  std::vector<std::string_view> f = split(text, '\t');
  ScopeTable t;
  uint32_t trace = 0;
  bool ok = f.size() >= 14 && f[0] == "v1" && hexDecode(f[1], t.kernel) && parseU32(f[2], t.hash) &&
            parseU32(f[3], trace) && parseU32(f[4], t.numWarps) && parseU32(f[5], t.unitWarps) &&
            parseU32(f[6], t.unitsPerCta) && parseU32(f[7], t.capacity) &&
            parseU32(f[8], t.unitBytes) && parseU32(f[9], t.slotBytes) &&
            parseU32(f[10], t.staticUnmatched) && parseU32(f[11], t.staticCrossing) &&
            parseU32(f[12], t.droppedMarkers);
  for (size_t i = 13; ok && i < f.size(); ++i) {
    std::string path;
    ok = hexDecode(f[i], path);
    t.paths.push_back(std::move(path));
  }
  if (!ok || t.paths.empty() || t.unitWarps == 0 || t.unitsPerCta == 0)
    return invalidArgument("[PROTON] malformed instrumentation table");
  t.trace = trace != 0;
  return t;
}

}  // namespace proton::instrumentation
