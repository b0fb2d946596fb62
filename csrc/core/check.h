// PROTON_CHECK: fail fast on a broken invariant, with file and line.
//
//   PROTON_CHECK(node.value < nodes_.size());
//
// Used only for programming errors inside the profiler, never for user input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PROTON_CHECK(cond)                                                                      \
  do {                                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                                         \
      std::fprintf(stderr, "[PROTON] internal check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                      \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

#define PROTON_COLD __attribute__((cold, noinline))
#define PROTON_LIKELY(x) __builtin_expect(!!(x), 1)
#define PROTON_UNLIKELY(x) __builtin_expect(!!(x), 0)
