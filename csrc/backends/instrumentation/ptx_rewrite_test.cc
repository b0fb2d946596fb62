#include "backends/instrumentation/ptx_rewrite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
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

// An expected piece of rewritten PTX, stated without the names the rewrite gives its own
// registers: in `pattern`, %A ... %Z each stand for one of them (%pt_...), the same letter for
// the same register, different letters for any (so "add.u32 \t%A, %A, 1;" is an increment of
// one register). A rename of the rewrite's registers keeps these tests passing; a change of
// what its code does (an instruction, an operand's role, an offset, a count) does not.
class Shape {
 public:
  explicit Shape(const std::string &pattern) {
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '%' && i + 1 < pattern.size() && std::isupper(pattern[i + 1]) &&
          (i + 2 == pattern.size() || !isNameChar(pattern[i + 2]))) {
        parts_.push_back({"", pattern[++i]});
        continue;
      }
      if (parts_.empty() || parts_.back().reg) parts_.push_back({"", 0});
      parts_.back().literal += pattern[i];
    }
  }
  // Where the piece starts in `text` at `at` and how long it is there (0: it does not).
  size_t matchAt(const std::string &text, size_t at, std::string *bound = nullptr) const {
    std::string regs[26];
    size_t p = at;
    for (const Part &part : parts_) {
      if (!part.reg) {
        if (text.compare(p, part.literal.size(), part.literal) != 0) return 0;
        p += part.literal.size();
        continue;
      }
      if (text.compare(p, 4, "%pt_") != 0) return 0;
      size_t end = p + 4;
      while (end < text.size() && isNameChar(text[end])) ++end;
      if (end == p + 4) return 0;
      std::string &reg = regs[part.reg - 'A'];
      if (reg.empty())
        reg = text.substr(p, end - p);
      else if (text.compare(p, end - p, reg) != 0 || (end < text.size() && isNameChar(text[end])))
        return 0;
      p = end;
    }
    if (bound)
      for (const Part &part : parts_)
        if (part.reg) bound[part.reg - 'A'] = regs[part.reg - 'A'];
    return p - at;
  }
  // The first place at or after `from` (npos: none); with `bound` (26 names), the names the
  // letters took there.
  size_t find(const std::string &text, size_t from = 0, std::string *bound = nullptr) const {
    const std::string first = parts_.empty() ? "" : parts_[0].reg ? "%pt_" : parts_[0].literal;
    for (size_t at = text.find(first, from); at != std::string::npos; at = text.find(first, at + 1))
      if (parts_.empty() || matchAt(text, at, bound)) return at;
    return std::string::npos;
  }
  size_t count(const std::string &text) const {
    size_t n = 0;
    for (size_t at = find(text); at != std::string::npos; at = find(text, at + 1)) ++n;
    return n;
  }

 private:
  struct Part {
    std::string literal;
    char reg;  // 'A'..'Z', or 0 for a literal
  };
  static bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
  std::vector<Part> parts_;
};

// How many times `what` (plain text, or a Shape's pattern) occurs in `text`.
size_t count(const std::string &text, const std::string &what) { return Shape(what).count(text); }
size_t findShape(const std::string &text, const std::string &what, size_t from = 0) {
  return Shape(what).find(text, from);
}
// The register that `letter` stands for where `pattern` first occurs in `text` ("": nowhere):
// a register named by what the code does with it (the lane that reads the clock, the address
// a record goes to), for the patterns that follow to use.
std::string boundAt(const std::string &text, const std::string &pattern, char letter) {
  std::string regs[26];
  return Shape(pattern).find(text, 0, regs) == std::string::npos ? "" : regs[letter - 'A'];
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool isMarker(const std::string &line) {
  size_t at = line.find_first_not_of(" \t");
  return at != std::string::npos && line.compare(at, 8, "mov.u32 ") == 0 &&
         line.find("; // @proton:") != std::string::npos;
}

// A line of the kernel that runs: not blank, not a comment, not a .loc or .file directive.
bool isInstruction(const std::string &line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos || line.compare(at, 2, "//") == 0) return false;
  return line.compare(at, 4, ".loc") != 0 && line.compare(at, 5, ".file") != 0;
}

size_t clockReads(const std::string &text) {
  return count(text, "%clock;") + count(text, "%clock64;");
}

