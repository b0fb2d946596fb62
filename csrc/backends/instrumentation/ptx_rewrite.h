// PTX rewrite: turns the scope markers that proton.language (or proton/instrument.cuh's
// marker form) leaves in a kernel's PTX into clock reads and stores into a per-launch
// device buffer, and adds one implicit scope around the whole kernel.
//
//   RewriteConfig config = parseInstrumentationMode("proton:tree:warp:...").value();
//   Result<RewriteResult> r = rewritePtx(ptx, config);
//   // r.value().ptx goes on to ptxas; r.value().table describes the buffer layout.
//
// A marker is one inline-assembly line `mov.u32 %rN, 0; // @proton:<K>:<hex path>`, K one of
// E (enter), X (exit), C (exit forced by a crossing pair), U (exit of a scope not open), S (an
// event's start: an enter that marks its scope as an event) and F (an event's end where it was
// not started, in another warp's code: an exit in a trace, whose decoder links the two warps'
// halves; a U in a tree). The
// path is the scope's name and those of its enclosing scopes, joined by '\x1f', hex-encoded.
//
// The buffer is the kernel's last parameter (Triton's profile scratch pointer; the launcher
// passes what Proton's allocator returned). A null pointer turns recording off.
//
// Tree layout (one slot per launch; each recording unit keeps per-scope sums in registers
// and, when it returns, adds them into its own record with reductions to distinct addresses,
// which cost what stores do: warps never wait on each other, and a launch replayed from a
// CUDA graph adds every replay into the same slot; the sums are added up on the GPU when the
// buffers are drained, see backends/cupti/tree_reduce.cu; a slot starts zeroed):
//   slot header, 16 bytes: [ u32 hash | u32 unitBytes | u32 launches | u32 0 ] (hash and
//   unitBytes stored, launches added, by the first recording unit of CTA 0 alone), then per
//   CTA (CTA-linear order), per recording unit, a record of unitBytes = 16 + 16 * scopes:
//   [ u32 unmatched | u32 crossing | u32 recorded = 1 | u32 0 ] then per scope i (0 = the
//   kernel): [ u64 cycles | u32 count | u32 ran = 1 if count else 0 ] (slotBytes = unitBytes *
//   unitsPerCta per CTA; a launch needs 16 + grid * slotBytes)
// Tree with CTA sums (RewriteConfig::ctaSums, where the kernel's shared memory allows): each
//   recording unit writes its record into its own slot in shared memory past the kernel's own
//   (unitsPerCta slots of unitBytes); at the kernel's end all threads meet at a named barrier
//   the kernel does not use, then thread j adds up 8-byte chunk j of the slots and adds it
//   into the CTA's record, so that the CTA's one record is one coalesced reduction, with
//   `recorded` = units summed and each scope's last word = units that ran it (slotBytes =
//   unitBytes). Both kinds of record reduce alike.
// Reduced tree slot (what the GPU reduction, or reduceTreeSlot on the host, makes of one
// launch's slot; kReducedTreeBytes):
//   [ u32 hash | u32 unmatched | u32 crossing | u32 launches ] then kMaxScopes of
//   [ u64 cycles | u64 count | u32 warps | u32 0 ] (a launch's count of a scope may pass 2^32;
//   a record's, one unit's or CTA's, does not)
// Trace layout (per CTA, per recording unit of `unitWarps` warps, in CTA-linear order):
//   unit header, 48 bytes: the CTA's part, stored by the CTA's first recording unit alone
//   (its SM, the time_shift cycles, its globaltimer at its start and return: with that
//   unit's clocks, they place the CTA's units on the GPU's clock; and the table's hash):
//   [ u32 smid | u32 shift | u64 globaltimer0 | u64 globaltimer1 | u32 hash | u32 0 ]
//   then the unit's own part, stored by every recording unit, 16 bytes, one 32-byte sector
//   with its first events:
//   [ u32 events | kTraceUnitReturned | u32 clock1, low 32 bits | u64 clock0 ]
//   then `capacity` events of [ u32 tag = scope << 1 | exit | u32 clock ], written circularly;
//   two markers with no instruction between them (`exit_scope("a"); enter_scope("b")`, or
//   nested `with` blocks) are one event, tag = kPairedEventTag | first tag << 8 | second tag.
// Trace with buffer_type="shared" (RewriteConfig::ctaSums, where the kernel's shared memory
//   allows and every warp leaves through the one plain return): the unit's leader writes its
//   events into the unit's own circular buffer in shared memory past the kernel's own
//   (unitsPerCta buffers of 8 * capacity bytes), and as the unit returns its warp copies them,
//   coalesced, to the same places in its global buffer; the global layout is the one above.
//
// Pure text processing: thread-safe, no vendor headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace proton::instrumentation {

