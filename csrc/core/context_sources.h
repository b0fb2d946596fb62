// Which context sources a session combines, parsed from the `context` option: one name or a
// comma-separated list, frames outermost first in the order the program entered them.
//
//   Result<ContextSources> c = parseContextSources("python,torch");
//   c.value().python && c.value().framework;  // Python frames with PyTorch's module and op frames
//
// Sources: "shadow" (the annotated scopes alone: part of every context, so it is never
// combined), "python" (CPython frames), "native" (unwound C/C++ frames), and one name per
// framework adapter ("torch": its module and operator frames, pushed by the adapter).
// Value types; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace proton {

struct ContextSources {
  bool python = false;
  bool native = false;
  bool framework = false;  // frames pushed by a framework adapter (frameworkName)
  std::string frameworkName;

  bool shadowOnly() const { return !python && !native && !framework; }
  // Canonical spelling: "shadow", or the sources joined in the order python, framework, native.
  std::string name() const;
};

// Framework adapters the parser knows by name (ContextSources::frameworkName).
inline constexpr const char *kFrameworkNames[] = {"torch"};

Result<ContextSources> parseContextSources(std::string_view s);

}  // namespace proton