// Where a rewrite read the clock, against the kernel it rewrote: each line of the kernel is
// looked for in the rewrite, in order (kernelKept: all were found); then, for each run of
// markers with no instruction of the kernel between them, the clock reads between its first
// marker and the kernel's next instruction (where those scopes begin and end).
struct MarkerReads {
  bool kernelKept = true;
  std::vector<size_t> reads;  // per run of markers, in the kernel's order
  size_t outside = 0;         // elsewhere: the kernel scope's, and time_shift's
};
MarkerReads markerReads(const std::string &kernel, const std::string &rewritten) {
  const std::vector<std::string> in = lines(kernel), out = lines(rewritten);
  std::vector<size_t> at(in.size(), out.size());
  MarkerReads m;
  for (size_t i = 0, next = 0; i < in.size(); ++i) {
    size_t j = next;
    while (j < out.size() && out[j] != in[i]) ++j;
    if (j == out.size()) {
      m.kernelKept = false;
      continue;
    }
    at[i] = j;
    next = j + 1;
  }
  size_t inRuns = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!isMarker(in[i])) continue;
    size_t end = i;
    while (end < in.size() && (isMarker(in[end]) || !isInstruction(in[end]))) ++end;
    size_t reads = 0;
    for (size_t j = at[i]; end < in.size() && j < at[end]; ++j) reads += clockReads(out[j]);
    m.reads.push_back(reads);
    inRuns += reads;
    i = end;
  }
  m.outside = clockReads(rewritten) - inRuns;
  return m;
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
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%A], %B;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%A red.global.add.u32 \t[%B+8], %C;"), 1u);
  EXPECT_EQ(count(r.ptx, "red.global"), 2u);
  EXPECT_EQ(count(r.ptx, "atom."), 0u);
  const size_t own = count(golden("instrumentation_matmul_markers.ptx"), "shfl.sync");
  EXPECT_EQ(count(r.ptx, "shfl.sync.idx.b32 \t%pt_"), 2u + 3u * 3u);
  EXPECT_EQ(count(r.ptx, "shfl.sync"), own + 2u + 3u * 3u);
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%A, %B, 8;"), 1u);
  for (int chunk = 1; chunk < 8; ++chunk)  // chunk 0 is the default
    EXPECT_EQ(count(r.ptx, "setp.eq.u32 \t%A, %B, " + std::to_string(chunk) + ";"), 1u) << chunk;
  // A scope's count chunk says whether the unit ran it: {count, 1 or 0}.
  EXPECT_EQ(count(r.ptx, "selp.u32 \t%A, 1, 0, %B;"), 3u);
  const std::string chunkAt = boundAt(r.ptx, "red.global.add.u64 \t[%A], %B;", 'A');
  ASSERT_FALSE(chunkAt.empty());
  EXPECT_EQ(count(r.ptx, "st.global.v2.u32 \t[" + chunkAt + "]"), 0u);
  EXPECT_EQ(count(r.ptx, "st.global.v2.u64"), 0u);
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  // The slot header: one lane of one unit of the grid writes it (a store by every warp to one
  // address serialises them all): the first CTA's, first unit's, first lane.
  const std::string first =
      "setp.eq.u32 \t%Q, %A, 0;\n\tsetp.eq.and.u32 \t%Q, %B, 0, %Q;\n\t"
      "setp.eq.and.u32 \t%Q, %C, 0, %Q;";
  EXPECT_EQ(count(r.ptx, first), 1u);
  const std::string header = boundAt(r.ptx, first, 'Q');
  EXPECT_EQ(count(r.ptx, "@" + header + " st.global.v2.u32 \t[%B]"), 1u);
  EXPECT_EQ(count(r.ptx, "@" + header + " red.global.add.u32 \t[%B+8], %C;"), 1u);
  // A warp leaves or stays as a whole: no branch on the lane before the shuffles.
  EXPECT_EQ(count(r.ptx, "@!%A bra"), 0u);
  // With a predicated return a warp may arrive with some of its lanes: the leader stores the
  // record alone (the unit header and one 16-byte record per scope), no shuffles.
  std::string early = golden("instrumentation_matmul_markers.ptx");
  early.insert(early.find("\tret;"), "\t@%p1 ret;\n");
  RewriteResult leader = rewrite(early, "proton:tree:1:256:*:");
  EXPECT_EQ(count(leader.ptx, "shfl.sync"), own);
  EXPECT_EQ(count(leader.ptx, "st.global.v2.u64"), 0u);
  EXPECT_EQ(count(leader.ptx, "red.global.add.u64 \t[%A], %B;"), 1u);  // unmatched
  const std::string record = boundAt(leader.ptx, "red.global.add.u64 \t[%A], %B;", 'A');
  ASSERT_FALSE(record.empty());
  EXPECT_EQ(count(leader.ptx, "red.global.add.u32 \t[" + record + "+8], %C;"), 1u);  // recorded
  for (int i = 0; i < 3; ++i) {
    const std::string at = std::to_string(16 + 16 * i);
    EXPECT_EQ(count(leader.ptx, "@%A red.global.add.u64 \t[" + record + "+" + at + "], %C"), 1u);
    EXPECT_EQ(count(leader.ptx, "red.global.add.u64 \t[" + record + "+" +
                                    std::to_string(24 + 16 * i) + "], %B;"),
              1u);
  }
  EXPECT_EQ(count(leader.ptx, "@!%A bra \t$pt_skip0;"), 1u);
  EXPECT_EQ(count(r.ptx, "ld.param.u64 \t%A, [mm_param_5]"), 1u);
  // Each marker keeps its line and gets one clock read, but for the enter of "mma", which
  // directly follows the exit of "load" and takes its reading; the kernel scope adds two.
  EXPECT_EQ(count(r.ptx, "// @proton:"), 4u);
  EXPECT_EQ(count(r.ptx, "%clock;"), 5u);
  // Every read is the recording lane's alone (lane-predicated: not S2UR), and an exit's
  // register is not zeroed for the other lanes first (ptxas would select between the two at
  // every scope end).
  const std::string lane = boundAt(r.ptx, "@%L mov.u32 \t%A, %clock;", 'L');
  ASSERT_FALSE(lane.empty());
  EXPECT_EQ(count(r.ptx, "@" + lane + " mov.u32 \t%A, %clock;"), 5u);
  const std::string exit = "@" + lane + " mov.u32 \t%W, %clock;\n\tsub.u32 \t%D, %W, %S;";
  EXPECT_EQ(count(r.ptx, exit), 3u);  // the kernel's, "load"'s and "mma"'s
  EXPECT_EQ(count(r.ptx, "mov.u32 \t" + boundAt(r.ptx, exit, 'W') + ", 0;"), 0u);
  // An enter is a reading and a count: its own (the kernel's, "load"'s), or the reading of
  // the exit right before it ("mma"'s); an exit without time_shift has no min/sub pair.
  EXPECT_EQ(count(r.ptx, "@" + lane + " mov.u32 \t%S, %clock;\n\tadd.u32 \t%E, %E, 1;"), 2u);
  EXPECT_EQ(count(r.ptx, "\tmov.u32 \t%S, %W;\n\tadd.u32 \t%E, %E, 1;"), 1u);
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

