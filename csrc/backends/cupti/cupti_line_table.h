// CubinLineTable: source lines of sampled PCs, from the cubins of the sampled modules.
//
//   CubinLineTable lines(api);
//   lines.addCubin(module->pCubin, module->cubinSize);    // CUPTI module-loaded callback
//   lines.warm(samples, n);                                // outside the attribution lock
//   std::optional<SourceLocation> at = lines.lookup(crc, "matmul_kernel", 0x1a0);
//
// A PC sample names its module by the cubin's CRC (cuptiGetCubinCrc). Cubins come from the
// module-loaded callback while sampling runs; only those with DWARF line sections are kept.
// A module loaded before sampling started is looked up once in Triton's kernel cache
// ($TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache, else ~/.triton/cache): a file
// <dir>/<function>.cubin whose CRC matches. cuptiGetSassToSourceCorrelation then gives
// file and line per PC; results are cached per (module, function, PC).
//
// Thread-safe (one internal lock; CUPTI calls happen under it).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/cupti/cupti_loader.h"
#include "backends/pc_sample_attributor.h"

namespace proton::cupti {
inline namespace PROTON_CUPTI_ABI {

class CubinLineTable final : public LineTable {
 public:
  explicit CubinLineTable(const CuptiApi &api) : api_(api) {}

  void addCubin(const void *cubin, size_t size);
  // Resolves (and caches) every sample's line, so that later lookups are cache hits.
  void warm(const PcSample *samples, size_t n);
  std::optional<SourceLocation> lookup(uint64_t module, const char *function,
                                       uint64_t pcOffset) override;

 private:
  using Cubin = std::shared_ptr<const std::vector<char>>;
  struct Key {
    uint64_t module;
    uint64_t pcOffset;
    std::string function;
    bool operator==(const Key &) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key &k) const noexcept;
  };

  std::optional<SourceLocation> lookupLocked(uint64_t module, const char *function,
                                             uint64_t pcOffset);
  Cubin cubinLocked(uint64_t module, const char *function);
  void addCubinLocked(std::vector<char> bytes);
  void searchTritonCacheLocked(const char *function);

  const CuptiApi &api_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Cubin> cubins_;  // by CRC; nullptr: no line information
  std::unordered_set<std::string> searchedFunctions_;
  std::unordered_map<Key, std::optional<SourceLocation>, KeyHash> lines_;
};

}  // namespace PROTON_CUPTI_ABI
}  // namespace proton::cupti
