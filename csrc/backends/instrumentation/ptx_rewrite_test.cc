#include "backends/instrumentation/ptx_rewrite.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace proton::instrumentation {
namespace {

// PTX as Triton 3.6 emitted it for sm_90: a vector add without markers, and a matmul whose
// K loop has pl.scope("load") and pl.enter_scope/exit_scope("mma") (software-pipelined).
std::string golden(const std::string &name) {
  std::ifstream f(std::string(PROTON_GOLDEN_DIR) + "/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// shared/maxShared: the kernel's dynamic shared memory and the GPU's limit per CTA (CTA sums).
RewriteResult rewrite(const std::string &ptx, const std::string &mode, uint32_t shared = 0,
                      uint32_t maxShared = 0) {
  Result<RewriteConfig> config = parseInstrumentationMode(mode);
  EXPECT_TRUE(config.isOk()) << config.status().message();
  config.value().sharedBytes = shared;
  config.value().maxSharedBytes = maxShared;
  Result<RewriteResult> r = rewritePtx(ptx, config.value());
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.value();
}

TEST(PtxRewrite, TreeModeKeepsSumsInRegistersAndStoresThemOncePerUnit) {
  RewriteResult r = rewrite(golden("instrumentation_matmul_markers.ptx"), "proton:tree:1:256:*:");
  const ScopeTable &t = r.table;
  EXPECT_EQ(t.kernel, "mm");
  ASSERT_EQ(t.paths, (std::vector<std::string>{"", "load", "mma"}));
  EXPECT_EQ(t.numWarps, 8u);
  EXPECT_EQ(t.unitsPerCta, 8u);
  EXPECT_EQ(t.unitBytes, kTreeUnitHeaderBytes + 3 * kTreeScopeBytes);
  EXPECT_EQ(t.slotBytes, 8 * t.unitBytes);  // per CTA
  // No atomics that return a value. The one plain return: the leader's sums go to every lane
  // of its warp (two header words, then per scope two cycle words and the count), and lane j
  // adds 8-byte chunk j of the record (16 + 16 * 3 bytes: 8 chunks) into its place, one
  // coalesced reduction (a CUDA graph's replays add into the same slot); one more counts the
  // launch in the slot header.
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%pt_d7], %pt_d6;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 red.global.add.u32 \t[%pt_d0+8], %pt_w6;"), 1u);
  EXPECT_EQ(count(r.ptx, "red.global"), 2u);
  EXPECT_EQ(count(r.ptx, "atom."), 0u);
  const size_t own = count(golden("instrumentation_matmul_markers.ptx"), "shfl.sync");
  EXPECT_EQ(count(r.ptx, "shfl.sync.idx.b32 \t%pt_"), 2u + 3u * 3u);
  EXPECT_EQ(count(r.ptx, "shfl.sync"), own + 2u + 3u * 3u);
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%pt_q2, %pt_w1, 8;"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.eq.u32 \t%pt_q1, %pt_w1, "), 7u);  // chunk 0 is the default
  // A scope's count chunk says whether the unit ran it: {count, 1 or 0}.
  EXPECT_EQ(count(r.ptx, "selp.u32 \t%pt_w6, 1, 0, %pt_q2;"), 3u);
  EXPECT_EQ(count(r.ptx, "st.global.v2.u32 \t[%pt_d7]"), 0u);
  EXPECT_EQ(count(r.ptx, "st.global.v2.u64"), 0u);
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  // The slot header: one lane of one unit of the grid writes it (a store by every warp to one
  // address serialises them all).
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.v2.u32 \t[%pt_d0]"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.eq.and.u32 \t%pt_q3, %pt_w2, 0, %pt_q3;"), 1u);
  // A warp leaves or stays as a whole: no branch on the lane before the shuffles.
  EXPECT_EQ(count(r.ptx, "@!%pt_lead bra"), 0u);
  // With a predicated return a warp may arrive with some of its lanes: the leader stores the
  // record alone (the unit header and one 16-byte record per scope), no shuffles.
  std::string early = golden("instrumentation_matmul_markers.ptx");
  early.insert(early.find("\tret;"), "\t@%p1 ret;\n");
  RewriteResult leader = rewrite(early, "proton:tree:1:256:*:");
  EXPECT_EQ(count(leader.ptx, "shfl.sync"), own);
  EXPECT_EQ(count(leader.ptx, "st.global.v2.u64"), 0u);
  EXPECT_EQ(count(leader.ptx, "red.global.add.u64 \t[%pt_d1], %pt_d6;"), 1u);    // unmatched
  EXPECT_EQ(count(leader.ptx, "red.global.add.u32 \t[%pt_d1+8], %pt_w6;"), 1u);  // recorded
  for (int i = 0; i < 3; ++i) {
    const std::string at = std::to_string(16 + 16 * i);
    EXPECT_EQ(count(leader.ptx, "@%pt_q2 red.global.add.u64 \t[%pt_d1+" + at + "], %pt_a"), 1u);
    EXPECT_EQ(count(leader.ptx,
                    "red.global.add.u64 \t[%pt_d1+" + std::to_string(24 + 16 * i) + "], %pt_d6;"),
              1u);
  }
  EXPECT_EQ(count(leader.ptx, "@!%pt_lead bra \t$pt_skip0;"), 1u);
  EXPECT_EQ(count(r.ptx, "ld.param.u64 \t%pt_d0, [mm_param_5]"), 1u);
  // Each marker keeps its line and gets one clock read, but for the enter of "mma", which
  // directly follows the exit of "load" and takes its reading; the kernel scope adds two.
  EXPECT_EQ(count(r.ptx, "// @proton:"), 4u);
  EXPECT_EQ(count(r.ptx, "@%pt_lead mov.u32 \t%pt_s"), 2u);  // lane-predicated: not S2UR
  EXPECT_EQ(count(r.ptx, "%clock;"), 5u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_s2, %pt_w9;"), 1u);
  // Every read is the recording lane's alone, and an exit's register is not zeroed for the
  // other lanes first (ptxas would select between the two at every scope end).
  EXPECT_EQ(count(r.ptx, "@%pt_lead mov.u32 \t%pt_w9, %clock;"), 3u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w9, 0;"), 0u);
  // An enter is the clock and a count; an exit without time_shift has no min/sub pair.
  EXPECT_EQ(count(r.ptx, "add.u32 \t%pt_e"), 3u);
  EXPECT_EQ(count(r.ptx, "min.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "abs.s32"), 3u);  // |enters - exits| per scope, once
  EXPECT_EQ(count(r.ptx, "$pt_skip0:"), 1u);
  EXPECT_EQ(t.staticUnmatched + t.staticCrossing + t.droppedMarkers, 0u);
  // The record's address (%ctaid/%nctaid reads) is computed after the kernel's work, in the
  // epilogue, not in the prologue before it.
  size_t epilogue = r.ptx.find("// proton: instrumentation epilogue");
  ASSERT_NE(epilogue, std::string::npos);
  EXPECT_EQ(count(r.ptx.substr(0, epilogue), "%ctaid"),
            count(golden("instrumentation_matmul_markers.ptx"), "%ctaid"));
  EXPECT_EQ(count(r.ptx.substr(epilogue), "%ctaid.z"), 1u);
}

constexpr uint32_t kH100MaxShared = 232448;  // 227 KB per CTA

// A scope whose enters and exits did not pair up in a unit (an enter under an `if`, its exit
// after it) leaves that unit's sums of the scope out of its record, in every tree layout:
// an exit with no enter before it added a clock reading less an enter that never happened
// (on the GPU, 45 billion cycles for 64 warps). Only |enters - exits| is counted.
TEST(PtxRewrite, ScopesThatDidNotPairUpInAUnitAreLeftOutOfItsSums) {
  for (const char *mode : {"proton:tree:1:256:*:", "proton:tree:1:256:*:cta_sums"}) {
    RewriteResult r =
        rewrite(golden("instrumentation_matmul_markers.ptx"), mode, 0, kH100MaxShared);
    std::string epilogue = r.ptx.substr(r.ptx.find("// proton: instrumentation epilogue"));
    for (int i = 0; i < 3; ++i) {
      std::string id = std::to_string(i);
      std::string check = "\tsub.s32 \t%pt_w6, %pt_e" + id + ", %pt_c" + id +
                          ";\n\tsetp.ne.s32 \t%pt_q2, %pt_w6, 0;\n\t@%pt_q2 mov.u64 \t%pt_a" + id +
                          ", 0;\n\t@%pt_q2 mov.u32 \t%pt_c" + id + ", 0;\n";
      size_t dropped = epilogue.find(check);
      ASSERT_NE(dropped, std::string::npos) << mode << " scope " << i;
      // ... after the scope's last sum (the kernel scope's exit is in the epilogue), before
      // the unit's sums of the scope leave for its record.
      size_t lastSum = epilogue.rfind("add.u64 \t%pt_a" + id + ", %pt_a" + id);
      EXPECT_TRUE(lastSum == std::string::npos || lastSum < dropped) << mode << " scope " << i;
      EXPECT_NE(epilogue.find("%pt_a" + id, dropped + check.size()), std::string::npos)
          << mode << " scope " << i;
    }
  }
}

TEST(PtxRewrite, CtaSumsGoThroughSharedMemorySlotsAndLeaveInOneCoalescedStore) {
  // The matmul (8 warps, 3 scopes) with 64 KB of Triton's own shared memory.
  RewriteResult r = rewrite(golden("instrumentation_matmul_markers.ptx"),
                            "proton:tree:1:256:*:cta_sums", 65530, kH100MaxShared);
  const ScopeTable &t = r.table;
  EXPECT_EQ(t.unitBytes, kTreeUnitHeaderBytes + 3 * kTreeScopeBytes);
  EXPECT_EQ(t.slotBytes, t.unitBytes);         // one record per CTA
  EXPECT_EQ(t.ctaSumsOffset, 65536u);          // past Triton's bytes, 16-byte aligned
  EXPECT_EQ(t.sharedBytes, 65536u + 8 * 64u);  // a slot per warp: what the launch must give
  // Addressed from Triton's own array. Nothing is cleared and nothing waits at the entry: the
  // kernel's own barriers are all there is before its end.
  EXPECT_EQ(count(r.ptx, ".extern .shared"), 1u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w10, global_smem;"), 1u);
  EXPECT_EQ(count(r.ptx, "add.u32 \t%pt_w10, %pt_w10, 65536;"), 1u);
  // The record's addresses (%ctaid reads, the shared slots) are worked out in the epilogue
  // before the kernel scope's last clock read, where they overlap the kernel's last work, not
  // after it, where they would lengthen the CTA's end; none in the prologue.
  size_t epilogue = r.ptx.find("// proton: instrumentation epilogue");
  ASSERT_NE(epilogue, std::string::npos);
  EXPECT_EQ(count(r.ptx.substr(0, epilogue), "%ctaid"),
            count(golden("instrumentation_matmul_markers.ptx"), "%ctaid"));
  size_t ctaid = r.ptx.find("%ctaid.z", epilogue);
  size_t slots = r.ptx.find("mov.u32 \t%pt_w10, global_smem;", epilogue);
  size_t lastClock = r.ptx.find("%clock;", epilogue);
  EXPECT_LT(ctaid, lastClock);
  EXPECT_LT(slots, lastClock);
  EXPECT_LT(lastClock, r.ptx.find("st.shared.v4.u32", epilogue));
  EXPECT_LT(r.ptx.find("st.shared.v4.u32", epilogue), r.ptx.find("bar.sync", epilogue));
  EXPECT_EQ(count(r.ptx, "st.shared.v4.u32 \t[%pt_w11"), 4u);  // header and 3 scopes, once
  // The kernel uses barrier 0 for the whole CTA only: the CTA meets there once more (a kernel
  // that uses more barriers can fit fewer CTAs on an SM), and no atomics are used.
  EXPECT_EQ(count(r.ptx, "bar.sync \t0;"),
            count(golden("instrumentation_matmul_markers.ptx"), "bar.sync \t0;") + 1);
  EXPECT_EQ(count(r.ptx, "atom."), 0u);
  EXPECT_EQ(count(r.ptx, "red.global"), 2u);  // the CTA's record, and the header's launch count
  // 8 chunks of 8 bytes, one per thread of the first 8: each adds its chunk of the 8 slots.
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%pt_q2, %pt_w0, 8;"), 1u);
  EXPECT_EQ(count(r.ptx, "ld.shared.v2.u32"), 8u);
  for (uint32_t u = 0; u < 8; ++u)
    EXPECT_EQ(count(r.ptx, "[%pt_w2+" + std::to_string(u * 64) + "];"), 1u) << u;
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%pt_d7], %pt_d6;"), 1u);
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.v2.u32 \t[%pt_d0]"), 1u);
  EXPECT_EQ(count(r.ptx, "mul.wide.u32 \t%pt_d1, %pt_w4, 64;"), 1u);

  // A kernel that declares no shared memory gets an array of its own.
  RewriteResult v = rewrite(golden("instrumentation_vadd.ptx"), "proton:tree:1:256:*:cta_sums", 0,
                            kH100MaxShared);
  EXPECT_EQ(v.table.sharedBytes, 4 * 32u);
  EXPECT_EQ(count(v.ptx, ".extern .shared .align 16 .b8 __proton_smem[];"), 1u);
  EXPECT_LT(v.ptx.find("__proton_smem[]"), v.ptx.find(".entry"));
  EXPECT_EQ(count(v.ptx, "ld.shared.v2.u32"), 4u);  // 4 warps
  // Selected units: only the slots of the two that exist are added up.
  RewriteResult sel = rewrite(golden("instrumentation_vadd.ptx"),
                              "proton:tree:1:256:1,3,9:cta_sums", 0, kH100MaxShared);
  EXPECT_EQ(count(sel.ptx, "ld.shared.v2.u32"), 2u);
  EXPECT_EQ(count(sel.ptx, "[%pt_w2+32];"), 1u);
  EXPECT_EQ(count(sel.ptx, "[%pt_w2+96];"), 1u);
}

TEST(PtxRewrite, CtaSumsWithMoreChunksThanThreadsTakeSeveralRounds) {
  // 4 warps (128 threads) and 70 scopes' worth of markers: past kMaxScopes the rest are
  // dropped, so 64 scopes, 16 + 16 * 64 bytes: 130 chunks, two rounds of 128 threads.
  std::string ptx = golden("instrumentation_vadd.ptx");
  std::string markers;
  for (int i = 0; i < 70; ++i) {
    std::string hex;
    for (char c : "s" + std::to_string(i)) {
      static const char *d = "0123456789abcdef";
      hex += d[static_cast<unsigned char>(c) >> 4];
      hex += d[c & 15];
    }
    markers += "\tmov.u32 %r1, 0; // @proton:E:" + hex + "\n";
    markers += "\tmov.u32 %r1, 0; // @proton:X:" + hex + "\n";
  }
  size_t at = ptx.find("\tret;");
  ASSERT_NE(at, std::string::npos);
  ptx.insert(at, markers);
  RewriteResult r = rewrite(ptx, "proton:tree:1:256:*:cta_sums", 0, kH100MaxShared);
  ASSERT_EQ(r.table.paths.size(), kMaxScopes);
  // The scopes past the limit are named for the report, each once: s63 ... s69.
  EXPECT_EQ(r.table.droppedMarkers, 14u);
  EXPECT_EQ(r.table.droppedScopes,
            (std::vector<std::string>{"s63", "s64", "s65", "s66", "s67", "s68", "s69"}));
  EXPECT_EQ(r.table.unitBytes, 16u + 16u * kMaxScopes);
  EXPECT_EQ(count(r.ptx, "add.u32 \t%pt_w1, %pt_w0, 0;"), 1u);
  EXPECT_EQ(count(r.ptx, "add.u32 \t%pt_w1, %pt_w0, 128;"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%pt_q2, %pt_w0, 130;"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%pt_q2, %pt_w1, 130;"), 1u);
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%pt_d7], %pt_d6;"), 2u);
}

TEST(PtxRewrite, CtaSumsStepAsideWhereSharedMemoryOrUnitsDoNotAllowThem) {
  const std::string mm = golden("instrumentation_matmul_markers.ptx");
  auto perUnit = [](const RewriteResult &r) {
    return r.table.sharedBytes == 0 && r.table.slotBytes == r.table.unitBytes * 8 &&
           r.ptx.find("$pt_arrive") == std::string::npos;
  };
  // Not asked for (buffer_type="global"), or the GPU's limit unknown.
  EXPECT_TRUE(perUnit(rewrite(mm, "proton:tree:1:256:*:", 0, kH100MaxShared)));
  EXPECT_TRUE(perUnit(rewrite(mm, "proton:tree:1:256:*:cta_sums", 0, 0)));
  // Past what a CTA may have.
  EXPECT_TRUE(
      perUnit(rewrite(mm, "proton:tree:1:256:*:cta_sums", kH100MaxShared - 32, kH100MaxShared)));
  // Two CTAs of 112.5 KB fit on an SM; 512 bytes of slots more, only one would: occupancy is
  // kept.
  EXPECT_TRUE(perUnit(rewrite(mm, "proton:tree:1:256:*:cta_sums", 115300, kH100MaxShared)));
  EXPECT_FALSE(perUnit(rewrite(mm, "proton:tree:1:256:*:cta_sums", 115200, kH100MaxShared)));
  // A predicated return (or an exit) would leave its warp out of the CTA's sums.
  std::string early = mm;
  size_t body = early.find("\tret;");
  ASSERT_NE(body, std::string::npos);
  early.insert(body, "\t@%p1 ret;\n");
  EXPECT_TRUE(perUnit(rewrite(early, "proton:tree:1:256:*:cta_sums", 0, kH100MaxShared)));
  // Where the kernel uses barrier 0 for part of the CTA, the CTA meets at the lowest barrier
  // it never uses; with a barrier id in a register (any could be taken), every unit stores its
  // own record.
  std::string named = mm;
  named.insert(body,
               "\tbar.sync \t0, 128;\n\t@%p1 barrier.sync.aligned \t1;\n\tbar.arrive 2, 64;\n");
  RewriteResult three = rewrite(named, "proton:tree:1:256:*:cta_sums", 0, kH100MaxShared);
  EXPECT_FALSE(perUnit(three));
  EXPECT_EQ(count(three.ptx, "bar.sync \t3;"), 1u);
  std::string byRegister = mm;
  byRegister.insert(body, "\tbar.sync \t%r1;\n");
  EXPECT_TRUE(perUnit(rewrite(byRegister, "proton:tree:1:256:*:cta_sums", 0, kH100MaxShared)));
  // With only .maxntid a launch may have fewer warps than slots: their slots would be unset.
  std::string maxntid = mm;
  maxntid.replace(maxntid.find(".reqntid"), 8, ".maxntid");
  EXPECT_TRUE(perUnit(rewrite(maxntid, "proton:tree:1:256:*:cta_sums", 0, kH100MaxShared)));
  // One recording unit per CTA already stores once.
  RewriteResult group = rewrite(mm, "proton:tree:8:256:*:cta_sums", 0, kH100MaxShared);
  EXPECT_EQ(group.table.sharedBytes, 0u);
}

TEST(PtxRewrite, TraceEventsGoToSharedMemoryAndLeaveInCoalescedCopies) {
  const std::string mm = golden("instrumentation_matmul_markers.ptx");
  RewriteResult r = rewrite(mm, "proton:trace:1:256:*:cta_sums", 1000, kH100MaxShared);
  const ScopeTable &t = r.table;
  // 8 units (a header's place, then 256 events) past the kernel's 1000 bytes (16-byte
  // aligned); the global buffer keeps its layout.
  EXPECT_EQ(t.ctaSumsOffset, 1008u);
  EXPECT_EQ(t.sharedBytes, 1008u + 8 * (kTraceUnitHeaderBytes + 256 * 8));
  EXPECT_EQ(t.slotBytes, 8 * (kTraceUnitHeaderBytes + 8 * 256));
  // Four markers, three events (the exit of "load" and the enter of "mma" have no instruction
  // between them: one event, tagged kPairedEventTag | 3 << 8 | 4), each one shared-memory
  // store by the unit's leader, none to global memory. The kernel scope has no events: the
  // header's timer pairs are its enter and exit.
  EXPECT_EQ(count(r.ptx, "@%pt_lead st.shared.v2.u32 \t[%pt_w9], {%pt_w10, %pt_w8};"), 3u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w10, " + std::to_string(kPairedEventTag | 3 << 8 | 4)), 1u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w10, 2;"), 1u);  // load's enter
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w10, 5;"), 1u);  // mma's exit
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%pt_w8, %clock;"), 3u);
  EXPECT_EQ(t.pairedEvents, 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_lead st.global.v2.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "mad.lo.u32 \t%pt_sb, %pt_w3, 2096, %pt_sb;"), 1u);
  // At the one return, the leader writes its part of the unit header (its count with the
  // returned bit, and its clock pair) into shared memory before the events, in one 16-byte
  // store, and the leader of the CTA's first recording unit (%pt_q3) the CTA's part in front
  // of it (SM, shift, globaltimer pair, hash) in two; then the warp copies header and
  // min(events, 256) events in one piece, lane j taking 8-byte words first + j, first + j +
  // 32, ..., first 0 in the CTA's first unit and 4 (a 32-byte sector's start) in the others:
  // one predicated load and store for the first 32 words, a loop for the rest.
  EXPECT_EQ(count(r.ptx,
                  "@%pt_lead st.shared.v4.u32 \t[%pt_sb+-16], {%pt_w6, %pt_w7, %pt_w0, "
                  "%pt_w1};"),
            1u);
  EXPECT_EQ(count(r.ptx, "or.b32 \t%pt_w6, %pt_n, 2147483648;"), 1u);  // returned
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.shared.v4.u32 \t[%pt_sb+-48], {%pt_w6, %pt_sh,"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.shared.v4.u32 \t[%pt_sb+-32]"), 1u);
  EXPECT_EQ(count(r.ptx, "st.shared.v2.u32 \t[%pt_sb"), 0u);
  EXPECT_EQ(
      count(r.ptx, "setp.eq.u32 \t%pt_q1, %pt_w3, 0;\n\tand.pred \t%pt_q3, %pt_q1, %pt_lead;"), 1u);
  EXPECT_EQ(count(r.ptx, "selp.u32 \t%pt_w4, 0, 4, %pt_q1;\n\tadd.u32 \t%pt_w11, %pt_w4, 32;"), 1u);
  EXPECT_EQ(count(r.ptx, "%globaltimer"), 2u);  // the start and the return
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "@%pt_lead st.global.u64"), 0u);
  EXPECT_EQ(count(r.ptx, "$pt_copy0:"), 1u);
  EXPECT_EQ(count(r.ptx, "bar.warp.sync \t-1;"), 1u);
  EXPECT_EQ(count(r.ptx, "min.u32 \t%pt_w5, %pt_w5, 256;\n\tadd.u32 \t%pt_w5, %pt_w5, 6;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q2 ld.shared.v2.u32 \t{%pt_w9, %pt_w10}, [%pt_w7];"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q2 st.global.v2.u32 \t[%pt_d6], {%pt_w9, %pt_w10};"), 1u);
  EXPECT_EQ(count(r.ptx, "\tld.shared.v2.u32 \t{%pt_w9, %pt_w10}, [%pt_w7];"), 1u);
  EXPECT_EQ(count(r.ptx, "\tst.global.v2.u32 \t[%pt_d6], {%pt_w9, %pt_w10};"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.le.u32 \t%pt_q2, %pt_w5, %pt_w11;\n\t@%pt_q2 bra.uni \t$pt_skip0;"),
            1u);
  // With selected units, the CTA's part is the first selected unit's.
  RewriteResult sel = rewrite(mm, "proton:trace:1:256:2,5:cta_sums", 1000, kH100MaxShared);
  EXPECT_EQ(count(sel.ptx, "setp.eq.u32 \t%pt_q1, %pt_w3, 2;"), 1u);
  // The kernel's start reads its timer pair into registers (every lane: no select on the
  // lane) and computes no global address.
  EXPECT_EQ(count(r.ptx, "\tmov.u64 \t%pt_g0, %globaltimer;\n\tmov.u64 \t%pt_k0, %clock64;"), 1u);
  size_t prologue = r.ptx.find("// proton: instrumentation prologue");
  size_t epilogue = r.ptx.find("// proton: instrumentation epilogue");
  EXPECT_EQ(count(r.ptx.substr(prologue, epilogue - prologue), "%ctaid.z"), 0u);
  EXPECT_EQ(count(r.ptx.substr(epilogue), "%ctaid.z"), 1u);
  EXPECT_LT(r.ptx.find("st.shared.v4.u32"), r.ptx.find("bar.warp.sync"));
  EXPECT_LT(r.ptx.find("bar.warp.sync"), r.ptx.find("$pt_copy0:"));
  EXPECT_LT(r.ptx.find("$pt_copy0:"), r.ptx.find("$pt_skip0:"));

  // Events are stored to global memory as they happen where the buffers would not fit or lower
  // occupancy, where a warp may return with part of its lanes, and with buffer_type="global".
  auto direct = [](const RewriteResult &d) {
    return d.table.sharedBytes == 0 && count(d.ptx, "@%pt_lead st.global.v2.u32") == 3 &&
           count(d.ptx, "@%pt_lead st.shared") == 0;
  };
  EXPECT_TRUE(direct(rewrite(mm, "proton:trace:1:256:*:", 0, kH100MaxShared)));
  EXPECT_TRUE(direct(rewrite(mm, "proton:trace:1:256:*:cta_sums", 0, 0)));
  EXPECT_TRUE(direct(rewrite(mm, "proton:trace:1:256:*:cta_sums", 100000, kH100MaxShared)));
  std::string early = mm;
  early.insert(early.find("\tret;"), "\t@%p1 ret;\n");
  EXPECT_TRUE(direct(rewrite(early, "proton:trace:1:256:*:cta_sums", 0, kH100MaxShared)));
  // One event per unit: 56-byte units, whose headers the 16-byte stores could not reach.
  RewriteResult one = rewrite(mm, "proton:trace:1:1:*:cta_sums", 0, kH100MaxShared);
  EXPECT_EQ(one.table.sharedBytes, 0u);
  // Only .maxntid: a launch of fewer threads could end in a partial warp.
  std::string maxntid = mm;
  maxntid.replace(maxntid.find(".reqntid"), 8, ".maxntid");
  EXPECT_TRUE(direct(rewrite(maxntid, "proton:trace:1:256:*:cta_sums", 0, kH100MaxShared)));
}

// CTA sums and trace headers are stored 16 bytes at a time: a kernel whose dynamic shared
// symbol is declared less aligned gets one of the rewrite's own, 16-byte aligned, at the same
// address (before, its symbol was used as it was).
TEST(PtxRewrite, SharedMemoryIsAddressedThroughASymbolAlignedTo16Bytes) {
  std::string mm = golden("instrumentation_matmul_markers.ptx");
  for (const char *mode : {"proton:trace:1:256:*:cta_sums", "proton:tree:1:256:*:cta_sums"}) {
    RewriteResult aligned = rewrite(mm, mode, 1000, kH100MaxShared);
    EXPECT_GT(count(aligned.ptx, "mov.u32 \t%pt_sb, global_smem;") +
                  count(aligned.ptx, "mov.u32 \t%pt_w10, global_smem;"),
              0u)
        << mode;
    EXPECT_EQ(count(aligned.ptx, "__proton_smem"), 0u) << mode;
    std::string loose = mm;
    loose.replace(loose.find(".extern .shared .align 16"), 25, ".extern .shared .align 8");
    RewriteResult own = rewrite(loose, mode, 1000, kH100MaxShared);
    EXPECT_EQ(count(own.ptx, ".extern .shared .align 16 .b8 __proton_smem[];"), 1u) << mode;
    EXPECT_EQ(count(own.ptx, "%pt_sb, global_smem;") + count(own.ptx, "%pt_w10, global_smem;"), 0u)
        << mode;
  }
}

TEST(PtxRewrite, InlineAssemblyBlocksInsideTheBodyDoNotEndIt) {
  // Triton's multi-line inline assembly opens blocks of its own; a closing brace alone on a
  // line used to end the kernel's body there, and the rewrite failed ("kernel entry without
  // a return"), leaving the kernel uninstrumented.
  std::string mm = golden("instrumentation_matmul_markers.ptx");
  mm.insert(mm.find("\tret;"),
            "\t// begin inline asm\n\t{\n\t.reg .pred \t%p_asm;\n\tsetp.ne.u32 \t%p_asm, "
            "%r1, 0;\n\t}\n\t// end inline asm\n");
  RewriteResult r = rewrite(mm, "proton:tree:1:256:*:");
  EXPECT_EQ(count(r.ptx, "$pt_skip0:"), 1u);
  EXPECT_EQ(count(r.ptx, "// proton: instrumentation epilogue"), 1u);
  EXPECT_LT(r.ptx.find("%p_asm, %r1, 0;"), r.ptx.find("// proton: instrumentation epilogue"));
}

TEST(PtxRewrite, MarkersBackToBackShareOneClockRead) {
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  const std::string exitLoad = "// @proton:X:6c6f6164\n";
  size_t at = ptx.find(exitLoad);
  ASSERT_NE(at, std::string::npos);
  // An instruction between the exit of "load" and the enter of "mma": each reads its own.
  std::string apart = ptx;
  apart.insert(at + exitLoad.size(), "\tadd.s32 \t%r1, %r1, 0;\n");
  RewriteResult r = rewrite(apart, "proton:tree:1:256:*:");
  EXPECT_EQ(count(r.ptx, "%clock;"), 6u);
  EXPECT_EQ(count(r.ptx, "%pt_w9;"), 0u);
  // Nested scopes: the inner enter takes the outer enter's reading, the outer exit the inner
  // exit's. ("load" gets a scope "inner" right inside it: markers back to back.)
  std::string nested = ptx;
  const std::string enterLoad = "// @proton:E:6c6f6164\n";
  const std::string inner = "6c6f61641f696e6e6572";  // "load\x1finner"
  nested.insert(nested.find(enterLoad) + enterLoad.size(),
                "\tmov.u32 %r990, 0; // @proton:E:" + inner + "\n");
  size_t exitAt = nested.find(exitLoad);
  nested.insert(nested.rfind('\n', exitAt) + 1, "\tmov.u32 %r991, 0; // @proton:X:" + inner + "\n");
  RewriteResult n = rewrite(nested, "proton:tree:1:256:*:");
  ASSERT_EQ(n.table.paths, (std::vector<std::string>{"", "load", "load\x1finner", "mma"}));
  EXPECT_EQ(count(n.ptx, "%clock;"), 5u);  // kernel 2, load/inner enter 1, exits 1, mma exit 1
  EXPECT_EQ(count(n.ptx, "mov.u32 \t%pt_s2, %pt_s1;"), 1u);
  EXPECT_EQ(count(n.ptx, "sub.u32 \t%pt_w6, %pt_w9, %pt_s1;"), 1u);
  EXPECT_EQ(count(n.ptx, "mov.u32 \t%pt_s3, %pt_w9;"), 1u);  // mma after load's exit
  // time_shift takes one read's cost off every scope: each marker keeps its own read.
  EXPECT_EQ(count(rewrite(ptx, "proton:tree:1:256:*:time_shift").ptx, "%pt_lead mov.u32"), 6u);
  // 64-bit clocks share the reading the same way.
  RewriteResult wide = rewrite(ptx, "proton:tree:1:256:*:clock64");
  EXPECT_EQ(count(wide.ptx, "%clock64;"), 5u);
  EXPECT_EQ(count(wide.ptx, "mov.u64 \t%pt_s2, %pt_d8;"), 1u);
  // Trace events keep one timestamp each.
  RewriteResult trace = rewrite(ptx, "proton:trace:1:256:*:");
  EXPECT_EQ(count(trace.ptx, "%pt_w9;"), 0u);
}

TEST(PtxRewrite, TraceModeLaysOutOneBufferPerUnit) {
  RewriteResult r =
      rewrite(golden("instrumentation_matmul_markers.ptx"), "proton:trace:4:64:1:time_shift");
  const ScopeTable &t = r.table;
  EXPECT_TRUE(t.trace);
  EXPECT_EQ(t.unitWarps, 4u);
  EXPECT_EQ(t.unitsPerCta, 2u);
  EXPECT_EQ(t.capacity, 64u);
  EXPECT_EQ(t.unitBytes, kTraceUnitHeaderBytes + 8 * 64);
  EXPECT_EQ(t.slotBytes, 2 * t.unitBytes);
  // Four markers: three event stores (two adjacent markers share one), all by the unit
  // leader; the kernel scope is the header's two timer pairs.
  EXPECT_EQ(count(r.ptx, "@%pt_lead st.global.v2.u32"), 3u);
  EXPECT_EQ(count(r.ptx, "setp.eq.or.u32 \t%pt_q1, %pt_w3, 1, %pt_q1;"), 1u);
  EXPECT_EQ(count(r.ptx, "%globaltimer;"), 2u);
  // The unit's start is read before its buffer's address arithmetic (%ctaid), which would
  // otherwise sit in front of a clock read that ptxas moves nothing across.
  size_t prologue = r.ptx.find("// proton: instrumentation prologue");
  ASSERT_NE(prologue, std::string::npos);
  size_t ctaid = r.ptx.find("%ctaid.z", prologue);
  EXPECT_LT(r.ptx.find("%globaltimer;", prologue), ctaid);
  EXPECT_LT(r.ptx.find("%clock64;", prologue), ctaid);
  EXPECT_EQ(count(r.ptx.substr(prologue, ctaid - prologue), "%pt_w8"), 0u);  // no event
  EXPECT_EQ(count(r.ptx, "sub.u32 \t%pt_sh, %pt_w5, %pt_w4;"), 1u);
  // The CTA's part of the header (SM, shift, globaltimer pair) is stored by the leader of its
  // first recording unit, unit 1 here, as it starts and returns; every unit stores its own
  // part (clock pair, count and hash).
  EXPECT_EQ(
      count(r.ptx, "setp.eq.u32 \t%pt_q3, %pt_w3, 1;\n\tand.pred \t%pt_q3, %pt_q3, %pt_lead;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.v2.u32 \t[%pt_d1], {%pt_w6, %pt_sh};"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.u64 \t[%pt_d1+8], %pt_d6;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.u64 \t[%pt_d1+16], %pt_d6;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%pt_q3 st.global.u32 \t[%pt_d1+24], %pt_w6;"), 1u);  // the hash
  EXPECT_EQ(count(r.ptx, "@%pt_lead st.global.u64 \t[%pt_d1+40], %pt_d7;"), 1u);
  EXPECT_EQ(count(r.ptx, "\tst.global.v2.u32 \t[%pt_d1+32], {%pt_w6, %pt_w7};"), 1u);
  // Two plain returns, the second directly after a pair of markers: each return stores its
  // unit's end and, for the CTA's first unit, the CTA's (%pt_q3, set once at the start).
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  size_t ret = ptx.rfind("\tret;");
  ASSERT_NE(ret, std::string::npos);
  ptx.insert(ret,
             "\t@%p1 bra \t$L__proton_test;\n\tret;\n$L__proton_test:\n"
             "\tmov.u32 %r1, 0; // @proton:E:6d6d61\n\tmov.u32 %r1, 0; // @proton:X:6d6d61\n");
  RewriteResult two = rewrite(ptx, "proton:trace:1:64:*:");
  EXPECT_EQ(count(two.ptx, "$pt_skip0:"), 1u);
  EXPECT_EQ(count(two.ptx, "$pt_skip1:"), 1u);
  EXPECT_EQ(count(two.ptx, "@%pt_q3 st.global.u64 \t[%pt_d1+16], %pt_d6;"), 2u);
  EXPECT_EQ(count(two.ptx, "\tst.global.v2.u32 \t[%pt_d1+32], {%pt_w6, %pt_w7};"), 2u);
  EXPECT_EQ(count(two.ptx, "and.pred \t%pt_q3, %pt_q3, %pt_lead;"), 1u);
  // The added pair (mma's enter and exit) is one event, stored before the return's epilogue.
  size_t pair = two.ptx.find("mov.u32 \t%pt_w10, " + std::to_string(kPairedEventTag | 4 << 8 | 5));
  ASSERT_NE(pair, std::string::npos);
  EXPECT_LT(pair, two.ptx.rfind("// proton: instrumentation epilogue"));
  EXPECT_EQ(two.table.pairedEvents, 2u);
}

TEST(PtxRewrite, UneditedKernelGetsTheKernelScopeOnly) {
  RewriteResult r = rewrite(golden("instrumentation_vadd.ptx"), "proton:tree:0:256:*:clock64");
  EXPECT_EQ(r.table.kernel, "add_kernel");
  EXPECT_EQ(r.table.paths, (std::vector<std::string>{""}));
  EXPECT_EQ(r.table.numWarps, 4u);
  EXPECT_EQ(r.table.unitWarps, 4u);  // cta granularity: one recording warp per CTA
  EXPECT_EQ(r.table.unitsPerCta, 1u);
  EXPECT_EQ(count(r.ptx, "%clock64;"), 2u);
  EXPECT_EQ(count(r.ptx, "[add_kernel_param_5]"), 1u);
}

TEST(PtxRewrite, HashDependsOnModeAndScopes) {
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  uint32_t a = rewrite(ptx, "proton:tree:1:256:*:").table.hash;
  uint32_t b = rewrite(ptx, "proton:tree:1:256:*:time_shift").table.hash;
  uint32_t c = rewrite(golden("instrumentation_vadd.ptx"), "proton:tree:1:256:*:").table.hash;
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, rewrite(ptx, "proton:tree:1:256:*:").table.hash);
}

TEST(PtxRewrite, StaticMismatchesAreCountedNotRecorded) {
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  // "mma" closed by its enclosing exit (C), then an exit of a scope never opened (U).
  size_t at = ptx.find("// @proton:X:6d6d61");
  ASSERT_NE(at, std::string::npos);
  ptx.replace(at, 19, "// @proton:C:6d6d61");
  at = ptx.find("// @proton:E:6c6f6164");
  ptx.replace(at, 21, "// @proton:U:7a7a");
  RewriteResult r = rewrite(ptx, "proton:tree:1:256:*:");
  EXPECT_EQ(r.table.staticUnmatched, 1u);
  EXPECT_EQ(r.table.staticCrossing, 1u);
  EXPECT_EQ(count(r.ptx, "add.u32 \t%pt_x, %pt_x, 1;"), 1u);
}

TEST(PtxRewrite, RejectsWhatItCannotInstrument) {
  Result<RewriteConfig> config = parseInstrumentationMode("proton:tree:1:256:*:");
  ASSERT_TRUE(config.isOk());
  EXPECT_FALSE(rewritePtx(".version 8.7\n", config.value()).isOk());
  std::string noBlock = golden("instrumentation_vadd.ptx");
  noBlock.erase(noBlock.find(".reqntid"), 12);
  EXPECT_FALSE(rewritePtx(noBlock, config.value()).isOk());
}

TEST(PtxRewrite, ModeStringsAreValidated) {
  EXPECT_FALSE(parseInstrumentationMode("proton:tree:3:256:*:").isOk());
  EXPECT_FALSE(parseInstrumentationMode("proton:tree:1:100:*:").isOk());
  EXPECT_FALSE(parseInstrumentationMode("proton:graph:1:256:*:").isOk());
  EXPECT_FALSE(parseInstrumentationMode("proton:tree:1:256:*:fast").isOk());
  // A mode string of another buffer layout (a binary cached by another Proton version).
  EXPECT_FALSE(parseInstrumentationMode("proton:tree:1:256:*:layout1").isOk());
  EXPECT_TRUE(parseInstrumentationMode("proton:tree:1:256:*:clock32,layout" +
                                       std::to_string(kLayoutVersion))
                  .isOk());
  Result<RewriteConfig> c = parseInstrumentationMode("proton:trace:8:512:0,4:clock64,time_shift");
  ASSERT_TRUE(c.isOk());
  EXPECT_TRUE(c.value().trace);
  EXPECT_FALSE(c.value().clock32);
  EXPECT_TRUE(c.value().timeShift);
  EXPECT_EQ(c.value().selectedUnits, (std::vector<uint32_t>{0, 4}));
  // proton.language.disable_semantic's marks key caches and change nothing in the rewrite.
  EXPECT_TRUE(parseInstrumentationMode("proton:tree:1:256:*:no_triton,no_gluon").isOk());
  EXPECT_FALSE(parseInstrumentationMode("proton:tree:1:256:*:no_cuda").isOk());
}

// A marker in a function the compiler did not inline (Triton's noinline=True: a .func beside
// the entry) cannot be recorded there: it is left as it is and named in the table.
TEST(PtxRewrite, MarkersOutsideTheEntryAreLeftAndNamedInTheTable) {
  std::string ptx = golden("instrumentation_vadd.ptx");
  const std::string func =
      ".func helper()\n{\n"
      "\tmov.u32 %r1, 0; // @proton:E:6f75746572"
      "1f"
      "696e6e6572\n"  // outer\x1finner
      "\tmov.u32 %r1, 0; // @proton:X:6f75746572"
      "1f"
      "696e6e6572\n"
      "\tret;\n}\n";
  size_t entry = ptx.find(".visible .entry");
  ASSERT_NE(entry, std::string::npos);
  ptx.insert(entry, func);
  RewriteResult r = rewrite(ptx, "proton:tree:1:256:*:");
  EXPECT_EQ(r.table.droppedMarkers, 2u);
  EXPECT_EQ(r.table.droppedScopes, std::vector<std::string>{"outer/inner"});
  EXPECT_EQ(r.table.paths, std::vector<std::string>{""});
  // The function is untouched: no clock read or count of ours in it.
  size_t body = r.ptx.find(".func helper()");
  ASSERT_NE(body, std::string::npos);
  std::string helper = r.ptx.substr(body, r.ptx.find("}", body) - body);
  EXPECT_EQ(count(helper, "%pt_"), 0u);
  Result<ScopeTable> back = decodeTable(encodeTable(r.table));
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().droppedMarkers, 2u);
  EXPECT_EQ(back.value().droppedScopes, std::vector<std::string>{"outer/inner"});
  EXPECT_EQ(back.value().paths, r.table.paths);
}

TEST(PtxRewrite, TableTextRoundTrips) {
  RewriteResult r = rewrite(golden("instrumentation_matmul_markers.ptx"), "proton:trace:1:64:*:");
  Result<ScopeTable> back = decodeTable(encodeTable(r.table));
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().paths, r.table.paths);
  EXPECT_EQ(back.value().hash, r.table.hash);
  EXPECT_EQ(back.value().unitBytes, r.table.unitBytes);
  EXPECT_FALSE(decodeTable("v1\tzz").isOk());
  // A v2 table whose count of dropped scope names runs past its fields.
  EXPECT_FALSE(decodeTable("v2\t6b\t1\t0\t1\t1\t1\t0\t32\t32\t0\t0\t2\t0\t5").isOk());
  // A table an older Proton (v1) wrote into a binary's cached metadata: no dropped names.
  Result<ScopeTable> v1 = decodeTable("v1\t6b\t9\t0\t4\t1\t4\t0\t32\t128\t0\t0\t1\t\t6c");
  ASSERT_TRUE(v1.isOk());
  EXPECT_EQ(v1.value().kernel, "k");
  EXPECT_EQ(v1.value().droppedMarkers, 1u);
  EXPECT_TRUE(v1.value().droppedScopes.empty());
  // A v1 trace table describes an older unit header: not decoded with today's.
  EXPECT_FALSE(decodeTable("v1\t6b\t9\t1\t4\t1\t4\t8\t112\t448\t0\t0\t0\t").isOk());
  EXPECT_EQ(v1.value().paths, (std::vector<std::string>{"", "l"}));
}

// The golden vector add (4 warps) declared with `threads` threads instead.
std::string vaddWithThreads(uint32_t threads) {
  std::string ptx = golden("instrumentation_vadd.ptx");
  size_t at = ptx.find(".reqntid 128");
  EXPECT_NE(at, std::string::npos);
  return ptx.replace(at, 12, ".reqntid " + std::to_string(threads));
}

// Per unit, the warps the prologue's mask and shift make its leader: warp w leads unit
// w >> shift when (w & mask) == 0.
std::vector<int> leadersPerUnit(const RewriteResult &r) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.ptx, m, std::regex("and\\.b32 \t%pt_w3, %pt_w1, (\\d+);")));
  const uint32_t mask = static_cast<uint32_t>(std::stoul(m[1]));
  EXPECT_TRUE(std::regex_search(r.ptx, m, std::regex("shr\\.u32 \t%pt_w3, %pt_w1, (\\d+);")));
  const uint32_t shift = static_cast<uint32_t>(std::stoul(m[1]));
  std::vector<int> leaders(r.table.unitsPerCta, 0);
  for (uint32_t w = 0; w < r.table.numWarps; ++w)
    if ((w & mask) == 0) ++leaders.at(w >> shift);
  return leaders;
}