// Every layout: trees per unit, per CTA (cta_sums) and per 8 warps, 64-bit and shifted clocks,
// traces to global and to shared memory, of all units and of some.
const char *const kLayouts[] = {"proton:tree:1:256:*:",           "proton:tree:1:256:*:cta_sums",
                                "proton:tree:1:256:*:time_shift", "proton:tree:1:256:*:clock64",
                                "proton:tree:8:256:*:",           "proton:trace:1:256:*:",
                                "proton:trace:1:256:*:cta_sums",  "proton:trace:4:64:1:time_shift",
                                "proton:trace:1:256:2,5:cta_sums"};
const char *const kGoldenKernels[] = {"instrumentation_matmul_markers.ptx",
                                      "instrumentation_vadd.ptx"};

// What a rewrite must guarantee, whatever code it emits: the kernel's own lines are all there,
// in their order; each marker keeps its line; each run of markers with no instruction of the
// kernel between them reads the clock right there, where its scopes begin and end (once; a
// tree with time_shift, which takes a read's cost off every scope, once per marker; a trace
// makes such a run one event, one timestamp), and the kernel scope reads it at the start and
// at the return (time_shift: twice more, for that cost).
TEST(PtxRewrite, EveryLayoutReadsTheClockWhereTheScopesAreAndKeepsTheKernel) {
  for (const char *name : kGoldenKernels) {
    const std::string ptx = golden(name);
    const std::vector<std::string> in = lines(ptx);
    std::vector<size_t> runSizes;  // markers per run, in the kernel's order
    for (size_t i = 0; i < in.size(); ++i) {
      if (!isMarker(in[i])) continue;
      size_t n = 0;
      for (; i < in.size() && (isMarker(in[i]) || !isInstruction(in[i])); ++i) n += isMarker(in[i]);
      runSizes.push_back(n);
    }
    for (const char *mode : kLayouts) {
      RewriteResult r = rewrite(ptx, mode, 0, kH100MaxShared);
      const bool shift = std::string(mode).find("time_shift") != std::string::npos;
      MarkerReads m = markerReads(ptx, r.ptx);
      EXPECT_TRUE(m.kernelKept) << name << " " << mode;
      EXPECT_EQ(count(r.ptx, "; // @proton:"), count(ptx, "; // @proton:")) << name << " " << mode;
      std::vector<size_t> expected(runSizes.size(), 1);
      if (shift && std::string(mode).find(":tree:") != std::string::npos) expected = runSizes;
      EXPECT_EQ(m.reads, expected) << name << " " << mode;
      EXPECT_EQ(m.outside, shift ? 4u : 2u) << name << " " << mode;
    }
  }
}

