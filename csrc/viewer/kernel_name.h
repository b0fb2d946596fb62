// Readable kernel names for proton-viewer's tree: a demangled C++ signature without its
// template and parameter lists, as Nsight Systems shortens them; the viewer's one
// implementation (python/proton/viewer/names.py calls it and states the rule), checked
// against tests/golden/kernel_names.tsv.
//
//   std::string shortName;
//   if (shortenKernelName("void ns::k<4, float>(int, float*)", &shortName))
//     ...;  // shortName == "ns::k<...>(...)"
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace proton::viewer {

// True, with the short form in *out, when `name` is a signature that gets shorter; false
// (and *out untouched) when the tree shows `name` as it is.
bool shortenKernelName(std::string_view name, std::string *out);

}  // namespace proton::viewer