// A CTA of 12 warps (Gluon's warp_specialize with 4 default and 2 x 4 worker warps) recorded
// per CTA or per 16 or 32 warps is one unit with one leader, warp 0. (Before, the unit was
// 12 warps wide, its mask 11, and warps 0 and 4 both led it: two warps' events and sums in
// one unit's place.)
TEST(PtxRewrite, ACtaOfTwelveWarpsRecordedWholeHasOneLeader) {
  const std::string ptx = vaddWithThreads(384);
  for (const char *mode : {"proton:tree:0:256:*:", "proton:trace:0:256:*:",
                           "proton:trace:16:256:*:", "proton:tree:32:256:*:"}) {
    RewriteResult r = rewrite(ptx, mode);
    EXPECT_EQ(r.table.numWarps, 12u) << mode;
    EXPECT_EQ(r.table.unitWarps, 16u) << mode;
    EXPECT_EQ(leadersPerUnit(r), std::vector<int>{1}) << mode;
  }
  // Units of 8 warps: warps 0 and 8 lead the two.
  RewriteResult r = rewrite(ptx, "proton:tree:8:256:*:");
  EXPECT_EQ(r.table.unitsPerCta, 2u);
  EXPECT_EQ(leadersPerUnit(r), (std::vector<int>{1, 1}));
}

// One kernel autotuned over num_warps compiles to entries of the same name, scopes and mode:
// the tables' hashes differ by layout, so each variant's buffers are decoded with its own.
// (Before, both had one hash and the table loaded last split every variant's CTAs.)
TEST(PtxRewrite, TheSameKernelWithAnotherLayoutHasAnotherTable) {
  for (const char *mode : {"proton:trace:1:256:*:", "proton:tree:1:256:*:"}) {
    RewriteResult four = rewrite(golden("instrumentation_vadd.ptx"), mode);
    RewriteResult eight = rewrite(vaddWithThreads(256), mode);
    EXPECT_EQ(four.table.kernel, eight.table.kernel);
    EXPECT_NE(four.table.unitsPerCta, eight.table.unitsPerCta);
    EXPECT_NE(four.table.hash, eight.table.hash) << mode;
    // The same layout, the same table.
    EXPECT_EQ(rewrite(golden("instrumentation_vadd.ptx"), mode).table.hash, four.table.hash);
  }
}

}  // namespace
}  // namespace proton::instrumentation
