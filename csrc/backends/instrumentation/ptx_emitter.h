// The PTX text that the instrumentation rewrite (ptx_rewrite.cc) inserts into a kernel: the
// prologue that sets a recording unit up, the clock reads and sums of each scope marker, and
// the epilogue that stores a unit's (or a CTA's) record; the buffer layouts are drawn in
// ptx_rewrite.h. Internal to the rewrite: included by ptx_rewrite.cc only.
//
//   Emitter emit(config, table, smemSymbol, barrier, wholeWarps);
//   out += emit.declarations() + emit.prologue(param);   // after the entry's '{'
//   out += emit.enter(scopeId);  ...  out += emit.epilogue(retIndex);  // before each ret
//
// Pure text generation: thread-safe, no vendor headers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/instrumentation/ptx_rewrite.h"

namespace proton::instrumentation::detail {

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

  bool ctaSums() const { return !c_.trace && t_.sharedBytes != 0; }     // useCtaSums
  bool sharedTrace() const { return c_.trace && t_.sharedBytes != 0; }  // traceSharedBytes

  std::string declarations() const {
    Out o;
    size_t k = t_.paths.size();
    o << "\t.reg .pred \t%pt_q<4>;\n\t.reg .pred \t%pt_lead;\n"
      << "\t.reg .b32 \t%pt_w<12>;\n\t.reg .b64 \t%pt_d<9>;\n"
      << "\t.reg .b32 \t%pt_u, %pt_x, %pt_sh, %pt_n;\n";
    if (sharedTrace()) o << "\t.reg .b32 \t%pt_sb;\n\t.reg .b64 \t%pt_g0, %pt_k0;\n";
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
      // The unit's start, its timer pair, is read before the buffer's address arithmetic,
      // which would otherwise sit in front of a clock read that nothing passes. It is also the
      // kernel scope's enter (and the pair read at the return its exit): a trace has no
      // events of its own for the kernel scope, two fewer per unit to store.
      if (sharedTrace()) {
        // Events go to shared memory, after the unit header's place there; the global
        // buffer's address and the header wait for the return, the timer pair in registers.
        // Every lane reads the pair (only the leader's is stored): no select on the lane.
        o << "\tmov.u64 \t%pt_g0, %globaltimer;\n"
          << "\tmov.u64 \t%pt_k0, %clock64;\n"
          << "\tmov.u32 \t%pt_sb, " << smem_ << ";\n"
          << "\tadd.u32 \t%pt_sb, %pt_sb, " << t_.ctaSumsOffset << ";\n"
          << "\tmad.lo.u32 \t%pt_sb, %pt_w3, " << kTraceUnitHeaderBytes + 8 * t_.capacity
          << ", %pt_sb;\n"
          << "\tadd.u32 \t%pt_sb, %pt_sb, " << kTraceUnitHeaderBytes << ";\n";
      } else {
        o << "\t@%pt_lead mov.u64 \t%pt_d6, %globaltimer;\n"
          << "\t@%pt_lead mov.u64 \t%pt_d7, %clock64;\n";
        unitAddress(o);
        traceHeaderStart(o);
      }
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
    // The read is predicated like an enter's, and the register is left as it is in the other
    // lanes (nothing of theirs is stored): zeroing it first makes ptxas select between the two
    // (a SEL per scope end, 1% of a 3.4 us vector add on an H100).
    std::string now = reading.empty() ? clockOf('X', id) : reading;
    if (c_.clock32) {
      if (reading.empty()) o << "\t@%pt_lead mov.u32 \t%pt_w9, %clock;\n";
      o << "\tsub.u32 \t%pt_w6, " << now << ", %pt_s" << id << ";\n";
      if (c_.timeShift)
        o << "\tmin.u32 \t%pt_w7, %pt_w6, %pt_sh;\n"
          << "\tsub.u32 \t%pt_w6, %pt_w6, %pt_w7;\n";
      o << "\tcvt.u64.u32 \t%pt_d6, %pt_w6;\n";
    } else {
      if (reading.empty()) o << "\t@%pt_lead mov.u64 \t%pt_d8, %clock64;\n";
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

  // Trace: two markers with no instruction between them, one event (kPairedEventTag).
  std::string pairedEvent(uint32_t firstTag, uint32_t secondTag) const {
    Out o;
    event(o, kPairedEventTag | firstTag << 8 | secondTag);
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
    if (!c_.trace) o << exit(0, false);  // a trace's kernel scope ends with the header's pair
    std::string skip = "$pt_skip" + std::to_string(retIndex);
    if (sharedTrace()) {
      sharedTraceEpilogue(o, skip, retIndex);
    } else if (c_.trace) {
      o << "\t@!%pt_lead bra \t" << skip << ";\n"
        << "\t@%pt_q3 mov.u64 \t%pt_d6, %globaltimer;\n"
        << "\tmov.u64 \t%pt_d7, %clock64;\n"
        << "\t@%pt_q3 st.global.u64 \t[%pt_d1+16], %pt_d6;\n";
      returnWord(o);
      o << "\tst.global.v2.u32 \t[%pt_d1+32], {%pt_w6, %pt_w7};\n";
    } else {
      // Enters and exits that did not pair up: |enters - exits| per scope, and the unit's
      // sums of that scope are dropped (an exit with no enter before it adds a clock reading
      // less an enter that never happened): the scope is not in the profile for this unit.
      for (size_t i = 0; i < t_.paths.size(); ++i)
        o << "\tsub.s32 \t%pt_w6, %pt_e" << i << ", %pt_c" << i << ";\n"
          << "\tsetp.ne.s32 \t%pt_q2, %pt_w6, 0;\n"
          << "\t@%pt_q2 mov.u64 \t%pt_a" << i << ", 0;\n"
          << "\t@%pt_q2 mov.u32 \t%pt_c" << i << ", 0;\n"
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

  // The launch slot's header [hash | unitBytes | launches], stored where %pt_q3 (one thread of
  // the grid): launches counts the launches that added into the slot (1, or a CUDA graph's
  // replays since the slot was last read).
  void slotHeader(Out &o) const {
    o << "\tmov.u32 \t%pt_w6, " << t_.hash << ";\n"
      << "\tmov.u32 \t%pt_w7, " << t_.unitBytes << ";\n"
      << "\t@%pt_q3 st.global.v2.u32 \t[%pt_d0], {%pt_w6, %pt_w7};\n"
      << "\tmov.u32 \t%pt_w6, 1;\n"
      << "\t@%pt_q3 red.global.add.u32 \t[%pt_d0+8], %pt_w6;\n";
  }

  // Records are added into their place, not stored: the place starts zeroed (the ring is
  // cleared after each drain), and a launch replayed from a CUDA graph adds every replay into
  // the same slot. Adds to distinct addresses cost what stores do.
  static void addChunk(Out &o, std::string_view address) {
    o << "\tmov.b64 \t%pt_d6, {%pt_w4, %pt_w5};\n"
      << "\tred.global.add.u64 \t[" << address << "], %pt_d6;\n";
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
        << "\tmul.wide.u32 \t%pt_d7, %pt_w1, 8;\n\tadd.u64 \t%pt_d7, %pt_d1, %pt_d7;\n";
      addChunk(o, "%pt_d7");
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
    o << "\tmov.b64 \t%pt_d6, {%pt_u, %pt_x};\n\tred.global.add.u64 \t[%pt_d1], %pt_d6;\n"
      << "\tmov.u32 \t%pt_w6, 1;\n\tred.global.add.u32 \t[%pt_d1+8], %pt_w6;\n";
    // Per scope: its cycles, then {count, 1 where the unit ran it}.
    for (size_t i = 0; i < t_.paths.size(); ++i) {
      const uint32_t at = kTreeUnitHeaderBytes + kTreeScopeBytes * i;
      o << "\tsetp.ne.u32 \t%pt_q2, %pt_c" << i << ", 0;\n"
        << "\tselp.u32 \t%pt_w5, 1, 0, %pt_q2;\n"
        << "\tmov.u32 \t%pt_w4, %pt_c" << i << ";\n"
        << "\t@%pt_q2 red.global.add.u64 \t[%pt_d1+" << at << "], %pt_a" << i << ";\n";
      addChunk(o, "%pt_d1+" + std::to_string(at + 8));
    }
  }

  // Every warp that does not record branches to `skip`, on conditions the same for all of its
  // lanes (recording off, not its unit's first warp, a unit not selected), so the ones left
  // run whole: %pt_w2 = lane, %pt_w3 = unit.
  void recordingWarpsOnly(Out &o, const std::string &skip) const {
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
  }

  // A record per unit (buffer_type="global", or where CTA sums are not possible), every warp
  // leaving through the one plain return: the unit's first warp passes its leader's sums to
  // all of its lanes, and lane j stores 8-byte chunk j, so the record leaves in one coalesced
  // store (four 16-byte stores by the leader alone cost softmax 12% on an H100, at the end of
  // the kernel where they delay it). Warps that store nothing branch away on conditions that
  // are the same for all of their lanes, so the shuffles see the whole warp.
  void unitEpilogue(Out &o, const std::string &skip) const {
    recordingWarpsOnly(o, skip);
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
        else  // {count, 1 where the unit ran the scope}
          o << "\tselp.b32 \t%pt_w4, %pt_c" << i << ", %pt_w4, %pt_q1;\n"
            << "\tsetp.ne.u32 \t%pt_q2, %pt_c" << i << ", 0;\n"
            << "\tselp.u32 \t%pt_w6, 1, 0, %pt_q2;\n"
            << "\tselp.b32 \t%pt_w5, %pt_w6, %pt_w5, %pt_q1;\n";
      }
      o << "\tmul.wide.u32 \t%pt_d7, %pt_w1, 8;\n\tadd.u64 \t%pt_d7, %pt_d1, %pt_d7;\n";
      addChunk(o, "%pt_d7");
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

  // Trace in shared memory: each recording warp's leader writes the unit header into shared
  // memory just before the unit's events (its own 16 bytes; the CTA's 32 in front of them
  // only in the CTA's first recording unit), and then all of the warp's lanes (every warp
  // leaves through the one plain return) copy header and kept events, min(events, capacity)
  // of them, to the same places of its global buffer in one piece, lane j taking 8-byte word
  // first + j, first + j + 32, ... (first: 0 or 4, a 32-byte sector's start): most units fit
  // in one coalesced store (a header stored
  // apart, in three 16-byte stores of one lane, cost a 3.4 us vector add 5% more on an H100,
  // and an 8.5 us softmax 3%; the bytes a unit copies drive the rest of a trace's cost). The
  // rare unit of more than 26 events goes on in a loop.
  void sharedTraceEpilogue(Out &o, const std::string &skip, size_t retIndex) const {
    std::string copy = "$pt_copy" + std::to_string(retIndex);
    constexpr uint32_t kHeaderWords = kTraceUnitHeaderBytes / 8;
    constexpr uint32_t kCtaWords = kTraceCtaHeaderBytes / 8;
    recordingWarpsOnly(o, skip);
    o << "\tmov.u64 \t%pt_d6, %globaltimer;\n\tmov.u64 \t%pt_d7, %clock64;\n";
    unitAddress(o);
    // %pt_q1: the CTA's first recording unit, the same for all of its lanes; %pt_q3: its
    // leader, which stores the CTA's part of the header.
    o << "\tsetp.eq.u32 \t%pt_q1, %pt_w3, " << ctaWriterUnit() << ";\n"
      << "\tand.pred \t%pt_q3, %pt_q1, %pt_lead;\n"
      << "\tmov.u32 \t%pt_w6, %smid;\n\tmov.b64 \t{%pt_w0, %pt_w1}, %pt_g0;\n"
      << "\t@%pt_q3 st.shared.v4.u32 \t[%pt_sb+-48], {%pt_w6, %pt_sh, %pt_w0, %pt_w1};\n"
      << "\tmov.b64 \t{%pt_w0, %pt_w1}, %pt_d6;\n"
      << "\tmov.u32 \t%pt_w6, " << t_.hash << ";\n\tmov.u32 \t%pt_w7, 0;\n"
      << "\t@%pt_q3 st.shared.v4.u32 \t[%pt_sb+-32], {%pt_w0, %pt_w1, %pt_w6, %pt_w7};\n";
    returnWord(o);
    o << "\tmov.b64 \t{%pt_w0, %pt_w1}, %pt_k0;\n"
      << "\t@%pt_lead st.shared.v4.u32 \t[%pt_sb+-16], {%pt_w6, %pt_w7, %pt_w0, %pt_w1};\n";
    // The leader's count (every lane counts the same markers where the warp runs together).
    // The CTA's first unit copies from word 0, the others from their own part of the header.
    o << "\tshfl.sync.idx.b32 \t%pt_w5, %pt_n, 0, 31, -1;\n"
      << "\tmin.u32 \t%pt_w5, %pt_w5, " << t_.capacity << ";\n"
      << "\tadd.u32 \t%pt_w5, %pt_w5, " << kHeaderWords << ";\n"
      << "\tbar.warp.sync \t-1;\n"  // the leader's shared-memory stores, seen by its lanes
      << "\tsub.u32 \t%pt_sb, %pt_sb, " << kTraceUnitHeaderBytes << ";\n"
      << "\tselp.u32 \t%pt_w4, 0, " << kCtaWords << ", %pt_q1;\n"
      << "\tadd.u32 \t%pt_w11, %pt_w4, 32;\n"
      << "\tadd.u32 \t%pt_w4, %pt_w4, %pt_w2;\n";
    copyWord(o, "%pt_q2");
    o << "\tsetp.le.u32 \t%pt_q2, %pt_w5, %pt_w11;\n\t@%pt_q2 bra.uni \t" << skip << ";\n"
      << "\tadd.u32 \t%pt_w4, %pt_w4, 32;\n"
      << copy << ":\n"
      << "\tsetp.ge.u32 \t%pt_q2, %pt_w4, %pt_w5;\n\t@%pt_q2 bra \t" << skip << ";\n";
    copyWord(o, "");
    o << "\tadd.u32 \t%pt_w4, %pt_w4, 32;\n\tbra \t" << copy << ";\n";
  }

  // Word %pt_w4 of the unit (header, then events) from shared memory to its global buffer,
  // where `pred` names a predicate register set to %pt_w4 < %pt_w5 (or always, if empty).
  void copyWord(Out &o, const std::string &pred) const {
    std::string p;
    if (!pred.empty()) {
      o << "\tsetp.lt.u32 \t" << pred << ", %pt_w4, %pt_w5;\n";
      p = "@" + pred + " ";
    }
    o << "\tshl.b32 \t%pt_w6, %pt_w4, 3;\n\tadd.u32 \t%pt_w7, %pt_w6, %pt_sb;\n"
      << "\t" << p << "ld.shared.v2.u32 \t{%pt_w9, %pt_w10}, [%pt_w7];\n"
      << "\tcvt.u64.u32 \t%pt_d6, %pt_w6;\n\tadd.u64 \t%pt_d6, %pt_d1, %pt_d6;\n"
      << "\t" << p << "st.global.v2.u32 \t[%pt_d6], {%pt_w9, %pt_w10};\n";
  }

  // The unit that stores its CTA's part of the header: the CTA's first recording unit.
  uint32_t ctaWriterUnit() const {
    std::vector<uint32_t> ids = recordingUnitIds(c_, t_.unitsPerCta);
    return ids.empty() ? 0 : ids.front();
  }

  // %pt_q3: this thread stores its CTA's part of the unit header (the leader of the CTA's
  // first recording unit; %pt_w3 holds the unit).
  void ctaWriter(Out &o) const {
    o << "\tsetp.eq.u32 \t%pt_q3, %pt_w3, " << ctaWriterUnit() << ";\n"
      << "\tand.pred \t%pt_q3, %pt_q3, %pt_lead;\n";
  }

  // Global trace: the start of the header, stored as the unit starts; its rest at the return.
  void traceHeaderStart(Out &o) const {
    ctaWriter(o);
    o << "\tadd.u64 \t%pt_d2, %pt_d1, " << kTraceUnitHeaderBytes << ";\n"
      << "\t@%pt_q3 mov.u32 \t%pt_w6, %smid;\n"
      << "\t@%pt_q3 st.global.v2.u32 \t[%pt_d1], {%pt_w6, %pt_sh};\n"
      << "\t@%pt_q3 st.global.u64 \t[%pt_d1+8], %pt_d6;\n"
      << "\tmov.u32 \t%pt_w6, " << t_.hash << ";\n"
      << "\t@%pt_q3 st.global.u32 \t[%pt_d1+24], %pt_w6;\n"
      << "\t@%pt_lead st.global.u64 \t[%pt_d1+40], %pt_d7;\n";
  }

  // The first word of a unit's own part of the header, stored as it returns: {%pt_w6, %pt_w7}
  // = {events | returned, the clock at the return (in %pt_d7), low 32 bits}.
  void returnWord(Out &o) const {
    o << "\tor.b32 \t%pt_w6, %pt_n, " << kTraceUnitReturned << ";\n"
      << "\tcvt.u32.u64 \t%pt_w7, %pt_d7;\n";
  }

  // readClock false: %pt_w8 already holds the event's clock.
  void event(Out &o, uint32_t tag, bool readClock = true) const {
    if (readClock) o << "\tmov.u32 \t%pt_w8, %clock;\n";
    o << "\tand.b32 \t%pt_w9, %pt_n, " << (t_.capacity - 1) << ";\n";
    if (sharedTrace()) {
      o << "\tshl.b32 \t%pt_w9, %pt_w9, 3;\n\tadd.u32 \t%pt_w9, %pt_w9, %pt_sb;\n"
        << "\tmov.u32 \t%pt_w10, " << tag << ";\n"
        << "\t@%pt_lead st.shared.v2.u32 \t[%pt_w9], {%pt_w10, %pt_w8};\n";
    } else {
      o << "\tmul.wide.u32 \t%pt_d5, %pt_w9, 8;\n"
        << "\tadd.u64 \t%pt_d5, %pt_d2, %pt_d5;\n"
        << "\tmov.u32 \t%pt_w10, " << tag << ";\n"
        << "\t@%pt_lead st.global.v2.u32 \t[%pt_d5], {%pt_w10, %pt_w8};\n";
    }
    o << "\tadd.u32 \t%pt_n, %pt_n, 1;\n";
  }

  const RewriteConfig &c_;
  const ScopeTable &t_;
  std::string smem_;
  int barrier_;
  bool wholeWarps_;
};

}  // namespace proton::instrumentation::detail
