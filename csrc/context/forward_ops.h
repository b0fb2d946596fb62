// Forward operators by autograd sequence number: what ties a backward node to the forward
// operator that created it (its module path and name), so that the backward kernels can be
// filed under the forward's module path, then "backward: <operator>".
//
//   ForwardOps::global().record(thread, seq, modulePath, opName);  // forward op starts
//   ForwardOp op;
//   if (ForwardOps::global().find(fwdThread, seq, op)) ...          // backward node starts
//
// A direct-mapped table of kSlots entries by (thread, sequence number): an entry is
// overwritten by a later operator with the same slot, so a backward node run more than kSlots
// forward operators after its own finds nothing (it is filed as "backward: <node name>").
// The innermost operator started with a sequence number wins: a composite operator
// (aten::linear) passes its number to the operator that creates the node (aten::addmm).
//
// Threading: record and find are lock-free and never allocate; each entry is a small seqlock,
// so a find racing a record of the same slot sees either entry whole or nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "context/python_context.h"
#include "core/ids.h"

namespace proton {

struct ForwardOp {
  const PythonStack *modulePath = nullptr;  // module frames open at the operator (may be null)
  StringId name;
  bool emptyBackward = false;  // its backward node is a view too: it launches nothing
};

class ForwardOps {
 public:
  static constexpr size_t kSlots = size_t(1) << 16;
  static ForwardOps &global();

  void record(uint64_t thread, int64_t sequence, const PythonStack *modulePath, StringId name,
              bool emptyBackward = false);
  bool find(uint64_t thread, int64_t sequence, ForwardOp &out) const;

 private:
  struct Slot {
    std::atomic<uint32_t> version{0};  // odd while written
    std::atomic<uint64_t> thread{0};
    std::atomic<int64_t> sequence{-1};
    std::atomic<const PythonStack *> modulePath{nullptr};
    std::atomic<uint32_t> name{0};
    std::atomic<bool> emptyBackward{false};
  };
  static size_t slotOf(uint64_t thread, int64_t sequence);
  std::unique_ptr<std::array<Slot, kSlots>> slots_ = std::make_unique<std::array<Slot, kSlots>>();
};

}  // namespace proton
