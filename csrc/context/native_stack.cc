#include "context/native_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "context/cfi_unwind.h"
#include "core/fork_lock.h"
#include "core/stats.h"
#include "core/string_table.h"

namespace proton {
namespace {

// ---- ELF symbols of one module ------------------------------------------------------------

struct Symbol {
  uintptr_t start = 0;  // run-time address
  uintptr_t size = 0;
  const char *name = nullptr;  // mangled, inside the module's file mapping
};

std::string demangle(const char *name) {
  int status = 0;
  char *out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

// Function symbols of the ELF file at `path`, relocated by `base` (the address dladdr gave
// for the module), sorted by address. .symtab when present (static functions included),
// else .dynsym. Empty when the file cannot be read. The names point into a read-only mapping
// of the file that stays for the life of the process (pages are read only when a name is),
// and are demangled only for the frames looked up: libtorch_cuda.so alone has some 100k.
std::vector<Symbol> readSymbols(const char *path, uintptr_t base) {
  std::vector<Symbol> out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return out;
  }
  size_t size = static_cast<size_t>(st.st_size);
  void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return out;
  const auto *bytes = static_cast<const uint8_t *>(map);
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(bytes);
  auto inside = [&](uint64_t off, uint64_t len) { return off <= size && len <= size - off; };
  bool ok = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            inside(eh->e_shoff, uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr)) &&
            inside(eh->e_phoff, uint64_t{eh->e_phnum} * sizeof(Elf64_Phdr));
  if (ok) {
    // Run-time address = symbol value + bias; a position-independent module is loaded at
    // `base` minus its first segment's (page-aligned) address, a fixed executable at its own.
    uintptr_t bias = 0;
    if (eh->e_type == ET_DYN) {
      const auto *ph = reinterpret_cast<const Elf64_Phdr *>(bytes + eh->e_phoff);
      uint64_t low = UINT64_MAX;
      for (int i = 0; i < eh->e_phnum; ++i)
        if (ph[i].p_type == PT_LOAD) low = std::min<uint64_t>(low, ph[i].p_vaddr);
      if (low == UINT64_MAX) low = 0;
      bias = base - (low & ~uint64_t{0xfff});
    }
    const auto *sh = reinterpret_cast<const Elf64_Shdr *>(bytes + eh->e_shoff);
    for (uint32_t want : {uint32_t{SHT_SYMTAB}, uint32_t{SHT_DYNSYM}}) {
      for (int i = 0; i < eh->e_shnum && out.empty(); ++i) {
        if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum ||
            sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_offset % alignof(Elf64_Sym) != 0)
          continue;
        const Elf64_Shdr &strs = sh[sh[i].sh_link];
        if (!inside(sh[i].sh_offset, sh[i].sh_size) || !inside(strs.sh_offset, strs.sh_size))
          continue;
        const auto *syms = reinterpret_cast<const Elf64_Sym *>(bytes + sh[i].sh_offset);
        size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        const char *names = reinterpret_cast<const char *>(bytes + strs.sh_offset);
        for (size_t k = 0; k < count; ++k) {
          unsigned type = ELF64_ST_TYPE(syms[k].st_info);
          if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[k].st_value == 0 ||
              syms[k].st_name >= strs.sh_size)
            continue;
          const char *name = names + syms[k].st_name;
          if (!std::memchr(name, 0, strs.sh_size - syms[k].st_name)) continue;
          out.push_back(Symbol{bias + syms[k].st_value, syms[k].st_size, name});
        }
      }
      if (!out.empty()) break;
    }
  }
  if (out.empty()) ::munmap(map, size);  // else kept: the names live there
  std::sort(out.begin(), out.end(),
            [](const Symbol &a, const Symbol &b) { return a.start < b.start; });
  return out;
}

// ---- frames -------------------------------------------------------------------------------

enum class FrameKind : uint8_t {
  kUser,
  kLaunchMachinery,  // Proton, CUPTI, CUDA: left out when innermost
  kStartup,          // C library, _start: left out when outermost
};

struct Frame {
  StringId name;
  FrameKind kind = FrameKind::kUser;
};

