#include "context/cfi_unwind.h"

#include <unwind.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#if defined(__x86_64__) && defined(__linux__)
#define PROTON_CACHED_CFI 1
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include "core/thread_cache.h"
#else
#define PROTON_CACHED_CFI 0
#endif

namespace proton {
namespace {

std::atomic<uint64_t> gFallbacks{0};

// ---- libgcc ---------------------------------------------------------------------------------

struct LibgccWalk {
  uintptr_t *pcs;
  size_t capacity;
  const CodeRanges *stopAt;
  size_t skip;  // frames before the first one kept: unwindPcs's own
  size_t n = 0;
};

_Unwind_Reason_Code collect(_Unwind_Context *ctx, void *arg) {
  auto *w = static_cast<LibgccWalk *>(arg);
  int beforeInsn = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &beforeInsn);
  if (ip == 0) return _URC_END_OF_STACK;
  if (w->skip > 0) {
    --w->skip;
    return _URC_NO_REASON;
  }
  // A return address points after the call: look up the call itself. A signal frame's
  // address is the interrupted instruction.
  uintptr_t pc = beforeInsn ? ip : ip - 1;
  w->pcs[w->n++] = pc;
  if (w->stopAt && w->stopAt->contains(pc)) return _URC_END_OF_STACK;
  return w->n == w->capacity ? _URC_END_OF_STACK : _URC_NO_REASON;
}

#if PROTON_CACHED_CFI

// ---- reading .eh_frame ----------------------------------------------------------------------

// Bytes of CFI, read forward; a read past `end` clears ok and yields zeros.
struct Cursor {
  const uint8_t *p;
  const uint8_t *end;
  bool ok = true;

