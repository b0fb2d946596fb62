// Session options and their parsing from the strings the Python API accepts.
//
//   Result<SessionOptions> opts = parseSessionOptions("out/run", "shadow", "tree", "", "");
//
// Every parse error lists the allowed values. Value types; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/context_sources.h"
#include "core/rank.h"
#include "core/status.h"

namespace proton {

// kPython and kNative file launches and scopes under call stacks (Python frames, or unwound
// C/C++ frames) and then the annotated scopes; kShadow under the annotated scopes alone.
enum class ContextKind { kShadow, kPython, kNative };
enum class DataKind { kTree, kTrace };
// kAuto: the default backend of the machine's GPU runtime, or none (CPU scopes only).
enum class BackendKind { kAuto, kCupti, kRoctracer, kRocprofiler, kInstrumentation };
enum class OutputFormat { kDefault, kHatchet, kHatchetMsgpack, kChromeTrace };

const char *contextKindName(ContextKind kind);
const char *dataKindName(DataKind kind);
const char *backendKindName(BackendKind kind);
const char *outputFormatName(OutputFormat format);  // also the file extension

// "pcsampling:interval=1000" -> {name "pcsampling", options {interval: 1000}}.
struct ModeSpec {
  std::string name;  // "" = default
  std::map<std::string, std::string> options;
  std::string toString() const;
};

struct SessionOptions {
  std::string path;  // without extension; "" or "-" = stdout
  ContextKind context =
      ContextKind::kShadow;  // the call stack kind: python when listed, else native
  ContextSources sources;    // everything `context` lists
  DataKind data = DataKind::kTree;
  BackendKind backend = BackendKind::kAuto;
  ModeSpec mode;
  RankInfo rank;  // filled by the session manager from the environment; names the files
};

Result<ContextKind> parseContextKind(std::string_view s);
Result<DataKind> parseDataKind(std::string_view s);
Result<BackendKind> parseBackendKind(std::string_view s);    // "" -> kAuto
Result<OutputFormat> parseOutputFormat(std::string_view s);  // "" -> kDefault
Result<ModeSpec> parseModeSpec(std::string_view s);

Result<SessionOptions> parseSessionOptions(std::string_view path, std::string_view context,
                                           std::string_view data, std::string_view backend,
                                           std::string_view mode);

// The format finalize() writes when asked for kDefault, and whether a data kind can write it.
OutputFormat defaultFormat(DataKind data);
Status checkFormatSupported(DataKind data, OutputFormat format);

}  // namespace proton