// The ptxas to check rewrites with: $PROTON_PTXAS, else the first on PATH, else the CUDA
// toolkit's; "" if none.
std::string findPtxas() {
  auto runnable = [](const std::string &path) { return access(path.c_str(), X_OK) == 0; };
  if (const char *env = std::getenv("PROTON_PTXAS"); env && runnable(env)) return env;
  std::stringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');)
    if (!dir.empty() && runnable(dir + "/ptxas")) return dir + "/ptxas";
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var); root && runnable(std::string(root) + "/bin/ptxas"))
      return std::string(root) + "/bin/ptxas";
  return runnable("/usr/local/cuda/bin/ptxas") ? "/usr/local/cuda/bin/ptxas" : "";
}

// Whether `ptxas` assembles `ptx` for the target it names; its messages in *said.
bool assembles(const std::string &ptxas, const std::string &ptx, std::string *said) {
  static int files = 0;
  const std::string base = ::testing::TempDir() + "proton_ptxas_" + std::to_string(getpid()) + "_" +
                           std::to_string(files++);
  std::ofstream(base + ".ptx") << ptx;
  size_t target = ptx.find(".target ");
  std::string arch =
      target == std::string::npos
          ? "sm_90a"
          : ptx.substr(target + 8, ptx.find_first_of(" ,\n", target + 8) - target - 8);
  const std::string command = "'" + ptxas + "' -arch=" + arch + " -o '" + base + ".cubin' '" +
                              base + ".ptx' > '" + base + ".log' 2>&1";
  const bool ok = std::system(command.c_str()) == 0;
  std::stringstream log;
  log << std::ifstream(base + ".log").rdbuf();
  *said = log.str();
  for (const char *ext : {".ptx", ".cubin", ".log"}) std::remove((base + ext).c_str());
  return ok;
}

// Every layout of both golden kernels is PTX that ptxas accepts (where this machine has one
// that accepts the kernels as Triton left them).
TEST(PtxRewrite, PtxasAcceptsEveryLayout) {
  const std::string ptxas = findPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas here (PROTON_PTXAS, PATH, CUDA_HOME)";
  std::string said;
  for (const char *name : kGoldenKernels)
    if (!assembles(ptxas, golden(name), &said))
      GTEST_SKIP() << ptxas << " does not assemble " << name << " itself: " << said;
  for (const char *name : kGoldenKernels)
    for (const char *mode : kLayouts)
      for (uint32_t shared : {0u, 65530u})
        EXPECT_TRUE(
            assembles(ptxas, rewrite(golden(name), mode, shared, kH100MaxShared).ptx, &said))
            << name << " " << mode << " " << shared << ": " << said;
}