  template <typename T>
  T fixed() {
    T v{};
    if (static_cast<size_t>(end - p) < sizeof(T)) {
      ok = false;
      p = end;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      uint8_t b = fixed<uint8_t>();
      if (!ok) return 0;
      if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      b = fixed<uint8_t>();
      if (!ok) return 0;
      if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
};

// DW_EH_PE_* pointer encodings.
constexpr uint8_t kPeOmit = 0xff, kPeIndirect = 0x80;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30;
constexpr uint8_t kPeDatarelSdata4 = 0x3b;

// A pointer encoded as `enc`: its format (low nibble), then its base (pcrel: the field's own
// address; datarel: dataBase). Indirection is left to the caller. false for an encoding we
// do not read (omit, aligned, textrel, funcrel).
bool readEncoded(Cursor &c, uint8_t enc, uintptr_t dataBase, uint64_t *out) {
  if (enc == kPeOmit) return false;
  const uint8_t *field = c.p;
  uint64_t v = 0;
  switch (enc & 0x0f) {  // the format; absptr is 8 bytes on x86-64
    case 0x00:           // absptr
    case 0x04:           // udata8
    case 0x0c:           // sdata8
      v = c.fixed<uint64_t>();
      break;
    case 0x01:  // uleb128
      v = c.uleb();
      break;
    case 0x02:  // udata2
      v = c.fixed<uint16_t>();
      break;
    case 0x03:  // udata4
      v = c.fixed<uint32_t>();
      break;
    case 0x09:  // sleb128
      v = static_cast<uint64_t>(c.sleb());
      break;
    case 0x0a:  // sdata2
      v = static_cast<uint64_t>(int64_t{c.fixed<int16_t>()});
      break;
    case 0x0b:  // sdata4
      v = static_cast<uint64_t>(int64_t{c.fixed<int32_t>()});
      break;
    default:
      return false;
  }
  switch (enc & 0x70) {
    case 0:
      break;
    case kPePcrel:
      v += reinterpret_cast<uintptr_t>(field);
      break;
    case kPeDatarel:
      if (!dataBase) return false;
      v += dataBase;
      break;
    default:
      return false;
  }
  *out = v;
  return c.ok;
}

// What a CIE says that matters to the rules of its FDEs.
struct Cie {
  uint64_t codeAlign = 1;
  int64_t dataAlign = -8;
  uint64_t raColumn = 16;
  uint8_t fdeEncoding = 0;  // absptr unless 'R'
  bool augmentationZ = false;
  bool lsdaWithoutZ = false;
  const uint8_t *program = nullptr;  // initial instructions
  const uint8_t *programEnd = nullptr;
};

// The CIE at `at`; false for one we do not read (64-bit lengths, signal frames, old GNU "eh"
// augmentations, unknown augmentations without 'z'; unknown ones after 'z' are skipped, as
// libgcc does).
bool parseCie(const uint8_t *at, Cie *cie) {
  Cursor c{at, at + 4};
  uint32_t length = c.fixed<uint32_t>();
  if (!c.ok || length == 0 || length == 0xffffffffu) return false;
  c.end = c.p + length;
  if (c.fixed<uint32_t>() != 0) return false;  // a CIE's id is 0 in .eh_frame
  uint8_t version = c.fixed<uint8_t>();
  if (version != 1 && version != 3 && version != 4) return false;
  const char *aug = reinterpret_cast<const char *>(c.p);
  const void *nul = std::memchr(c.p, 0, static_cast<size_t>(c.end - c.p));
  if (!nul) return false;
  c.p = static_cast<const uint8_t *>(nul) + 1;
  if (version == 4 && (c.fixed<uint8_t>() != sizeof(void *) || c.fixed<uint8_t>() != 0))
    return false;
  cie->codeAlign = c.uleb();
  cie->dataAlign = c.sleb();
  cie->raColumn = version == 1 ? c.fixed<uint8_t>() : c.uleb();
  const uint8_t *augEnd = nullptr;
  if (aug[0] == 'z') {
    cie->augmentationZ = true;
    uint64_t len = c.uleb();
    if (!c.ok || len > static_cast<uint64_t>(c.end - c.p)) return false;
    augEnd = c.p + len;
  }
  for (const char *a = aug + cie->augmentationZ; *a; ++a) {
    uint64_t ignored = 0;
    if (*a == 'S') {
      return false;  // a signal frame: the frame above it is not at a call
    } else if (*a == 'R') {
      cie->fdeEncoding = c.fixed<uint8_t>();
    } else if (*a == 'L') {
      cie->lsdaWithoutZ = !cie->augmentationZ;
      c.fixed<uint8_t>();
    } else if (*a == 'P') {
      uint8_t enc = c.fixed<uint8_t>();
      if (!readEncoded(c, enc & ~kPeIndirect, 0, &ignored)) return false;
    } else if (*a == 'B' || *a == 'G') {
      // AArch64 key and tag flags: no data, nothing to do here.
    } else if (augEnd) {
      break;  // 'z' says where the augmentation data ends
    } else {
      return false;  // "eh", or unknown without 'z'
    }
  }
  if (augEnd) c.p = augEnd;
  cie->program = c.p;
  cie->programEnd = c.end;
  return c.ok;
}

// ---- running CFA programs -------------------------------------------------------------------

constexpr uint64_t kRbp = 6, kRsp = 7, kReturnAddress = 16, kNoRegister = ~uint64_t{0};

// How the caller's value of a register is found, as far as this unwinder models it.
enum class RegHow : uint8_t {
  kUnchanged,  // no rule, same_value, or (libgcc's reading) undefined for other than the RA
  kUndefined,
  kAtCfa,  // saved at CFA + offset
  kAtRbp,  // saved at rbp + offset (DW_CFA_expression DW_OP_breg6 offset)
  kOther,  // in another register, another expression, a value rule: not modelled
};

struct RegRule {
  RegHow how = RegHow::kUnchanged;
  int64_t offset = 0;
};

// The one DWARF expression modelled: DW_OP_bregN offset, then optionally DW_OP_deref, N being
// rbp or rsp. Functions that realign the stack (GCC's DRAP) describe their CFA as
// *(rbp - k) and their saved rbp as at rbp + 0 with it.
struct RegisterExpression {
  bool modelled = false;
  uint64_t reg = kNoRegister;
  int64_t offset = 0;
  bool deref = false;
};

RegisterExpression readExpression(Cursor &c) {
  RegisterExpression e;
  uint64_t len = c.uleb();
  if (!c.ok || len > static_cast<uint64_t>(c.end - c.p)) {
    c.ok = false;
    return e;
  }
  Cursor x{c.p, c.p + len};
  c.p += len;
  uint8_t op = x.fixed<uint8_t>();
  if (op != 0x70 + kRbp && op != 0x70 + kRsp) return e;  // DW_OP_breg6, DW_OP_breg7
  e.reg = op - 0x70;
  e.offset = x.sleb();
  if (x.p < x.end) {
    if (x.fixed<uint8_t>() != 0x06) return e;  // DW_OP_deref
    e.deref = true;
  }
  e.modelled = x.ok && x.p == x.end;
  return e;
}

// The rules of one row of the CFI table, for the registers that matter here. remember_state
// and restore_state push and pop all of it, the CFA included, as libgcc does.
struct Row {
  bool cfaIsExpression = false;
  uint64_t cfaRegister = kNoRegister;  // until the CIE defines the CFA
  int64_t cfaOffset = 0;
  RegisterExpression cfaExpression;  // when cfaIsExpression
  RegRule rbp, rsp, ra;
};

struct Interpreter {
  static constexpr int kMaxRemembered = 16;
  Interpreter(const Cie &c, uint64_t site, uint64_t start) : cie(c), target(site), loc(start) {}

  const Cie &cie;
  uint64_t target;               // the call site: run while the location is at or before it
  uint64_t loc;                  // where the program has got to
  const Row *initial = nullptr;  // after the CIE's program: what DW_CFA_restore goes back to
  Row row;
  Row remembered[kMaxRemembered];
  int depth = 0;

  RegRule *rule(uint64_t reg) {
    if (reg == kRbp) return &row.rbp;
    if (reg == kRsp) return &row.rsp;
    if (reg == cie.raColumn) return &row.ra;
    return nullptr;  // a register no rule here depends on
  }
  void set(uint64_t reg, RegHow how, int64_t offset = 0) {
    if (RegRule *r = rule(reg)) *r = RegRule{how, offset};
  }
  // DWARF says restore goes back to the CIE's rule, libgcc makes the register unsaved: where
  // the two differ (a register the CIE gave a rule, such as the return address), not modelled.
  bool restore(uint64_t reg) {
    RegRule *r = rule(reg);
    if (!r) return true;
    const RegRule *before = !initial        ? nullptr
                            : r == &row.rbp ? &initial->rbp
                            : r == &row.rsp ? &initial->rsp
                                            : &initial->ra;
    if (!before || before->how != RegHow::kUnchanged) return false;
    *r = RegRule{};
    return true;
  }
  bool run(const uint8_t *begin, const uint8_t *end);
  bool step(Cursor &c);
};

// Runs the program while the location is at or before the target; false for an instruction
// not modelled or malformed CFI.
bool Interpreter::run(const uint8_t *begin, const uint8_t *end) {
  Cursor c{begin, end};
  while (c.p < c.end && loc <= target)
    if (!step(c) || !c.ok) return false;
  return true;
}

// DW_CFA_* opcodes. The first three keep an operand in their low six bits.
enum CfaOp : uint8_t {
  kAdvanceLoc = 0x40,
  kOffset = 0x80,
  kRestore = 0xc0,
  kNop = 0x00,
  kSetLoc = 0x01,
  kAdvanceLoc1 = 0x02,
  kAdvanceLoc2 = 0x03,
  kAdvanceLoc4 = 0x04,
  kOffsetExtended = 0x05,
  kRestoreExtended = 0x06,
  kUndefined = 0x07,
  kSameValue = 0x08,
  kRegister = 0x09,
  kRememberState = 0x0a,
  kRestoreState = 0x0b,
  kDefCfa = 0x0c,
  kDefCfaRegister = 0x0d,
  kDefCfaOffset = 0x0e,
  kDefCfaExpression = 0x0f,
  kExpression = 0x10,
  kOffsetExtendedSf = 0x11,
  kDefCfaSf = 0x12,
  kDefCfaOffsetSf = 0x13,
  kValOffset = 0x14,
  kValOffsetSf = 0x15,
  kValExpression = 0x16,
  kGnuArgsSize = 0x2e,
  kGnuNegativeOffsetExtended = 0x2f,
};

// One instruction: one flat dispatch over the opcodes. GNU_window_save, vendor and unknown
// opcodes are not modelled.
bool Interpreter::step(Cursor &c) {
  uint8_t op = c.fixed<uint8_t>();
  uint64_t reg = 0, value = 0;
  auto factored = [&](uint64_t unsignedOffset) {
    return static_cast<int64_t>(unsignedOffset) * cie.dataAlign;
  };
  switch (op & 0xc0) {
    case kAdvanceLoc:
      loc += (op & 0x3f) * cie.codeAlign;
      return true;
    case kOffset:
      set(op & 0x3f, RegHow::kAtCfa, factored(c.uleb()));
      return true;
    case kRestore:
      return restore(op & 0x3f);
  }
  switch (op) {
    case kNop:
      return true;
    case kSetLoc:
      if (cie.fdeEncoding & kPeIndirect || !readEncoded(c, cie.fdeEncoding, 0, &value))
        return false;
      loc = value;
      return true;
    case kAdvanceLoc1:
      loc += c.fixed<uint8_t>() * cie.codeAlign;
      return true;
    case kAdvanceLoc2:
      loc += c.fixed<uint16_t>() * cie.codeAlign;
      return true;
    case kAdvanceLoc4:
      loc += c.fixed<uint32_t>() * cie.codeAlign;
      return true;
    case kOffsetExtended:
      reg = c.uleb();
      set(reg, RegHow::kAtCfa, factored(c.uleb()));
      return true;
    case kRestoreExtended:
      return restore(c.uleb());
    case kUndefined:
      set(c.uleb(), RegHow::kUndefined);
      return true;
    case kSameValue:
      set(c.uleb(), RegHow::kUnchanged);
      return true;
    case kRegister:
      reg = c.uleb();
      c.uleb();
      set(reg, RegHow::kOther);
      return true;
    case kRememberState:
      if (depth == kMaxRemembered) return false;
      remembered[depth++] = row;
      return true;
    case kRestoreState:
      if (depth == 0) return false;
      row = remembered[--depth];
      return true;
    case kDefCfa:
      row.cfaRegister = c.uleb();
      row.cfaOffset = static_cast<int64_t>(c.uleb());
      row.cfaIsExpression = false;
      return true;
    case kDefCfaRegister:
      row.cfaRegister = c.uleb();
      row.cfaIsExpression = false;
      return true;
    case kDefCfaOffset:  // an expression CFA ignores it, as in libgcc
      row.cfaOffset = static_cast<int64_t>(c.uleb());
      return true;
    case kDefCfaExpression:
      row.cfaExpression = readExpression(c);
      row.cfaIsExpression = true;
      return true;
    case kExpression: {  // the register is saved at the address the expression computes
      reg = c.uleb();
      RegisterExpression e = readExpression(c);
      bool atRbp = e.modelled && e.reg == kRbp && !e.deref;
      set(reg, atRbp ? RegHow::kAtRbp : RegHow::kOther, e.offset);
      return true;
    }
    case kValExpression:
      reg = c.uleb();
      readExpression(c);
      set(reg, RegHow::kOther);
      return true;
    case kOffsetExtendedSf:
      reg = c.uleb();
      set(reg, RegHow::kAtCfa, c.sleb() * cie.dataAlign);
      return true;
    case kDefCfaSf:
      row.cfaRegister = c.uleb();
      row.cfaOffset = c.sleb() * cie.dataAlign;
      row.cfaIsExpression = false;
      return true;
    case kDefCfaOffsetSf:
      row.cfaOffset = c.sleb() * cie.dataAlign;
      return true;
    case kValOffset:
    case kValOffsetSf:
      reg = c.uleb();
      if (op == kValOffset)
        c.uleb();
      else
        c.sleb();
      set(reg, RegHow::kOther);
      return true;
    case kGnuArgsSize:  // only landing pads use it
      c.uleb();
      return true;
    case kGnuNegativeOffsetExtended:
      reg = c.uleb();
      set(reg, RegHow::kAtCfa, -factored(c.uleb()));
      return true;
    default:
      return false;
  }
}

// ---- rules ----------------------------------------------------------------------------------

// One frame's unwind rule, worked out once per call site. 8 bytes, so that a table slot with
// its key is 16.
struct Rule {
  enum Flag : uint8_t {
    kKnown = 1,        // the slot holds a rule (the table starts zeroed)
    kSupported = 2,    // else: unwind with libgcc
    kOutermost = 4,    // the return address is undefined: the end of the stack
    kCfaFromRbp = 8,   // else from rsp
    kCfaDeref = 16,    // the CFA is the word at register + cfaOffset
    kRbpSaved = 32,    // else rbp is unchanged
    kRbpFromRbp = 64,  // saved at rbp + rbpOffset, else at CFA + rbpOffset
  };
  int32_t cfaOffset;
  int16_t rbpOffset;  // from the CFA, or from rbp with kRbpFromRbp
  int8_t raOffset;    // from the CFA
  uint8_t flags;
};
static_assert(sizeof(Rule) == 8);

Rule unsupported() { return Rule{0, 0, 0, Rule::kKnown}; }

template <typename T>
bool fits(int64_t v) {
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

Rule ruleOfRow(const Row &row) {
  Rule r = unsupported();
  if (row.ra.how == RegHow::kUndefined) {
    r.flags |= Rule::kSupported | Rule::kOutermost;
    return r;
  }
  uint64_t cfaRegister = row.cfaRegister;
  int64_t cfaOffset = row.cfaOffset;
  if (row.cfaIsExpression) {
    if (!row.cfaExpression.modelled) return r;
    cfaRegister = row.cfaExpression.reg;
    cfaOffset = row.cfaExpression.offset;
    if (row.cfaExpression.deref) r.flags |= Rule::kCfaDeref;
  }
  if (row.ra.how != RegHow::kAtCfa || (cfaRegister != kRsp && cfaRegister != kRbp) ||
      row.rsp.how != RegHow::kUnchanged || row.rbp.how == RegHow::kOther ||
      !fits<int32_t>(cfaOffset) || !fits<int8_t>(row.ra.offset) || !fits<int16_t>(row.rbp.offset))
    return r;
  r.cfaOffset = static_cast<int32_t>(cfaOffset);
  r.raOffset = static_cast<int8_t>(row.ra.offset);
  r.flags |= Rule::kSupported;
  if (cfaRegister == kRbp) r.flags |= Rule::kCfaFromRbp;
  if (row.rbp.how == RegHow::kAtCfa || row.rbp.how == RegHow::kAtRbp) {
    r.rbpOffset = static_cast<int16_t>(row.rbp.offset);
    r.flags |= Rule::kRbpSaved;
    if (row.rbp.how == RegHow::kAtRbp) r.flags |= Rule::kRbpFromRbp;
  }
  return r;
}

// The FDE that covers pc, found with the binary-search table of .eh_frame_hdr; nullptr when
// none or the table is not the usual one (datarel sdata4 pairs).
const uint8_t *findFde(const uint8_t *hdr, uintptr_t pc) {
  Cursor c{hdr, hdr + 4};
  uint8_t version = c.fixed<uint8_t>(), framePtrEnc = c.fixed<uint8_t>();
  uint8_t countEnc = c.fixed<uint8_t>(), tableEnc = c.fixed<uint8_t>();
  if (!c.ok || version != 1 || tableEnc != kPeDatarelSdata4) return nullptr;
  c.end = hdr + 4 + 16;  // the two encoded values that follow are at most 8 bytes each
  uint64_t ignored = 0, count = 0;
  uintptr_t base = reinterpret_cast<uintptr_t>(hdr);
  if (!readEncoded(c, framePtrEnc, base, &ignored) || !readEncoded(c, countEnc, base, &count) ||
      (framePtrEnc | countEnc) & kPeIndirect)
    return nullptr;
  const uint8_t *table = c.p;
  auto initial = [&](uint64_t i) {
    int32_t v;
    std::memcpy(&v, table + 8 * i, 4);
    return base + static_cast<intptr_t>(v);
  };
  uint64_t lo = 0, hi = count;  // find the last entry whose initial location <= pc
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (initial(mid) <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return nullptr;
  int32_t fdeOffset;
  std::memcpy(&fdeOffset, table + 8 * (lo - 1) + 4, 4);
  return hdr + fdeOffset;
}

// The rule for the frame whose call site is pc, from the FDE at `fde`.
Rule ruleFromFde(const uint8_t *fde, uintptr_t pc) {
  Cursor c{fde, fde + 4};
  uint32_t length = c.fixed<uint32_t>();
  if (!c.ok || length == 0 || length == 0xffffffffu) return unsupported();
  c.end = c.p + length;
  const uint8_t *ciePointer = c.p;
  uint32_t cieOffset = c.fixed<uint32_t>();
  Cie cie;
  if (cieOffset == 0 || !parseCie(ciePointer - cieOffset, &cie) || cie.lsdaWithoutZ ||
      cie.fdeEncoding & kPeIndirect || cie.raColumn != kReturnAddress)
    return unsupported();
  uint64_t begin = 0, range = 0;
  if (!readEncoded(c, cie.fdeEncoding, 0, &begin) ||
      !readEncoded(c, cie.fdeEncoding & 0x0f, 0, &range) || pc < begin || pc - begin >= range)
    return unsupported();
  if (cie.augmentationZ) {
    uint64_t len = c.uleb();
    if (!c.ok || len > static_cast<uint64_t>(c.end - c.p)) return unsupported();
    c.p += len;
  }
  Interpreter cfa(cie, pc, begin);  // libgcc runs the CIE's program from the start too
  if (!cfa.run(cie.program, cie.programEnd)) return unsupported();
  Row initial = cfa.row;
  cfa.initial = &initial;
  cfa.depth = 0;
  if (!cfa.run(c.p, c.end)) return unsupported();
  return ruleOfRow(cfa.row);
}

// ---- finding .eh_frame_hdr ------------------------------------------------------------------

// glibc 2.35's struct dl_find_object on x86-64, declared here so that Proton builds and
// loads with older glibc (where dlsym finds no _dl_find_object and dl_iterate_phdr serves).
struct FoundObject {
  unsigned long long flags;
  void *mapStart;
  void *mapEnd;
  void *linkMap;
  void *ehFrame;
  unsigned long long reserved[7];
};
#ifdef DLFO_EH_SEGMENT_TYPE
static_assert(sizeof(FoundObject) == sizeof(dl_find_object) &&
              offsetof(FoundObject, ehFrame) == offsetof(dl_find_object, dlfo_eh_frame));
#endif
using FindObject = int (*)(void *, FoundObject *);

// Resolved when Proton is loaded (the loading thread holds the loader's lock then), not on
// first use: a function-local static's guard would be a lock of ours held across dlsym.
const FindObject gFindObject =
    reinterpret_cast<FindObject>(::dlsym(RTLD_DEFAULT, "_dl_find_object"));

struct PhdrSearch {
  uintptr_t pc;
  const void *header = nullptr;
};

int searchModule(dl_phdr_info *info, size_t, void *arg) {
  auto *s = static_cast<PhdrSearch *>(arg);
  const ElfW(Phdr) *ehFrameHdr = nullptr;
  bool holdsPc = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &h = info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + h.p_vaddr;
    if (h.p_type == PT_LOAD && s->pc >= begin && s->pc - begin < h.p_memsz) holdsPc = true;
    if (h.p_type == PT_GNU_EH_FRAME) ehFrameHdr = &h;
  }
  if (!holdsPc) return 0;
  if (ehFrameHdr) s->header = reinterpret_cast<const void *>(info->dlpi_addr + ehFrameHdr->p_vaddr);
  return 1;
}

__attribute__((noinline, cold)) Rule parseRule(uintptr_t pc) {
  const void *hdr = ehFrameHeaderByFindObject(pc);
  if (!hdr && !gFindObject) hdr = ehFrameHeaderByPhdrs(pc);
  const uint8_t *fde = hdr ? findFde(static_cast<const uint8_t *>(hdr), pc) : nullptr;
  return fde ? ruleFromFde(fde, pc) : unsupported();
}

// ---- the walk -------------------------------------------------------------------------------

struct Slot {
  uintptr_t pc;
  Rule rule;
};
static_assert(sizeof(Slot) == 16);

// Per thread: its stack's bounds and its rule table, set up by its first unwind. The table
// (64 KiB) is on the heap, not in TLS, where every thread of a program linked to Proton
// would carry it (glibc takes static TLS out of each thread's stack).
struct ThreadUnwind {
  static constexpr size_t kSlots = 4096;
  static constexpr unsigned kHashShift = 52;  // top 12 bits of the hash pick the slot
  bool setUp = false;
  uintptr_t stackLow = 0, stackHigh = 0;
  Slot *slots = nullptr;  // nullptr when the thread has no usable stack bounds or no memory

  ~ThreadUnwind() { delete[] slots; }

  const Rule &rule(uintptr_t pc) {
    Slot &s = slots[(pc * 0x9e3779b97f4a7c15ull) >> kHashShift];
    if (s.pc != pc || !(s.rule.flags & Rule::kKnown)) s = Slot{pc, parseRule(pc)};
    return s.rule;
  }
  bool readable(uintptr_t at) const {
    return at % 8 == 0 && at >= stackLow && at < stackHigh && stackHigh - at >= 8;
  }
};
static_assert(ThreadUnwind::kSlots == size_t{1} << (64 - ThreadUnwind::kHashShift));

__attribute__((noinline, cold)) void setUpThread(ThreadUnwind &t) {
  t.setUp = true;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void *addr = nullptr;
  size_t size = 0;
  bool known = pthread_attr_getstack(&attr, &addr, &size) == 0 && addr && size;
  pthread_attr_destroy(&attr);
  if (!known) return;
  t.stackLow = reinterpret_cast<uintptr_t>(addr);
  t.stackHigh = t.stackLow + size;
  t.slots = new (std::nothrow) Slot[ThreadUnwind::kSlots]();
}

constexpr size_t kRedo = SIZE_MAX;

// The cached-CFI walk from unwindPcs's frame (its frame pointer: the caller's rbp, then the
// return address, then the caller's stack); kRedo when libgcc must do it instead.
size_t walkCachedCfi(const uintptr_t *frame, uintptr_t *pcs, size_t capacity,
                     const CodeRanges *stopAt) {
  ThreadUnwind *state = ThreadCache<ThreadUnwind>::get();  // none at thread exit
  if (!state) return kRedo;
  ThreadUnwind &t = *state;
  if (!t.setUp) setUpThread(t);
  uintptr_t fp = reinterpret_cast<uintptr_t>(frame);
  if (!t.slots || !t.readable(fp) || !t.readable(fp + 8)) return kRedo;
  auto load = [](uintptr_t at) { return *reinterpret_cast<const uintptr_t *>(at); };
  uintptr_t rbp = load(fp), ra = load(fp + 8), rsp = fp + 16;
  size_t n = 0;
  while (ra != 0) {  // libgcc's end of stack too
    uintptr_t pc = ra - 1;
    pcs[n++] = pc;
    if ((stopAt && stopAt->contains(pc)) || n == capacity) break;
    const Rule &r = t.rule(pc);
    if (!(r.flags & Rule::kSupported)) return kRedo;
    if (r.flags & Rule::kOutermost) break;
    uintptr_t cfa = ((r.flags & Rule::kCfaFromRbp) ? rbp : rsp) + r.cfaOffset;
    if (r.flags & Rule::kCfaDeref) {
      if (!t.readable(cfa)) return kRedo;
      cfa = load(cfa);
    }
    uintptr_t raAt = cfa + r.raOffset;
    uintptr_t rbpAt = ((r.flags & Rule::kRbpFromRbp) ? rbp : cfa) + r.rbpOffset;
    if (cfa <= rsp || !t.readable(raAt)) return kRedo;
    if (r.flags & Rule::kRbpSaved) {
      if (!t.readable(rbpAt)) return kRedo;
      rbp = load(rbpAt);
    }
    ra = load(raAt);
    rsp = cfa;
  }
  return n;
}

UnwindMethod methodFromEnvironment() {
  const char *v = std::getenv("PROTON_NATIVE_UNWINDER");
  return v && std::strcmp(v, "libgcc") == 0 ? UnwindMethod::kLibgcc : UnwindMethod::kCachedCfi;
}

#else  // !PROTON_CACHED_CFI

UnwindMethod methodFromEnvironment() { return UnwindMethod::kLibgcc; }

#endif

// Read when Proton is loaded (no guard on the launch path).
const UnwindMethod gDefaultMethod = methodFromEnvironment();

}  // namespace

UnwindMethod defaultUnwindMethod() { return gDefaultMethod; }

uint64_t cachedCfiFallbacks() { return gFallbacks.load(std::memory_order_relaxed); }

size_t unwindPcs(uintptr_t *pcs, size_t capacity, const CodeRanges *stopAt,
                 UnwindMethod method) noexcept {
  if (capacity == 0) return 0;
#if PROTON_CACHED_CFI
  // Asking for the frame address gives this function a frame pointer: [0] is the caller's
  // rbp, [1] the return address into it.
  if (method == UnwindMethod::kCachedCfi) {
    auto *frame = static_cast<const uintptr_t *>(__builtin_frame_address(0));
    size_t n = walkCachedCfi(frame, pcs, capacity, stopAt);
    if (n != kRedo) return n;
    gFallbacks.fetch_add(1, std::memory_order_relaxed);
  }
#else
  (void)method;
#endif
  LibgccWalk w{pcs, capacity, stopAt, 1};
  _Unwind_Backtrace(&collect, &w);
  return w.n;
}

#if PROTON_CACHED_CFI
const void *ehFrameHeaderByFindObject(uintptr_t pc) {
  FoundObject found{};
  if (!gFindObject || gFindObject(reinterpret_cast<void *>(pc), &found) != 0) return nullptr;
  return found.ehFrame;
}

const void *ehFrameHeaderByPhdrs(uintptr_t pc) {
  PhdrSearch s{pc};
  dl_iterate_phdr(&searchModule, &s);
  return s.header;
}
#else
const void *ehFrameHeaderByFindObject(uintptr_t) { return nullptr; }
const void *ehFrameHeaderByPhdrs(uintptr_t) { return nullptr; }
#endif

}  // namespace proton
