#include "backends/cupti/cupti_select.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/gpu_backend.h"

namespace proton::cupti {
namespace {

constexpr char kPrefix[] = "libcupti.so";
using GetVersionFn = int (*)(uint32_t *);  // cuptiGetVersion; 0 is CUPTI_SUCCESS
using DriverVersionFn = int (*)(int *);    // cuDriverGetVersion; 0 is CUDA_SUCCESS

bool isDir(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "libcupti.so.13" or "libcupti.so.13.0.48" -> 13; other names -> 0.
int nameMajor(const std::string &name) {
  std::string head = std::string(kPrefix) + ".";
  if (name.rfind(head, 0) != 0) return 0;
  return std::atoi(name.c_str() + head.size());
}

// Reads `size` bytes at `offset`; false past the end.
bool readAt(FILE *f, uint64_t offset, void *out, size_t size) {
  return std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0 &&
         std::fread(out, 1, size, f) == size;
}

// The DT_SONAME of an ELF64 little-endian shared object, or "".
std::string readSoname(const std::string &path) {
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return "";
  Elf64_Ehdr eh;
  if (!readAt(f.get(), 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr))
    return "";
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr dyn;
    if (!readAt(f.get(), eh.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr), &dyn, sizeof(dyn)))
      return "";
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    Elf64_Shdr str;
    if (!readAt(f.get(), eh.e_shoff + uint64_t(dyn.sh_link) * sizeof(Elf64_Shdr), &str,
                sizeof(str)))
      return "";
    for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= dyn.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      if (!readAt(f.get(), dyn.sh_offset + off, &entry, sizeof(entry)) || entry.d_tag == DT_NULL)
        return "";
      if (entry.d_tag != DT_SONAME || entry.d_un.d_val >= str.sh_size) continue;
      char name[64] = {0};
      uint64_t n = std::min<uint64_t>(sizeof(name) - 1, str.sh_size - entry.d_un.d_val);
      if (!readAt(f.get(), str.sh_offset + entry.d_un.d_val, name, n)) return "";
      return name;
    }
  }
  return "";
}

// The path of a libcupti already mapped into this process, or "".
std::string mappedCupti() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *out) {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (baseName(name).rfind(kPrefix, 0) != 0) return 0;
        *static_cast<std::string *>(out) = name;
        return 1;
      },
      &found);
  return found;
}

// Files in `dir` that may be a CUPTI of `major` (0: any), most specific name first.
std::vector<std::string> filesIn(const std::string &dir, int major) {
  std::vector<std::string> exact, versioned, generic;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind(kPrefix, 0) != 0) continue;
      int m = nameMajor(name);
      if (name == kPrefix)
        generic.push_back(dir + "/" + name);
      else if (m != 0 && (major == 0 || m == major))
        (name.find('.', sizeof(kPrefix)) == std::string::npos ? exact : versioned)
            .push_back(dir + "/" + name);
    }
    closedir(d);
  }
  std::sort(exact.begin(), exact.end(), std::greater<>());  // libcupti.so.13 before .12
  std::sort(versioned.begin(), versioned.end());
  exact.insert(exact.end(), versioned.begin(), versioned.end());
  exact.insert(exact.end(), generic.begin(), generic.end());
  return exact;
}

std::string majorsText(const std::vector<int> &majors) {
  std::string text;
  for (int m : majors)
    text += (text.empty() ? "" : " and ") + std::string("CUDA ") + std::to_string(m);
  return text.empty() ? "none" : text;
}