struct RewriteConfig {
  bool trace = false;      // per-warp events (data="trace") instead of on-GPU sums
  bool clock32 = true;     // tree: 32-bit clock deltas (scopes shorter than 2^32 cycles)
  bool timeShift = false;  // subtract the cost of one clock read from every scope
  uint32_t unitWarps = 1;  // warps per recording unit; 0 = the whole CTA
  std::vector<uint32_t> selectedUnits;  // empty: every unit records
  uint32_t capacity = 256;              // trace: events per unit (power of two)
  // buffer_type="shared". Tree: the recording units of a CTA add their sums into shared
  // memory and the CTA's last one stores them, one record per CTA instead of one per unit.
  // Trace: events go to shared memory and are copied out as the unit returns.
  bool ctaSums = false;
  std::string text;  // the mode string this config came from (part of the hash)
  // Per kernel, not in the mode string: the dynamic shared memory the kernel already uses and
  // the most a CTA may have on the target GPU (0: unknown, so no CTA sums).
  uint32_t sharedBytes = 0;
  uint32_t maxSharedBytes = 0;
};

// "proton:<data>:<granularity>:<buffer events>:<selected units or '*'>:<optimizations>",
// the optimizations optionally including "layout<kLayoutVersion>".
Result<RewriteConfig> parseInstrumentationMode(std::string_view mode);

struct ScopeTable {
  std::string kernel;  // the entry's name
  uint32_t hash = 0;   // identifies this table in device buffers
  bool trace = false;
  std::vector<std::string> paths;  // by scope id; 0 is the kernel itself ("")
  uint32_t numWarps = 0;
  uint32_t unitWarps = 1;
  uint32_t unitsPerCta = 1;
  uint32_t capacity = 0;         // trace: events per unit
  uint32_t unitBytes = 0;        // trace: 48 + 8 * capacity; tree: 16 + 16 * scopes
  uint32_t slotBytes = 0;        // bytes per CTA (a tree slot adds kTreeHeaderBytes)
  uint32_t staticUnmatched = 0;  // U markers: exits of scopes never opened
  uint32_t staticCrossing = 0;   // C markers: scopes closed by an outer exit
  uint32_t droppedMarkers = 0;   // markers not recorded: outside the entry function (in a
                                 // function the compiler did not inline) or past kMaxScopes
  std::vector<std::string> droppedScopes;  // the names of those markers' scopes, once each
  uint32_t pairedEvents = 0;               // trace: events that hold two markers (kPairedEventTag)
  uint64_t eventScopes = 0;    // bit i: scope i is an event (proton.language's start_event)
  uint32_t ctaSumsOffset = 0;  // where the CTA's slots (tree) or its units' event buffers
  uint32_t sharedBytes = 0;    // (trace) sit in dynamic shared memory, and the kernel's new
                               // total; 0/0 where records and events go to global memory
};

struct RewriteResult {
  std::string ptx;
  ScopeTable table;
};

// A trace unit: [SM id | time_shift cycles | globaltimer at its start, at its return | table
// hash | 0] (the CTA's first recording unit only), [events written | returned, clock64 at its
// return (low 32 bits) | clock64 at its start] then 8-byte events [tag | clock low 32 bits],
// tag = scope id << 1 | exit. The start and return clocks are the kernel scope.
constexpr uint32_t kTraceUnitHeaderBytes = 48;
constexpr uint32_t kTraceCtaHeaderBytes = 32;
constexpr uint32_t kTraceUnitReturned = 1u << 31;  // in the events word: the unit returned
constexpr uint32_t kPairedEventTag = 1u << 31;
constexpr uint32_t kTreeHeaderBytes = 16;
constexpr uint32_t kTreeUnitHeaderBytes = 16;
constexpr uint32_t kTreeScopeBytes = 16;
constexpr uint32_t kMaxScopes = 64;
// The device-buffer layout above. The mode string carries it ("layout<N>" among the
// optimizations) so that it keys Triton's caches: a binary cached by a Proton with another
// layout is compiled again, never decoded with the wrong layout.
// 3: records may hold a CTA's sums; 4: the same records, a CTA's summed after a barrier (the
// code changed, not the layout: binaries cached with the atomics of 3 are compiled again);
// 5: the same, scope ends no longer zero their clock register in the lanes that do not record;
// 6: a trace unit's kernel scope is its header's two timer pairs, no longer two events;
// 7: a trace unit's SM, shift and globaltimer readings are its CTA's, stored once per CTA;
// 8: two adjacent markers are one trace event (kPairedEventTag); 9: a trace unit's own part
// of its header is 16 bytes, sector-aligned, the hash the CTA's; 10: tree records are added
// (reductions), a unit's scope says it ran it, the slot header counts its launches; 11: event
// markers (S, F) and the table's event scopes (events started in one warp, ended in another).
constexpr uint32_t kLayoutVersion = 11;
constexpr uint32_t kReducedScopeBytes = 24;
constexpr uint32_t kReducedTreeBytes = kTreeHeaderBytes + kReducedScopeBytes * kMaxScopes;

// Fails (kInvalidArgument) on PTX it cannot instrument; the caller then keeps the original.
Result<RewriteResult> rewritePtx(std::string_view ptx, const RewriteConfig &config);

// Serialised form of a table (one line, fields separated by '\t', paths hex-encoded), kept
// in the kernel's metadata so that a binary loaded from a compile cache can be decoded.
std::string encodeTable(const ScopeTable &table);
Result<ScopeTable> decodeTable(std::string_view text);

}  // namespace proton::instrumentation
