// Interned stacks made of two others: a worker's own frames under the frames it borrowed, and
// a Python stack followed by the C/C++ frames its interpreter called into (context
// "python,native").
//
//   const PythonStack *s = joinStacks(outer, inner);  // outer's frames, then inner's
//
// Threading: thread-safe. A thread-local direct-mapped cache answers repeated pairs with no
// lock and no allocation; a new pair interns the joined list (python_context.h, one mutex).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "context/python_context.h"

namespace proton {

// outer then inner; either may be null (the other is returned).
const PythonStack *joinStacks(const PythonStack *outer, const PythonStack *inner);

// parent's frames, then frame (parent may be null).
const PythonStack *appendFrame(const PythonStack *parent, StringId frame);

// Files whose frames are a framework's module-call machinery (torch/nn/modules/module.py):
// a module frame entered from a hook splices in after the innermost frame outside them, right
// below the line that called the module. Suffixes of the frame's file; replaces earlier ones.
void setModuleCallFiles(std::vector<std::string> suffixes);
// Frames of stack up to and including its innermost frame outside the module-call files.
size_t callerDepth(const PythonStack *stack);

// The innermost frames of a native stack below its innermost Python interpreter frame (the
// C/C++ code the interpreter called into); the whole stack when no interpreter frame is in it.
const PythonStack *belowInterpreter(const PythonStack *native);

// Whether a native frame name ("function (module+0xoffset)") is CPython's own: its module is
// libpython or a python executable.
bool isInterpreterFrame(std::string_view frame);

}  // namespace proton
