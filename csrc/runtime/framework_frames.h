// Framework frames: what a framework adapter (python/proton/frameworks/) pushes on the calling
// thread's context for context="torch" and its combinations: module frames from its module
// hooks, operator and backward-node frames from its C++ observer (proton/framework.h).
//
//   enterModuleFrame(strings.intern("encoder (TransformerEncoder)"));  // module hook, Python
//   frameworkApi()->enter_op("aten::addmm", PROTON_OP_FORWARD, seq, thread, 0);  // observer
//   ... kernels launched now go to .../encoder (TransformerEncoder)/aten::addmm/<kernel>
//   frameworkApi()->exit_op();
//   exitModuleFrame();
//
// A forward operator with an autograd sequence number is remembered with the module path it
// ran under (context/forward_ops.h); the backward node of that number is filed under the same
// module path, then "backward: <operator>".
//
// Threading: thread-safe; enter and exit pair on one thread, innermost first. No shared lock
// and no allocation per call in steady state (names are interned once per thread and name).
#pragma once

#include <cstdint>

#include "core/ids.h"
#include "proton/framework.h"

namespace proton {

// ScopeFrame::framework.
enum class FrameworkFrame : uint8_t {
  kModule = 1,          // a module's forward (its path is remembered for backward ties)
  kOperator = 2,        // an operator or a named range
  kBackwardModule = 3,  // the forward module path a backward node is filed under
  kBackward = 4,        // "backward: <operator>"
};

const proton_framework_api *frameworkApi();

// Module frames from a framework's module hooks (Python). Pairs with exitModuleFrame even when
// no session wanted the frame.
void enterModuleFrame(StringId name);
void exitModuleFrame();
// Frames of one compiled kernel (a module path and the operators fused into it), pushed and
// popped together around its launch.
void enterFrames(const StringId *names, size_t n);
void exitFrames();

}  // namespace proton