struct Module {
  std::string path;
  std::string base;  // file name, for frame names
  std::vector<Symbol> symbols;
  bool machinery = false;
  bool startup = false;
};

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool machineryModule(std::string_view file) {
  for (std::string_view p : {"libproton", "libcupti", "libcuda.", "libcudart", "libnvrtc"})
    if (startsWith(file, p)) return true;
  // proton._C (bindings): its frames sit between the interpreter and libproton.
  return startsWith(file, "_C.cpython") || startsWith(file, "_C.abi3");
}

bool machineryFunction(std::string_view fn) {
  for (std::string_view p :
       {"proton::", "proton_", "cuda", "__cuda", "cudart::", "__device_stub", "cuLaunch", "nvtx"})
    if (startsWith(fn, p)) return true;
  return false;
}

// Where the main program is loaded (its program headers lie in its first segment).
uintptr_t mainProgramBase() {
  Dl_info info{};
  void *headers = reinterpret_cast<void *>(getauxval(AT_PHDR));
  if (!headers || !::dladdr(headers, &info)) return 0;
  return reinterpret_cast<uintptr_t>(info.dli_fbase);
}

// Read when this library is loaded (dladdr then runs under the loader's own lock, which the
// loading thread holds), never later from a function-local static: its initialisation guard
// would be a lock held across dladdr.
const uintptr_t gMainBase = mainProgramBase();

bool startupModule(std::string_view file) {
  for (std::string_view p : {"libc.so", "libc-", "libstdc++", "libpthread", "ld-linux"})
    if (startsWith(file, p)) return true;
  return false;
}

// Where a return address lies, as dladdr says. Resolved before Shared::mu is taken: dladdr
// waits for the dynamic loader's lock, which dlopen holds while a library's constructors run,
// and a constructor may launch a kernel (and so ask for a stack) while we hold ours.
struct Place {
  uintptr_t lookup = 0;  // the call instruction (a return address minus one)
  Dl_info info{};
  bool found = false;
};

Place locate(uintptr_t lookup) {
  Place p;
  p.lookup = lookup;
  p.found = ::dladdr(reinterpret_cast<void *>(lookup), &p.info) && p.info.dli_fbase;
  return p;
}

// Names and kinds of frames, cached per address; modules' symbols, read once per module.
// Owned by Shared (under its mutex); it calls nothing that takes the loader's lock.
class Symbolizer {
 public:
  Frame frame(const Place &p) {
    auto it = frames_.find(p.lookup);
    if (it != frames_.end()) return it->second;
    Frame f = make(p);
    frames_.emplace(p.lookup, f);
    return f;
  }

  // The frame of an address seen before, or nullptr.
  const Frame *cached(uintptr_t lookup) const {
    auto it = frames_.find(lookup);
    return it == frames_.end() ? nullptr : &it->second;
  }

  std::string name(const Place &p) { return describe(p).text; }

 private:
  struct Described {
    std::string text;                // "function (module+0xoffset)"
    std::string function;            // demangled; empty when unknown
    const Module *module = nullptr;  // nullptr outside any module
  };

  Described describe(const Place &p) {
    Described d;
    if (!p.found) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "?? (0x%" PRIxPTR ")", p.lookup);
      d.text = buf;
      return d;
    }
    d.module = &module(p.info);
    const Symbol *sym = find(*d.module, p.lookup);
    if (sym)
      d.function = demangle(sym->name);
    else if (p.info.dli_sname)
      d.function = demangle(p.info.dli_sname);
    char off[32];
    std::snprintf(off, sizeof off, "+0x%" PRIxPTR ")",
                  p.lookup - reinterpret_cast<uintptr_t>(p.info.dli_fbase));
    d.text = (d.function.empty() ? std::string("??") : d.function) + " (" + d.module->base + off;
    return d;
  }

  Frame make(const Place &p) {
    Described d = describe(p);
    Frame f;
    f.name = StringTable::global().intern(d.text);
    if (!d.module) return f;
    if (d.module->machinery || machineryFunction(d.function)) {
      f.kind = FrameKind::kLaunchMachinery;
    } else if (d.module->startup || d.function == "_start") {
      f.kind = FrameKind::kStartup;
    }
    return f;
  }

  static const Symbol *find(const Module &m, uintptr_t pc) {
    auto it = std::upper_bound(m.symbols.begin(), m.symbols.end(), pc,
                               [](uintptr_t v, const Symbol &s) { return v < s.start; });
    if (it == m.symbols.begin()) return nullptr;
    --it;
    // A symbol without a size covers up to the next one.
    if (it->size != 0 && pc >= it->start + it->size) return nullptr;
    return &*it;
  }

  const Module &module(const Dl_info &info) {
    uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    auto it = modules_.find(base);
    if (it != modules_.end()) return *it->second;
    auto m = std::make_unique<Module>();
    m->path = info.dli_fname ? info.dli_fname : "";
    std::string_view file = m->path;
    if (size_t slash = file.rfind('/'); slash != std::string_view::npos)
      file = file.substr(slash + 1);
    m->base = file.empty() ? "?" : std::string(file);
    m->machinery = machineryModule(m->base);
    m->startup = startupModule(m->base);
    // The launch machinery's frames are left out by their module: no need for its symbols
    // (dladdr's exported name, if any, serves the rare frame of it that stays). The main
    // program's dli_fname is argv[0] as typed, which may name another file from here.
    if (!m->machinery)
      m->symbols = readSymbols(base == gMainBase ? "/proc/self/exe" : m->path.c_str(), base);
    return *modules_.emplace(base, std::move(m)).first->second;
  }

  std::unordered_map<uintptr_t, Frame> frames_;
  std::unordered_map<uintptr_t, std::unique_ptr<Module>> modules_;
};