template <typename T>
bool contains(const std::vector<T> &v, const T &x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// One search: every candidate goes through tryFile/tryName, which record why one was not used.
class Search {
 public:
  Search() = default;

  // A file on disk; `allowed` are the majors it may have.
  std::optional<CuptiLibrary> tryFile(const std::string &path, const std::vector<int> &allowed) {
    if (!isFile(path)) return std::nullopt;
    int major = sonameCuptiMajor(path);
    if (major == 0) return reject(path, "no libcupti.so.<major> SONAME; not a CUPTI library");
    if (!contains(allowed, major))
      return reject(path, "CUDA " + std::to_string(major) + "'s CUPTI (looking for " +
                              majorsText(allowed) + ")");
    if (!firstOpen(path)) return std::nullopt;
    return open(path, major, false);
  }

  // libcupti.so.<major> through the system loader path.
  std::optional<CuptiLibrary> tryName(int major) {
    std::string name = std::string(kPrefix) + "." + std::to_string(major);
    return open(name, major, true);
  }

  std::optional<CuptiLibrary> tryDir(const std::string &dir, const std::vector<int> &allowed) {
    for (const std::string &file : filesIn(dir, allowed.size() == 1 ? allowed[0] : 0))
      if (auto lib = tryFile(file, allowed)) return lib;
    return std::nullopt;
  }

  std::optional<CuptiLibrary> reject(const std::string &path, const std::string &why) {
    std::string line = "\n  " + path + ": " + why;
    if (tried_.find(line) == std::string::npos) tried_ += line;
    return std::nullopt;
  }

  const std::string &tried() const { return tried_; }

 private:
  // False for a file already opened under another name (a symlink to it).
  bool firstOpen(const std::string &path) {
    char buf[PATH_MAX];
    std::string real = realpath(path.c_str(), buf) ? buf : path;
    if (contains(seenPaths_, real)) return false;
    seenPaths_.push_back(real);
    return true;
  }

  std::optional<CuptiLibrary> open(const std::string &path, int major, bool byName) {
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *err = dlerror();
      return reject(path, byName ? "not on the loader path" : (err ? err : "dlopen failed"));
    }
    CuptiLibrary lib;
    lib.handle = handle;
    lib.major = major;
    auto getVersion = reinterpret_cast<GetVersionFn>(dlsym(handle, "cuptiGetVersion"));
    if (!getVersion || getVersion(&lib.version) != 0) {
      dlclose(handle);
      return reject(path, "not a usable CUPTI (cuptiGetVersion failed)");
    }
    if (cuptiMajorOfVersion(lib.version) != major) {
      dlclose(handle);
      return reject(path, "CUPTI API version " + std::to_string(lib.version) + " is CUDA " +
                              std::to_string(cuptiMajorOfVersion(lib.version)) + "'s, not CUDA " +
                              std::to_string(major) + "'s");
    }
    lib.path = path;
    if (byName) {
      if (std::string real = mappedCupti(); !real.empty()) lib.path = real;
    }
    return lib;
  }

  std::string tried_;
  std::vector<std::string> seenPaths_;
};

int processDriverVersion() {
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return 0;
  auto fn = reinterpret_cast<DriverVersionFn>(dlsym(handle, "cuDriverGetVersion"));
  int version = 0;
  if (!fn || fn(&version) != 0) version = 0;
  return version;  // libcuda stays loaded: the backend opens it next
}

}  // namespace

std::vector<int> builtCuptiMajors() {
  std::vector<int> majors;
#ifdef PROTON_HAS_CUPTI12
  majors.push_back(12);
#endif
#ifdef PROTON_HAS_CUPTI13
  majors.push_back(13);
#endif
  return majors;
}

int cuptiMajorOfVersion(uint32_t apiVersion) {
  return apiVersion >= 10000 ? static_cast<int>(apiVersion / 10000) : 12;
}

int sonameCuptiMajor(const std::string &path) { return nameMajor(readSoname(path)); }

int minimumDriverVersion(int major) { return major * 1000; }

int preferredCuptiMajor(int driverVersion) {
  return driverVersion == 0 || driverVersion >= minimumDriverVersion(13) ? 13 : 12;
}

std::vector<int> cuptiMajorOrder(const CuptiSearch &search, std::string *why) {
  std::vector<int> order;
  for (int major : search.builtMajors) {
    if (search.driverVersion != 0 && search.driverVersion < minimumDriverVersion(major)) {
      if (why)
        *why += "\n  CUDA " + std::to_string(major) + "'s CUPTI left out: the driver runs CUDA " +
                std::to_string(search.driverVersion / 1000) + "." +
                std::to_string(search.driverVersion % 1000 / 10) + " at most";
      continue;
    }
    order.push_back(major);
  }
  int preferred = preferredCuptiMajor(search.driverVersion);
  std::stable_partition(order.begin(), order.end(), [&](int m) { return m == preferred; });
  return order;
}

