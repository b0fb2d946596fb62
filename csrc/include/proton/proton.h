// proton/proton.h: Proton's host API for C and C++ programs (scopes, metrics, states,
// sessions), without Python. Same core, same sessions and same files as `import proton`.
//
//   proton::start("vector_add");                        // writes vector_add.hatchet
//   { PROTON_SCOPE("step"); kernel<<<g, b>>>(...); }     // kernels filed under ROOT/step
//   proton::finalize();
//
// Build: nvcc app.cu $(proton --cflags) $(proton --ldflags), or in CMake
// find_package(proton CONFIG REQUIRED) + target_link_libraries(app PRIVATE proton::proton).
//
// Under `proton ./app` (CUDA injection), session 0 belongs to the command line: start()
// returns it and finalize() leaves it to be written at exit, so the same program runs with and
// without the launcher. In a Python process that also imports proton, both APIs see the same
// sessions (proton._C loads this same libprotonprof.so).
//
// Threading: every function is thread-safe. Scopes are per thread: a kernel is filed under
// the scopes its launching thread had open. With profiling off, PROTON_SCOPE costs one call
// and one relaxed atomic load. The C functions never throw; they return 0 on success and -1
// on error, with proton_last_error() (per thread) saying why. The C++ functions throw
// proton::Error, except the RAII guards, which never throw (a failed scope call is counted in
// the profile's stats table as api_scope_errors).
#ifndef PROTON_PROTON_H_
#define PROTON_PROTON_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTON_API __attribute__((visibility("default")))

enum proton_metric_kind {
  PROTON_METRIC_INT = 0,
  PROTON_METRIC_DOUBLE = 1,
  PROTON_METRIC_STRING = 2
};

// One user metric. Names take the Python API's suffixes: "flops (exc)", "shape (pty)".
typedef struct proton_metric {
  const char *name;
  int kind;  // enum proton_metric_kind
  int64_t int_value;
  double double_value;
  const char *string_value;
} proton_metric;

// Starts (or re-activates) a session writing <name>.<ext>; context "shadow", data "tree" or
// "trace", backend "" (auto) or "cupti", mode "" or "pcsampling[:interval=N]" or
// "periodic_flushing[:format=F]". NULL means the default. Returns the session id, or -1.
PROTON_API int proton_start(const char *name, const char *context, const char *data,
                            const char *backend, const char *mode);
// session -1: all sessions. format "" or NULL: the data kind's default.
PROTON_API int proton_finalize(int session, const char *format);
PROTON_API int proton_activate(int session);
PROTON_API int proton_deactivate(int session);
PROTON_API int proton_enter_scope(const char *name, const proton_metric *metrics, size_t count);
// name NULL: the innermost scope; otherwise it must match it.
PROTON_API int proton_exit_scope(const char *name, const proton_metric *metrics, size_t count);
PROTON_API int proton_enter_state(const char *name);
PROTON_API int proton_exit_state(void);
// 1 while any session is live (recording or paused).
PROTON_API int proton_profiling_on(void);
// Grows each time profiling turns on after being off (scopes entered before are dropped).
PROTON_API uint64_t proton_generation(void);
// Depth of the calling thread's scopes in the session, or -1.
PROTON_API int proton_depth(int session);
// Why the calling thread's last failed call failed ("" if none). Valid until its next call.
PROTON_API const char *proton_last_error(void);
// The id of the session the `proton` launcher owns in this process (0), or -1 outside it.
PROTON_API int proton_command_line_session(void);

#ifdef __cplusplus
}  // extern "C"

#include <initializer_list>
#include <stdexcept>
#include <string>

namespace proton {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string context = "shadow";
  std::string data = "tree";
  std::string backend = "";
  std::string mode = "";
};