// ---- where the interpreter's code lies ----------------------------------------------------

// The executable segments of the modules isInterpreterModule names (libpython, or a python
// executable with the interpreter linked in), as dladdr names them: an unwind for a joined
// stack ends at the first of its frames in them (the frames above are the Python stack's).
CodeRanges interpreterCode() {
  struct Segment {
    uintptr_t begin, end;
  };
  std::vector<Segment> segments;  // every module's executable segments
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *out) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &h = info->dlpi_phdr[i];
          if (h.p_type != PT_LOAD || !(h.p_flags & PF_X)) continue;
          uintptr_t begin = info->dlpi_addr + h.p_vaddr;
          static_cast<std::vector<Segment> *>(out)->push_back({begin, begin + h.p_memsz});
        }
        return 0;
      },
      &segments);
  CodeRanges ranges;
  for (const Segment &seg : segments) {  // named as the symbolizer names them: by dladdr
    Dl_info info{};
    if (ranges.n == CodeRanges::kMax || !::dladdr(reinterpret_cast<void *>(seg.begin), &info) ||
        !info.dli_fname)
      continue;
    std::string_view file = info.dli_fname;
    if (size_t slash = file.rfind('/'); slash != std::string_view::npos)
      file = file.substr(slash + 1);
    if (!isInterpreterModule(file)) continue;
    ranges.begin[ranges.n] = seg.begin;
    ranges.end[ranges.n++] = seg.end;
  }
  return ranges;
}

// Read when this library is loaded, as gMainBase (the interpreter that loads it is there by
// then; a program that loads an interpreter later unwinds whole stacks, cut by name after).
const CodeRanges gInterpreterCode = interpreterCode();

// ---- unwinding and the stack cache ---------------------------------------------------------

struct Unwound {
  // [0] is captureNativeStack itself, then up to kMaxNativeFrames frames, then one more slot
  // that is filled only when the stack is deeper than that.
  static constexpr size_t kCapacity = kMaxNativeFrames + 2;
  uintptr_t pcs[kCapacity];
  size_t n = 0;
  const CodeRanges *stopAt = nullptr;  // the unwind ends at its first frame in these
  bool truncated() const { return n == kCapacity; }
  size_t end() const { return std::min(n, kCapacity - 1); }  // one past the last frame kept
};

// Two independent 64-bit hashes of the addresses: the per-thread cache keys on both, so two
// different stacks would have to collide in 128 bits to be taken for one another.
uint64_t hashPcs(const Unwound &u, uint64_t seed, uint64_t prime) {
  uint64_t h = seed;
  for (size_t i = 0; i < u.n; ++i) {
    h ^= u.pcs[i];
    h *= prime;
    h ^= h >> 29;
  }
  return h ^ u.n;
}

struct Shared {
  std::mutex mu;
  Symbolizer symbols;
  // Addresses -> stack. Keyed by hash; the addresses are compared, so a collision is told
  // apart.
  std::unordered_multimap<uint64_t, std::pair<std::vector<uintptr_t>, const PythonStack *>> byPcs;
};