CuptiSearch CuptiSearch::fromProcess() {
  CuptiSearch s;
  if (const char *env = std::getenv("PROTON_CUPTI_LIB_PATH"); env && *env) s.overridePath = env;
  s.loadedPath = mappedCupti();
  s.dirs = librarySearchDirs();
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v) s.toolkitRoots.push_back(v);
  s.toolkitRoots.push_back("/usr/local/cuda");
  s.driverVersion = processDriverVersion();
  s.builtMajors = builtCuptiMajors();
  return s;
}

Result<CuptiLibrary> findCupti(const CuptiSearch &s) {
  Search search;
  std::string notes;
  auto fail = [&](const std::string &what) -> Result<CuptiLibrary> {
    std::string tried = search.tried() + notes;
    return Status{StatusCode::kUnavailable,
                  "[PROTON] " + what +
                      " Install the NVIDIA CUPTI wheel of your CUDA (pip install "
                      "nvidia-cuda-cupti-cu12, or nvidia-cuda-cupti for CUDA 13) or the CUDA "
                      "toolkit, or set PROTON_CUPTI_LIB_PATH to the library or its directory. "
                      "This build supports " +
                      majorsText(s.builtMajors) + ". Tried:" +
                      (tried.empty() ? std::string("\n  (no candidate found)") : tried)};
  };
  if (!s.loadedPath.empty()) {
    // The one CUPTI this process may use.
    if (!s.overridePath.empty()) {
      char a[PATH_MAX], b[PATH_MAX];
      bool same = realpath(s.overridePath.c_str(), a) && realpath(s.loadedPath.c_str(), b) &&
                  std::strcmp(a, b) == 0;
      if (!same)
        search.reject(s.overridePath, "PROTON_CUPTI_LIB_PATH ignored: " + s.loadedPath +
                                          " is already loaded in this process");
    }
    if (auto lib = search.tryFile(s.loadedPath, s.builtMajors)) return *lib;
    return fail("A CUPTI library Proton cannot use is already loaded in this process (" +
                s.loadedPath + "), and a process can use only one.");
  }
  if (!s.overridePath.empty()) {
    if (!isDir(s.overridePath)) {
      if (auto lib = search.tryFile(s.overridePath, s.builtMajors)) return *lib;
    } else {
      std::vector<int> majors = s.builtMajors;  // the preferred major's file first
      std::stable_partition(majors.begin(), majors.end(),
                            [&](int m) { return m == preferredCuptiMajor(s.driverVersion); });
      for (int major : majors)
        if (auto lib = search.tryDir(s.overridePath, {major})) return *lib;
    }
    if (search.tried().empty()) search.reject(s.overridePath, "no libcupti there");
  }
  for (int major : cuptiMajorOrder(s, &notes)) {
    for (const std::string &dir : s.dirs)
      if (auto lib = search.tryDir(dir, {major})) return *lib;
    for (const std::string &root : s.toolkitRoots)
      for (const char *sub : {"/extras/CUPTI/lib64", "/lib64", "/targets/x86_64-linux/lib"})
        if (auto lib = search.tryDir(root + sub, {major})) return *lib;
    if (s.useLoaderPath)
      if (auto lib = search.tryName(major)) return *lib;
  }
  return fail("No usable CUPTI library was found.");
}

Result<CuptiLibrary> processCupti() {
  static std::mutex mu;
  static std::optional<CuptiLibrary> chosen;
  std::lock_guard lock(mu);
  if (chosen) return *chosen;
  Result<CuptiLibrary> result = findCupti(CuptiSearch::fromProcess());
  if (result.isOk()) chosen = result.value();
  return result;
}

}  // namespace proton::cupti
