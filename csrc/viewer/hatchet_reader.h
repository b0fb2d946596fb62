// Fast readers of Proton's Hatchet tree profiles (JSON and MessagePack) into TreeColumns.
//
//   TreeColumns tree;
//   Status s = readHatchetFile("run.hatchet", /*msgpack=*/false, &tree);
//   if (!s.isOk()) { /* not readable here: the Python reader takes over and explains */ }
//
// They accept the layout Proton writes, `[root, devices, ...]` with nodes
// {"frame": {"name": str, ...}, "metrics": {str: int | float | str}, "children": [...]},
// in any key order except that a node's metrics come before its children (so columns are
// in pre-order), and each node's metric keys in the order they were first seen. Anything
// else (invalid, truncated or corrupt input, other shapes, values Python would not read
// the same way) is a non-ok Status, never a crash: the caller then uses the general reader.
// Stateless functions; safe to call from several threads on different outputs.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "viewer/tree_columns.h"

namespace proton::viewer {

Status readHatchetJson(std::string_view data, TreeColumns *out);
Status readHatchetMsgpack(std::string_view data, TreeColumns *out);
// Reads the whole file, then one of the above.
Status readHatchetFile(const std::string &path, bool msgpack, TreeColumns *out);

}  // namespace proton::viewer