Shared &shared() {
  static Shared *s = new Shared();  // never destroyed: used from exit handlers
  return *s;
}

const PythonStack *findLocked(Shared &s, const std::vector<uintptr_t> &pcs, uint64_t hash) {
  auto range = s.byPcs.equal_range(hash);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second.first == pcs) return it->second.second;
  return nullptr;
}

const PythonStack *internUnwound(const Unwound &u, uint64_t hash) {
  static Counter &truncated = Stats::global().counter("native_stacks_truncated");
  Shared &s = shared();
  std::vector<uintptr_t> pcs(u.pcs, u.pcs + u.n);
  std::vector<uintptr_t> unknown;
  {
    std::lock_guard lock(s.mu);
    if (const PythonStack *found = findLocked(s, pcs, hash)) return found;
    for (size_t i = 1; i < u.end(); ++i)
      if (!s.symbols.cached(u.pcs[i])) unknown.push_back(u.pcs[i]);
  }
  // Where the new addresses lie, asked of the loader without holding our lock.
  std::vector<Place> places;
  places.reserve(unknown.size());
  for (uintptr_t pc : unknown) places.push_back(locate(pc));
  std::lock_guard lock(s.mu);
  if (const PythonStack *found = findLocked(s, pcs, hash)) return found;  // another thread
  for (const Place &p : places) s.symbols.frame(p);
  // Innermost first, as unwound; index 0 is captureNativeStack itself. Every address has
  // its frame now.
  std::vector<Frame> frames;
  for (size_t i = 1; i < u.end(); ++i) {
    const Frame *f = s.symbols.cached(u.pcs[i]);
    frames.push_back(f ? *f : Frame{});
  }
  size_t inner = 0;
  while (inner < frames.size() && frames[inner].kind == FrameKind::kLaunchMachinery) ++inner;
  size_t outer = frames.size();
  // A thread's outermost frames are its start routine: the C library's, and the C++ library's
  // (which may be linked into libproton itself).
  while (outer > inner && frames[outer - 1].kind != FrameKind::kUser) --outer;
  std::vector<StringId> names;
  if (u.truncated()) {
    truncated.add();
    names.push_back(StringTable::global().intern("[truncated]"));
  }
  for (size_t i = outer; i > inner; --i) names.push_back(frames[i - 1].name);
  const PythonStack *stack = internPythonStack(names);
  s.byPcs.emplace(hash, std::make_pair(std::move(pcs), stack));
  return stack;
}

struct CacheEntry {
  uint64_t hash;
  uint64_t check;  // the second hash
  const PythonStack *stack;
};
constexpr size_t kCacheSize = 64;
thread_local CacheEntry tlsCache[kCacheSize];

}  // namespace

const PythonStack *captureNativeStack(bool toInterpreter) noexcept {
  try {
    Unwound u;
    if (toInterpreter && gInterpreterCode.n) u.stopAt = &gInterpreterCode;
    u.n = unwindPcs(u.pcs, Unwound::kCapacity, u.stopAt, defaultUnwindMethod());
    if (u.n == 0) return nullptr;
    uint64_t hash = hashPcs(u, 0xcbf29ce484222325ull, 0x100000001b3ull);
    uint64_t check = hashPcs(u, 0x9e3779b97f4a7c15ull, 0xff51afd7ed558ccdull);
    CacheEntry &c = tlsCache[hash % kCacheSize];
    if (c.stack && c.hash == hash && c.check == check) return c.stack;
    const PythonStack *stack = internUnwound(u, hash);
    c = CacheEntry{hash, check, stack};
    return stack;
  } catch (...) {
    return nullptr;
  }
}

std::string nativeFrameName(uintptr_t returnAddress) {
  Place p = locate(returnAddress - 1);
  Shared &s = shared();
  std::lock_guard lock(s.mu);
  return s.symbols.name(p);
}

bool isInterpreterModule(std::string_view file) {
  return file.substr(0, 9) == "libpython" || file.substr(0, 6) == "python";
}

bool nativeStacksStopAtInterpreter() { return gInterpreterCode.n > 0; }

void lockNativeStacksForFork() { shared().mu.lock(); }
void unlockNativeStacksAfterFork(bool inChild) { releaseAfterFork(shared().mu, inChild); }

}  // namespace proton