// A metric as written in PROTON_SCOPE_METRICS("name", {{"flops", 2e9}, {"bytes", 4096}}).
struct Metric {
  proton_metric value;
  Metric(const char *name, double v) : value{name, PROTON_METRIC_DOUBLE, 0, v, nullptr} {}
  Metric(const char *name, float v) : Metric(name, static_cast<double>(v)) {}
  Metric(const char *name, int v) : value{name, PROTON_METRIC_INT, v, 0.0, nullptr} {}
  Metric(const char *name, long v) : value{name, PROTON_METRIC_INT, v, 0.0, nullptr} {}
  Metric(const char *name, long long v) : value{name, PROTON_METRIC_INT, v, 0.0, nullptr} {}
  Metric(const char *name, unsigned v) : value{name, PROTON_METRIC_INT, v, 0.0, nullptr} {}
  Metric(const char *name, unsigned long v)
      : value{name, PROTON_METRIC_INT, static_cast<int64_t>(v), 0.0, nullptr} {}
  Metric(const char *name, const char *v) : value{name, PROTON_METRIC_STRING, 0, 0.0, v} {}
};
static_assert(sizeof(Metric) == sizeof(proton_metric), "Metric is a proton_metric");

namespace detail {
inline void check(int rc) {
  if (rc != 0) throw Error(proton_last_error());
}
inline const proton_metric *data(std::initializer_list<Metric> m) {
  return m.size() ? &m.begin()->value : nullptr;
}
}  // namespace detail

inline int start(const std::string &name = "proton", const Options &options = {}) {
  int id = proton_start(name.c_str(), options.context.c_str(), options.data.c_str(),
                        options.backend.c_str(), options.mode.c_str());
  if (id < 0) throw Error(proton_last_error());
  return id;
}
inline void finalize(int session = -1, const std::string &format = "") {
  detail::check(proton_finalize(session, format.c_str()));
}
inline void activate(int session = -1) { detail::check(proton_activate(session)); }
inline void deactivate(int session = -1) { detail::check(proton_deactivate(session)); }
inline void enter_scope(const char *name, std::initializer_list<Metric> metrics = {}) {
  detail::check(proton_enter_scope(name, detail::data(metrics), metrics.size()));
}
inline void exit_scope(const char *name = nullptr, std::initializer_list<Metric> metrics = {}) {
  detail::check(proton_exit_scope(name, detail::data(metrics), metrics.size()));
}
inline void enter_state(const char *name) { detail::check(proton_enter_state(name)); }
inline void exit_state() { detail::check(proton_exit_state()); }
inline int depth(int session = 0) {
  int d = proton_depth(session);
  if (d < 0) throw Error(proton_last_error());
  return d;
}

// RAII scope: entered at construction, exited at destruction (also on exceptions). Never
// throws. A scope entered before profiling (re)started is not exited into the new profile.
class Scope {
 public:
  explicit Scope(const char *name, std::initializer_list<Metric> metrics = {}) noexcept
      : name_(name) {
    if (!proton_profiling_on()) return;
    generation_ = proton_generation();
    entered_ = proton_enter_scope(name, detail::data(metrics), metrics.size()) == 0;
  }
  ~Scope() {
    if (entered_ && proton_generation() == generation_) proton_exit_scope(name_, nullptr, 0);
  }
  Scope(const Scope &) = delete;
  Scope &operator=(const Scope &) = delete;

 private:
  const char *name_;
  uint64_t generation_ = 0;
  bool entered_ = false;
};

// RAII state tag (a non-nesting tag appended to the context while it lives).
class State {
 public:
  explicit State(const char *name) noexcept { proton_enter_state(name); }
  ~State() { proton_exit_state(); }
  State(const State &) = delete;
  State &operator=(const State &) = delete;
};

}  // namespace proton

#define PROTON_CONCAT_INNER_(a, b) a##b
#define PROTON_CONCAT_(a, b) PROTON_CONCAT_INNER_(a, b)
// PROTON_SCOPE("name"): the rest of the enclosing block is a scope.
#define PROTON_SCOPE(name) ::proton::Scope PROTON_CONCAT_(proton_scope_, __LINE__)(name)
// PROTON_SCOPE_METRICS("name", {{"flops", 2e9}, {"bytes", 1 << 20}}): metrics added at entry.
#define PROTON_SCOPE_METRICS(name, ...) \
  ::proton::Scope PROTON_CONCAT_(proton_scope_, __LINE__)(name, __VA_ARGS__)
#define PROTON_STATE(name) ::proton::State PROTON_CONCAT_(proton_state_, __LINE__)(name)

#endif  // __cplusplus
#endif  // PROTON_PROTON_H_