// A scope whose enters and exits did not pair up in a unit (an enter under an `if`, its exit
// after it) leaves that unit's sums of the scope out of its record, in every tree layout:
// an exit with no enter before it added a clock reading less an enter that never happened
// (on the GPU, 45 billion cycles for 64 warps). Only |enters - exits| is counted.
TEST(PtxRewrite, ScopesThatDidNotPairUpInAUnitAreLeftOutOfItsSums) {
  for (const char *mode : {"proton:tree:1:256:*:", "proton:tree:1:256:*:cta_sums"}) {
    RewriteResult r =
        rewrite(golden("instrumentation_matmul_markers.ptx"), mode, 0, kH100MaxShared);
    std::string epilogue = r.ptx.substr(r.ptx.find("// proton: instrumentation epilogue"));
    // Per scope, |enters - exits| not 0: its cycles (%A) and count (%C) are zeroed ...
    const Shape dropped(
        "\tsub.s32 \t%W, %E, %C;\n\tsetp.ne.s32 \t%Q, %W, 0;\n\t@%Q mov.u64 \t%A, 0;\n\t@%Q "
        "mov.u32 \t%C, 0;\n");
    size_t scopes = 0;
    std::string bound[26];
    for (size_t at = dropped.find(epilogue, 0, bound); at != std::string::npos;
         at = dropped.find(epilogue, at + 1, bound), ++scopes) {
      const std::string &cycles = bound['A' - 'A'];
      // ... after the scope's last sum (the kernel scope's exit is in the epilogue), before
      // the unit's sums of the scope leave for its record.
      size_t lastSum = epilogue.rfind("add.u64 \t" + cycles + ", " + cycles + ",");
      EXPECT_TRUE(lastSum == std::string::npos || lastSum < at) << mode << " " << cycles;
      EXPECT_NE(findShape(epilogue, cycles, at + dropped.matchAt(epilogue, at)), std::string::npos)
          << mode << " " << cycles;
    }
    EXPECT_EQ(scopes, 3u) << mode;  // the kernel's, "load", "mma"
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
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%A, global_smem;"), 1u);
  EXPECT_EQ(count(r.ptx, "add.u32 \t%A, %A, 65536;"), 1u);
  // The record's addresses (%ctaid reads, the shared slots) are worked out in the epilogue
  // before the kernel scope's last clock read, where they overlap the kernel's last work, not
  // after it, where they would lengthen the CTA's end; none in the prologue.
  size_t epilogue = r.ptx.find("// proton: instrumentation epilogue");
  ASSERT_NE(epilogue, std::string::npos);
  EXPECT_EQ(count(r.ptx.substr(0, epilogue), "%ctaid"),
            count(golden("instrumentation_matmul_markers.ptx"), "%ctaid"));
  size_t ctaid = r.ptx.find("%ctaid.z", epilogue);
  size_t slots = findShape(r.ptx, "mov.u32 \t%A, global_smem;", epilogue);
  size_t lastClock = r.ptx.find("%clock;", epilogue);
  EXPECT_LT(ctaid, lastClock);
  EXPECT_LT(slots, lastClock);
  EXPECT_LT(lastClock, r.ptx.find("st.shared.v4.u32", epilogue));
  EXPECT_LT(r.ptx.find("st.shared.v4.u32", epilogue), r.ptx.find("bar.sync", epilogue));
  EXPECT_EQ(count(r.ptx, "st.shared.v4.u32 \t[%A"), 4u);  // header and 3 scopes, once
  // The kernel uses barrier 0 for the whole CTA only: the CTA meets there once more (a kernel
  // that uses more barriers can fit fewer CTAs on an SM), and no atomics are used.
  EXPECT_EQ(count(r.ptx, "bar.sync \t0;"),
            count(golden("instrumentation_matmul_markers.ptx"), "bar.sync \t0;") + 1);
  EXPECT_EQ(count(r.ptx, "atom."), 0u);
  EXPECT_EQ(count(r.ptx, "red.global"), 2u);  // the CTA's record, and the header's launch count
  // 8 chunks of 8 bytes, one per thread of the first 8: each adds its chunk of the 8 slots.
  EXPECT_EQ(count(r.ptx, "setp.ge.u32 \t%A, %B, 8;"), 1u);
  EXPECT_EQ(count(r.ptx, "ld.shared.v2.u32"), 8u);
  for (uint32_t u = 0; u < 8; ++u)
    EXPECT_EQ(count(r.ptx, "[%A+" + std::to_string(u * 64) + "];"), 1u) << u;
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%A], %B;"), 1u);
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "@%A st.global.v2.u32 \t[%B]"), 1u);
  EXPECT_EQ(count(r.ptx, "mul.wide.u32 \t%A, %B, 64;"), 1u);

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
  EXPECT_EQ(count(sel.ptx, "[%A+32];"), 1u);
  EXPECT_EQ(count(sel.ptx, "[%A+96];"), 1u);
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
  // Thread %T adds chunk %T, then chunk %T + 128, while the chunk is one of the 130.
  const std::string round0 =
      "setp.ge.u32 \t%Q, %T, 130;\n\t@%Q bra \t$pt_skip0;\n\tadd.u32 \t%C, %T, 0;";
  EXPECT_EQ(count(r.ptx, round0), 1u);
  const std::string thread = boundAt(r.ptx, round0, 'T');
  EXPECT_EQ(
      count(r.ptx, "add.u32 \t%C, " + thread + ", 128;\n\tsetp.ge.u32 \t%Q, %C, 130;\n\t@%Q bra"),
      1u);
  EXPECT_EQ(count(r.ptx, "red.global.add.u64 \t[%A], %B;"), 2u);
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
  const std::string event = "@%L st.shared.v2.u32 \t[%B], {%C, %D};";
  EXPECT_EQ(count(r.ptx, event), 3u);
  const std::string lead = boundAt(r.ptx, event, 'L');
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%A, " + std::to_string(kPairedEventTag | 3 << 8 | 4)), 1u);
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%A, 2;"), 1u);  // load's enter
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%A, 5;"), 1u);  // mma's exit
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%B, %clock;"), 3u);
  EXPECT_EQ(t.pairedEvents, 1u);
  EXPECT_EQ(count(r.ptx, "@" + lead + " st.global.v2.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "mad.lo.u32 \t%A, %B, 2096, %A;"), 1u);  // the unit's shared base
  const std::string unitBase = boundAt(r.ptx, "mad.lo.u32 \t%A, %B, 2096, %A;", 'A');
  // At the one return, the leader writes its part of the unit header (its count with the
  // returned bit, and its clock pair) into shared memory before the events, in one 16-byte
  // store, and the leader of the CTA's first recording unit the CTA's part in front
  // of it (SM, shift, globaltimer pair, hash) in two; then the warp copies header and
  // min(events, 256) events in one piece, lane j taking 8-byte words first + j, first + j +
  // 32, ..., first 0 in the CTA's first unit and 4 (a 32-byte sector's start) in the others:
  // one predicated load and store for the first 32 words, a loop for the rest.
  EXPECT_EQ(count(r.ptx,
                  "@%A st.shared.v4.u32 \t[%B+-16], {%C, %D, %E, "
                  "%F};"),
            1u);
  EXPECT_EQ(count(r.ptx, "or.b32 \t%A, %B, 2147483648;"), 1u);  // returned
  EXPECT_EQ(count(r.ptx, "@%C st.shared.v4.u32 \t[%D+-48], {%A, %E,"), 1u);
  EXPECT_EQ(count(r.ptx, "@%A st.shared.v4.u32 \t[%B+-32]"), 1u);
  EXPECT_EQ(count(r.ptx, "st.shared.v2.u32 \t[" + unitBase), 0u);
  EXPECT_EQ(count(r.ptx, "setp.eq.u32 \t%A, %B, 0;\n\tand.pred \t%C, %A, %D;"), 1u);
  EXPECT_EQ(count(r.ptx, "selp.u32 \t%A, 0, 4, %B;\n\tadd.u32 \t%C, %A, 32;"), 1u);
  EXPECT_EQ(count(r.ptx, "%globaltimer"), 2u);  // the start and the return
  EXPECT_EQ(count(r.ptx, "st.global.v4.u32"), 0u);
  EXPECT_EQ(count(r.ptx, "@%A st.global.u64"), 0u);
  EXPECT_EQ(count(r.ptx, "$pt_copy0:"), 1u);
  EXPECT_EQ(count(r.ptx, "bar.warp.sync \t-1;"), 1u);
  EXPECT_EQ(count(r.ptx, "min.u32 \t%A, %A, 256;\n\tadd.u32 \t%A, %A, 6;"), 1u);
  EXPECT_EQ(count(r.ptx, "@%A ld.shared.v2.u32 \t{%B, %C}, [%D];"), 1u);
  EXPECT_EQ(count(r.ptx, "@%A st.global.v2.u32 \t[%B], {%C, %D};"), 1u);
  EXPECT_EQ(count(r.ptx, "\tld.shared.v2.u32 \t{%A, %B}, [%C];"), 1u);
  EXPECT_EQ(count(r.ptx, "\tst.global.v2.u32 \t[%A], {%B, %C};"), 1u);
  EXPECT_EQ(count(r.ptx, "setp.le.u32 \t%A, %B, %C;\n\t@%A bra.uni \t$pt_skip0;"), 1u);
  // With selected units, the CTA's part is the first selected unit's.
  RewriteResult sel = rewrite(mm, "proton:trace:1:256:2,5:cta_sums", 1000, kH100MaxShared);
  EXPECT_EQ(count(sel.ptx, "setp.eq.u32 \t%A, %B, 2;"), 1u);
  // The kernel's start reads its timer pair into registers (every lane: no select on the
  // lane) and computes no global address.
  size_t prologue = r.ptx.find("// proton: instrumentation prologue");
  size_t epilogue = r.ptx.find("// proton: instrumentation epilogue");
  EXPECT_EQ(count(r.ptx.substr(prologue, epilogue - prologue),
                  "\tmov.u64 \t%A, %globaltimer;\n\tmov.u64 \t%B, %clock64;"),
            1u);
  EXPECT_EQ(count(r.ptx.substr(prologue, epilogue - prologue), "%ctaid.z"), 0u);
  EXPECT_EQ(count(r.ptx.substr(epilogue), "%ctaid.z"), 1u);
  EXPECT_LT(r.ptx.find("st.shared.v4.u32"), r.ptx.find("bar.warp.sync"));
  EXPECT_LT(r.ptx.find("bar.warp.sync"), r.ptx.find("$pt_copy0:"));
  EXPECT_LT(r.ptx.find("$pt_copy0:"), r.ptx.find("$pt_skip0:"));

  // Events are stored to global memory as they happen where the buffers would not fit or lower
  // occupancy, where a warp may return with part of its lanes, and with buffer_type="global".
  auto direct = [](const RewriteResult &d) {
    return d.table.sharedBytes == 0 &&
           count(d.ptx, "@%L st.global.v2.u32 \t[%A], {%T, %K};\n\tadd.u32 \t%N, %N, 1;") == 3 &&
           count(d.ptx, "@%A st.shared") == 0;
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
    EXPECT_GT(count(aligned.ptx, "mov.u32 \t%A, global_smem;") +
                  count(aligned.ptx, "mov.u32 \t%B, global_smem;"),
              0u)
        << mode;
    EXPECT_EQ(count(aligned.ptx, "__proton_smem"), 0u) << mode;
    std::string loose = mm;
    loose.replace(loose.find(".extern .shared .align 16"), 25, ".extern .shared .align 8");
    RewriteResult own = rewrite(loose, mode, 1000, kH100MaxShared);
    EXPECT_EQ(count(own.ptx, ".extern .shared .align 16 .b8 __proton_smem[];"), 1u) << mode;
    EXPECT_EQ(count(own.ptx, "%A, global_smem;") + count(own.ptx, "%B, global_smem;"), 0u) << mode;
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
  // The exit of "load" and the enter of "mma" have no instruction between them: one read; the
  // kernel scope adds two.
  MarkerReads plain = markerReads(ptx, rewrite(ptx, "proton:tree:1:256:*:").ptx);
  EXPECT_EQ(plain.reads, (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(plain.outside, 2u);
  const std::string exitLoad = "// @proton:X:6c6f6164\n";
  size_t at = ptx.find(exitLoad);
  ASSERT_NE(at, std::string::npos);
  // An instruction between the exit of "load" and the enter of "mma": each reads its own.
  std::string apart = ptx;
  apart.insert(at + exitLoad.size(), "\tadd.s32 \t%r1, %r1, 0;\n");
  RewriteResult r = rewrite(apart, "proton:tree:1:256:*:");
  EXPECT_EQ(count(r.ptx, "%clock;"), 6u);
  EXPECT_EQ(markerReads(apart, r.ptx).reads, (std::vector<size_t>{1, 1, 1, 1}));
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
  EXPECT_EQ(markerReads(nested, n.ptx).reads, (std::vector<size_t>{1, 1, 1}));
  // The enters that take a reading: inner's (the outer enter's), mma's (the exits').
  EXPECT_EQ(count(n.ptx, "\tmov.u32 \t%S, %W;\n\tadd.u32 \t%E, %E, 1;"), 2u);
  // time_shift takes one read's cost off every scope: each marker keeps its own read.
  MarkerReads shifted = markerReads(ptx, rewrite(ptx, "proton:tree:1:256:*:time_shift").ptx);
  EXPECT_EQ(shifted.reads, (std::vector<size_t>{1, 2, 1}));
  // 64-bit clocks share the reading the same way.
  RewriteResult wide = rewrite(ptx, "proton:tree:1:256:*:clock64");
  EXPECT_EQ(count(wide.ptx, "%clock64;"), 5u);
  EXPECT_EQ(markerReads(ptx, wide.ptx).reads, (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(count(wide.ptx, "\tmov.u64 \t%S, %W;\n\tadd.u32 \t%E, %E, 1;"), 1u);
  // Trace events keep one timestamp each: the two markers are one event.
  RewriteResult trace = rewrite(ptx, "proton:trace:1:256:*:");
  EXPECT_EQ(markerReads(ptx, trace.ptx).reads, (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(trace.table.pairedEvents, 1u);
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
  const std::string event = "@%L st.global.v2.u32 \t[%A], {%T, %K};\n\tadd.u32 \t%N, %N, 1;";
  EXPECT_EQ(count(r.ptx, event), 3u);
  EXPECT_EQ(count(r.ptx, "setp.eq.or.u32 \t%A, %B, 1, %A;"), 1u);
  EXPECT_EQ(count(r.ptx, "%globaltimer;"), 2u);
  // The unit's start is read before its buffer's address arithmetic (%ctaid), which would
  // otherwise sit in front of a clock read that ptxas moves nothing across.
  size_t prologue = r.ptx.find("// proton: instrumentation prologue");
  ASSERT_NE(prologue, std::string::npos);
  size_t ctaid = r.ptx.find("%ctaid.z", prologue);
  EXPECT_LT(r.ptx.find("%globaltimer;", prologue), ctaid);
  EXPECT_LT(r.ptx.find("%clock64;", prologue), ctaid);
  EXPECT_EQ(count(r.ptx.substr(prologue, ctaid - prologue), "st.global"), 0u);  // no event
  // time_shift: the cost of a read, two reads back to back apart.
  EXPECT_EQ(count(r.ptx, "mov.u32 \t%A, %clock;\n\tmov.u32 \t%B, %clock;\n\tsub.u32 \t%S, %B, %A;"),
            1u);
  // The CTA's part of the header (SM, shift, globaltimer pair) is stored by the leader of its
  // first recording unit, unit 1 here, as it starts and returns; every unit stores its own
  // part (clock pair, count and hash).
  const std::string firstUnit = "setp.eq.u32 \t%A, %B, 1;\n\tand.pred \t%A, %A, %C;";
  EXPECT_EQ(count(r.ptx, firstUnit), 1u);
  const std::string cta = "@" + boundAt(r.ptx, firstUnit, 'A');
  EXPECT_EQ(count(r.ptx, cta + " st.global.v2.u32 \t[%B], {%C, %D};"), 1u);
  EXPECT_EQ(count(r.ptx, cta + " st.global.u64 \t[%B+8], %C;"), 1u);
  EXPECT_EQ(count(r.ptx, cta + " st.global.u64 \t[%B+16], %C;"), 1u);
  EXPECT_EQ(count(r.ptx, cta + " st.global.u32 \t[%B+24], %C;"), 1u);  // the hash
  EXPECT_EQ(count(r.ptx, "@%D st.global.u64 \t[%B+40], %E;"), 1u);
  EXPECT_EQ(count(r.ptx, "\tst.global.v2.u32 \t[%A+32], {%B, %C};"), 1u);
  // Two plain returns, the second directly after a pair of markers: each return stores its
  // unit's end and, for the CTA's first unit, the CTA's (its predicate set once at the start).
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  size_t ret = ptx.rfind("\tret;");
  ASSERT_NE(ret, std::string::npos);
  ptx.insert(ret,
             "\t@%p1 bra \t$L__proton_test;\n\tret;\n$L__proton_test:\n"
             "\tmov.u32 %r1, 0; // @proton:E:6d6d61\n\tmov.u32 %r1, 0; // @proton:X:6d6d61\n");
  RewriteResult two = rewrite(ptx, "proton:trace:1:64:*:");
  EXPECT_EQ(count(two.ptx, "$pt_skip0:"), 1u);
  EXPECT_EQ(count(two.ptx, "$pt_skip1:"), 1u);
  EXPECT_EQ(count(two.ptx, "@%A st.global.u64 \t[%B+16], %C;"), 2u);
  EXPECT_EQ(count(two.ptx, "\tst.global.v2.u32 \t[%A+32], {%B, %C};"), 2u);
  EXPECT_EQ(count(two.ptx, "setp.eq.u32 \t%A, %B, 0;\n\tand.pred \t%A, %A, %C;"), 1u);
  // The added pair (mma's enter and exit) is one event, stored before the return's epilogue.
  size_t pair = findShape(two.ptx, "mov.u32 \t%A, " + std::to_string(kPairedEventTag | 4 << 8 | 5));
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
  // Run time counts each at its marker, in counters of their own.
  const std::string crossing = "// @proton:C:6d6d61\n\tadd.u32 \t%X, %X, 1;\n";
  const std::string unmatched = "// @proton:U:7a7a\n\tadd.u32 \t%U, %U, 1;\n";
  EXPECT_EQ(count(r.ptx, crossing), 1u);
  EXPECT_EQ(count(r.ptx, unmatched), 1u);
  EXPECT_NE(boundAt(r.ptx, crossing, 'X'), boundAt(r.ptx, unmatched, 'U'));
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

// An event's start (S) is an enter that marks its scope as an event; its end where it did
// not start (F, another partition's code) is an exit in a trace, which the decoder links to
// a start in another warp, and an exit of a scope not open in a tree, which cannot pair it.
TEST(PtxRewrite, EventMarkersMarkTheirScopeAndEndAsExitsInATrace) {
  std::string ptx = golden("instrumentation_matmul_markers.ptx");
  size_t enter = ptx.find("// @proton:E:6c6f6164");  // "load"
  size_t exit = ptx.find("// @proton:X:6c6f6164");
  ASSERT_NE(enter, std::string::npos);
  ASSERT_NE(exit, std::string::npos);
  ptx.replace(enter, 21, "// @proton:S:6c6f6164");
  ptx.replace(exit, 21, "// @proton:F:6c6f6164");
  RewriteResult trace = rewrite(ptx, "proton:trace:1:64:*:");
  size_t load = std::find(trace.table.paths.begin(), trace.table.paths.end(), "load") -
                trace.table.paths.begin();
  ASSERT_LT(load, trace.table.paths.size());
  EXPECT_EQ(trace.table.eventScopes, uint64_t{1} << load);
  EXPECT_EQ(trace.table.staticUnmatched, 0u);
  Result<ScopeTable> back = decodeTable(encodeTable(trace.table));
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().eventScopes, trace.table.eventScopes);
  EXPECT_EQ(back.value().paths, trace.table.paths);
  // The same as plain scopes: only the events word of the table tells them apart.
  RewriteResult plain =
      rewrite(golden("instrumentation_matmul_markers.ptx"), "proton:trace:1:64:*:");
  EXPECT_EQ(plain.table.eventScopes, 0u);
  EXPECT_NE(plain.table.hash, trace.table.hash);
  RewriteResult tree = rewrite(ptx, "proton:tree:1:256:*:");
  EXPECT_EQ(tree.table.staticUnmatched, 1u);
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
  // The warp's index: the thread's, shifted right by 5.
  const std::string warp = boundAt(r.ptx, "mov.u32 \t%T, %tid.x;\n\tshr.u32 \t%W, %T, 5;", 'W');
  EXPECT_FALSE(warp.empty());
  std::smatch m;
  EXPECT_TRUE(
      std::regex_search(r.ptx, m, std::regex("and\\.b32 \t%pt_\\w+, " + warp + ", (\\d+);")));
  const uint32_t mask = static_cast<uint32_t>(std::stoul(m[1]));
  EXPECT_TRUE(
      std::regex_search(r.ptx, m, std::regex("shr\\.u32 \t%pt_\\w+, " + warp + ", (\\d+);")));
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
