#include "backends/cupti/cupti_line_table.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cupti/cupti_pc_translate.h"
#include "core/stats.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {
namespace {

Counter &modulesWithoutLines() {
  static Counter &c = Stats::global().counter("pc_sample_modules_without_line_info");
  return c;
}

std::string tritonCacheDir() {
  if (const char *dir = std::getenv("TRITON_CACHE_DIR"); dir && *dir) return dir;
  if (const char *home = std::getenv("TRITON_HOME"); home && *home)
    return std::string(home) + "/.triton/cache";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.triton/cache";
  return "";
}

bool readFile(const std::string &path, std::vector<char> &out) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  out.clear();
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f)) > 0) out.insert(out.end(), chunk, chunk + n);
  bool ok = !std::ferror(f);
  std::fclose(f);
  return ok && !out.empty();
}

}  // namespace

size_t CubinLineTable::KeyHash::operator()(const Key &k) const noexcept {
  size_t h = std::hash<std::string>{}(k.function);
  h ^= std::hash<uint64_t>{}(k.module) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h ^ (std::hash<uint64_t>{}(k.pcOffset) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

void CubinLineTable::addCubin(const void *cubin, size_t size) {
  if (!cubin || size == 0) return;
  const char *bytes = static_cast<const char *>(cubin);
  std::lock_guard lock(mu_);
  addCubinLocked(std::vector<char>(bytes, bytes + size));
}

void CubinLineTable::addCubinLocked(std::vector<char> bytes) {
  CUpti_GetCubinCrcParams params{};
  params.size = CUpti_GetCubinCrcParamsSize;
  params.cubinSize = bytes.size();
  params.cubin = bytes.data();
  if (api_.getCubinCrc(&params) != CUPTI_SUCCESS) return;
  if (cubins_.count(params.cubinCrc)) return;
  if (cubinLineInfo(bytes.data(), bytes.size()) == CubinLines::kNone) {
    cubins_.emplace(params.cubinCrc, nullptr);  // nothing to keep
    return;
  }
  cubins_.emplace(params.cubinCrc, std::make_shared<const std::vector<char>>(std::move(bytes)));
}

void CubinLineTable::searchTritonCacheLocked(const char *function) {
  std::string root = tritonCacheDir();
  if (root.empty() || !searchedFunctions_.insert(function).second) return;
  DIR *d = opendir(root.c_str());
  if (!d) return;
  std::vector<std::string> candidates;
  std::string file = std::string("/") + function + ".cubin";
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    candidates.push_back(root + "/" + e->d_name + file);
  }
  closedir(d);
  std::vector<char> bytes;
  for (const std::string &path : candidates) {
    if (!readFile(path, bytes)) continue;
    addCubinLocked(std::move(bytes));
    bytes = {};
  }
}

CubinLineTable::Cubin CubinLineTable::cubinLocked(uint64_t module, const char *function) {
  auto it = cubins_.find(module);
  if (it != cubins_.end()) return it->second;
  // Loaded before sampling started: only Triton's cache can still have it (its kernels are
  // plain C names; mangled C++ names come from libraries that keep no cache).
  if (function && std::strncmp(function, "_Z", 2) != 0) searchTritonCacheLocked(function);
  it = cubins_.find(module);
  if (it != cubins_.end()) return it->second;
  modulesWithoutLines().add();
  cubins_.emplace(module, nullptr);
  return nullptr;
}

std::optional<SourceLocation> CubinLineTable::lookupLocked(uint64_t module, const char *function,
                                                           uint64_t pcOffset) {
  if (!function) return std::nullopt;
  Key key{module, pcOffset, function};
  auto cached = lines_.find(key);
  if (cached != lines_.end()) return cached->second;
  std::optional<SourceLocation> result;
  if (Cubin cubin = cubinLocked(module, function)) {
    CUpti_GetSassToSourceCorrelationParams params{};
    params.size = CUpti_GetSassToSourceCorrelationParamsSize;
    params.cubin = cubin->data();
    params.cubinSize = cubin->size();
    params.functionName = function;
    params.pcOffset = pcOffset;
    if (api_.getSassToSourceCorrelation(&params) == CUPTI_SUCCESS) {
      if (params.lineNumber > 0 && params.fileName && params.fileName[0]) {
        std::string file = params.fileName;
        if (file[0] != '/' && params.dirName && params.dirName[0])
          file = std::string(params.dirName) + "/" + file;
        result = SourceLocation{file, params.lineNumber};
      }
    }
    std::free(params.fileName);  // allocated by CUPTI for the caller
    std::free(params.dirName);
  }
  lines_.emplace(std::move(key), result);
  return result;
}

std::optional<SourceLocation> CubinLineTable::lookup(uint64_t module, const char *function,
                                                     uint64_t pcOffset) {
  std::lock_guard lock(mu_);
  return lookupLocked(module, function, pcOffset);
}

void CubinLineTable::warm(const PcSample *samples, size_t n) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < n; ++i)
    lookupLocked(samples[i].module, samples[i].function, samples[i].pcOffset);
}

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
