// Clocks used by the core: monotonic nanoseconds for durations and trace timestamps,
// wall-clock nanoseconds for the profile's start time. Thread-safe.
#pragma once

#include <cstdint>
#include <ctime>

namespace proton {

inline uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t wallClockNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace proton
