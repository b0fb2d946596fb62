#include "core/options.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace proton {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

template <typename Enum, size_t N>
Result<Enum> parseEnum(std::string_view what, std::string_view value,
                       const std::array<std::pair<const char *, Enum>, N> &table) {
  std::string key = lower(value);
  std::string allowed;
  for (const auto &[name, e] : table) {
    if (key == name) return e;
    if (name[0] == '\0') continue;
    allowed += allowed.empty() ? "" : ", ";
    allowed += name;
  }
  return invalidArgument("[PROTON] Unknown " + std::string(what) + ": '" + std::string(value) +
                         "'. Allowed values: " + allowed);
}

constexpr std::array<std::pair<const char *, ContextKind>, 3> kContexts{{
    {"shadow", ContextKind::kShadow},
    {"python", ContextKind::kPython},
    {"native", ContextKind::kNative},
}};
constexpr std::array<std::pair<const char *, DataKind>, 2> kData{{
    {"tree", DataKind::kTree},
    {"trace", DataKind::kTrace},
}};
constexpr std::array<std::pair<const char *, BackendKind>, 5> kBackends{{
    {"", BackendKind::kAuto},
    {"cupti", BackendKind::kCupti},
    {"roctracer", BackendKind::kRoctracer},
    {"rocprofiler", BackendKind::kRocprofiler},
    {"instrumentation", BackendKind::kInstrumentation},
}};
constexpr std::array<std::pair<const char *, OutputFormat>, 4> kFormats{{
    {"", OutputFormat::kDefault},
    {"hatchet", OutputFormat::kHatchet},
    {"hatchet_msgpack", OutputFormat::kHatchetMsgpack},
    {"chrome_trace", OutputFormat::kChromeTrace},
}};
// Mode names any backend may be asked for; whether the chosen backend supports one is
// checked when the session starts.
constexpr std::array<std::pair<const char *, int>, 6> kModes{{
    {"", 0},
    {"default", 0},
    {"pcsampling", 0},
    {"periodic_flushing", 0},
    {"mma", 0},
    {"instrumentation", 0},
}};

template <typename Enum, size_t N>
const char *enumName(Enum e, const std::array<std::pair<const char *, Enum>, N> &table) {
  for (const auto &[name, v] : table)
    if (v == e) return name;
  return "?";
}

}  // namespace

const char *contextKindName(ContextKind kind) { return enumName(kind, kContexts); }
const char *dataKindName(DataKind kind) { return enumName(kind, kData); }
const char *backendKindName(BackendKind kind) {
  return kind == BackendKind::kAuto ? "none" : enumName(kind, kBackends);
}
const char *outputFormatName(OutputFormat format) { return enumName(format, kFormats); }

Result<ContextKind> parseContextKind(std::string_view s) {
  return parseEnum("context source", s, kContexts);
}
Result<DataKind> parseDataKind(std::string_view s) { return parseEnum("data", s, kData); }
Result<BackendKind> parseBackendKind(std::string_view s) {
  return parseEnum("backend", s, kBackends);
}
Result<OutputFormat> parseOutputFormat(std::string_view s) {
  return parseEnum("output format", s, kFormats);
}

std::string ModeSpec::toString() const {
  // The default mode's name is kept empty; with options it is spelled out ("default:...").
  std::string out = name.empty() && !options.empty() ? "default" : name;
  for (const auto &[k, v] : options) out += ":" + k + "=" + v;
  return out;
}

Result<ModeSpec> parseModeSpec(std::string_view s) {
  ModeSpec spec;
  size_t colon = s.find(':');
  Result<int> known = parseEnum("mode", s.substr(0, colon), kModes);
  if (!known.isOk()) return known.status();
  spec.name = lower(s.substr(0, colon));
  if (spec.name == "default") spec.name.clear();
  while (colon != std::string_view::npos) {
    s.remove_prefix(colon + 1);
    colon = s.find(':');
    std::string_view item = s.substr(0, colon);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return invalidArgument("[PROTON] Malformed mode option '" + std::string(item) +
                             "': expected key=value, as in 'pcsampling:interval=1000'");
    }
    spec.options[lower(item.substr(0, eq))] = std::string(item.substr(eq + 1));
  }
  return spec;
}

Result<SessionOptions> parseSessionOptions(std::string_view path, std::string_view context,
                                           std::string_view data, std::string_view backend,
                                           std::string_view mode) {
  SessionOptions opts;
  opts.path = std::string(path);
  Result<ContextSources> c = parseContextSources(context);
  if (!c.isOk()) return c.status();
  Result<DataKind> d = parseDataKind(data);
  if (!d.isOk()) return d.status();
  Result<BackendKind> b = parseBackendKind(backend);
  if (!b.isOk()) return b.status();
  Result<ModeSpec> m = parseModeSpec(mode);
  if (!m.isOk()) return m.status();
  opts.sources = c.value();
  opts.context = opts.sources.python   ? ContextKind::kPython
                 : opts.sources.native ? ContextKind::kNative
                                       : ContextKind::kShadow;
  opts.data = d.value();
  opts.backend = b.value();
  opts.mode = m.value();
  return opts;
}

OutputFormat defaultFormat(DataKind data) {
  return data == DataKind::kTrace ? OutputFormat::kChromeTrace : OutputFormat::kHatchet;
}

Status checkFormatSupported(DataKind data, OutputFormat format) {
  bool traceFormat = format == OutputFormat::kChromeTrace;
  if ((data == DataKind::kTrace) == traceFormat || format == OutputFormat::kDefault) return {};
  return invalidArgument(std::string("[PROTON] Output format '") + outputFormatName(format) +
                         "' cannot be written for data='" + dataKindName(data) + "'. Use " +
                         (traceFormat ? "'hatchet' or 'hatchet_msgpack'" : "'chrome_trace'") +
                         " or data='" + (traceFormat ? "trace" : "tree") + "'");
}

}  // namespace proton
