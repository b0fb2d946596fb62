// Nanoseconds per warp slice that the intra-kernel decoder files into a trace session, no GPU
// needed: synthetic trace slots shaped like the attention-like kernel of bench/intra_kernel.py
// (64 CTAs of 4 warps, three scopes per loop iteration, 256 events per warp) filed until the
// trace holds its slices, then the same with a tree session beside it. A loop of instrumented
// launches that fills the trace's cap pays this once per kept slice, on the thread that drains.
// Timings are printed, never asserted. Built with the C++ tests:
//
//   cmake --build build/tests --target proton_trace_decode && build/tests/proton_trace_decode
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/instrumentation/intra_decoder.h"
#include "core/session.h"
#include "core/string_table.h"

namespace {

using namespace proton;
using namespace proton::instrumentation;

constexpr uint32_t kCtas = 64, kWarps = 4, kCapacity = 256;

template <typename T>
void put(std::vector<uint8_t> &buf, size_t at, T v) {
  std::memcpy(buf.data() + at, &v, sizeof(T));
}

ScopeTable attentionTable() {
  ScopeTable t;
  t.kernel = "attention";
  t.hash = 0xa77e;
  t.trace = true;
  t.paths = {"", "qk", "softmax", "pv"};
  t.numWarps = kWarps;
  t.unitWarps = 1;
  t.unitsPerCta = kWarps;
  t.capacity = kCapacity;
  t.unitBytes = kTraceUnitHeaderBytes + 8 * kCapacity;
  t.pairedEvents = 1;
  return t;
}

// One launch's slot: every warp ran 64 iterations of qk, softmax, pv (adjacent markers paired
// as the rewrite pairs them) and kept its last 256 events.
std::vector<uint8_t> attentionSlot(const ScopeTable &t) {
  std::vector<uint8_t> slot(size_t{kCtas} * kWarps * t.unitBytes, 0);
  auto paired = [](uint32_t first, uint32_t second) {
    return kPairedEventTag | first << 8 | second;
  };
  for (uint32_t cta = 0; cta < kCtas; ++cta)
    for (uint32_t w = 0; w < kWarps; ++w) {
      size_t at = (size_t{cta} * kWarps + w) * t.unitBytes;
      uint64_t c0 = 1'000'000 + cta * 977;
      if (w == 0) {
        put<uint32_t>(slot, at, cta % 132);
        put<uint64_t>(slot, at + 8, 1'000'000'000 + cta * 500);
        put<uint64_t>(slot, at + 16, 1'000'000'000 + cta * 500 + 40'000);
        put<uint32_t>(slot, at + 24, t.hash);
      }
      std::vector<uint32_t> tags;
      tags.push_back(1 << 1);  // qk enter
      for (int i = 0; i < 64; ++i) {
        tags.push_back(paired(1 << 1 | 1, 2 << 1));  // qk exit, softmax enter
        tags.push_back(paired(2 << 1 | 1, 3 << 1));  // softmax exit, pv enter
        tags.push_back(i < 63 ? paired(3 << 1 | 1, 1 << 1) : (3 << 1 | 1));
      }
      uint32_t n = static_cast<uint32_t>(tags.size());
      uint64_t clock = c0 + 100;
      for (uint32_t j = 0; j < n; ++j, clock += 200) {
        size_t e = at + kTraceUnitHeaderBytes + 8 * (j % kCapacity);
        put<uint32_t>(slot, e, tags[j]);
        put<uint32_t>(slot, e + 4, static_cast<uint32_t>(clock));
      }
      put<uint32_t>(slot, at + 32, n | kTraceUnitReturned);
      put<uint32_t>(slot, at + 36, static_cast<uint32_t>(clock + 100));
      put<uint64_t>(slot, at + 40, c0);
    }
  return slot;
}

// Files launches into the given sessions until the trace is full; returns ns per kept slice.
double nsPerSlice(IntraDecoder &decoder, const ScopeTable &t, const std::vector<uint8_t> &slot,
                  std::vector<Session *> sessions, uint64_t cap, size_t *slicesOut) {
  StringId kernel = StringTable::global().intern(t.kernel);
  std::vector<IntraTarget> targets;
  for (Session *s : sessions)
    targets.push_back({s, PhaseId{0}, s->child(PhaseId{0}, kRootNode, kernel)});
  decoder.setMaxTraceEvents(cap);
  decoder.startAnew();
  auto t0 = std::chrono::steady_clock::now();
  while (!decoder.traceFull())
    decoder.fileTrace(slot.data(), slot.size(), t.unitBytes,
                      IntraLaunch{targets.data(), targets.size(), 0, 5'000'000'000, 1.755});
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  size_t slices = 0;
  sessions.front()->readPhase(PhaseId{0}, [&](const PhaseData &p) { slices = p.events().size(); });
  *slicesOut = slices;
  return ns / static_cast<double>(slices);
}

}  // namespace

int main() {
  ScopeTable t = attentionTable();
  ScopeTables tables;
  tables.add(t);
  std::vector<uint8_t> slot = attentionSlot(t);
  const uint64_t cap = uint64_t{1} << 20;
  for (int round = 0; round < 3; ++round) {
    SessionOptions traceOptions;
    traceOptions.data = DataKind::kTrace;
    {
      IntraDecoder decoder(tables);
      Session trace{SessionId{1}, traceOptions};
      size_t slices = 0;
      double ns = nsPerSlice(decoder, t, slot, {&trace}, cap, &slices);
      std::printf("trace alone:       %8zu slices, %6.1f ns per slice, %6.1f ms in all\n", slices,
                  ns, ns * slices / 1e6);
    }
    {
      IntraDecoder decoder(tables);
      Session trace{SessionId{2}, traceOptions}, tree{SessionId{3}, SessionOptions{}};
      size_t slices = 0;
      double ns = nsPerSlice(decoder, t, slot, {&trace, &tree}, cap, &slices);
      std::printf("trace + tree:      %8zu slices, %6.1f ns per slice, %6.1f ms in all\n", slices,
                  ns, ns * slices / 1e6);
    }
    {
      // What a full ring's drain does on the launching thread: count each slot's slices.
      IntraDecoder decoder(tables);
      const int launches = 16;
      uint64_t slices = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < launches; ++i)
        slices += decoder.countTraceSlices(slot.data(), slot.size(), t.unitBytes);
      double ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      std::printf("counted only:      %8llu slices, %6.1f ns per slice, %6.1f ms in all\n",
                  static_cast<unsigned long long>(slices), ns / static_cast<double>(slices),
                  ns / 1e6);
    }
  }
  return 0;
}
