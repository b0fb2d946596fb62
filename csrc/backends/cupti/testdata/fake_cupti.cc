// A stand-in libcupti for the selector's tests (cupti_select_test.cc): built twice, as
// libcupti.so.12 (SONAME libcupti.so.12, API version 28) and libcupti.so.13 (130001). It
// exports the one function the selector calls before choosing; nothing else.
#include <cstdint>

#ifndef PROTON_FAKE_CUPTI_VERSION
#error "PROTON_FAKE_CUPTI_VERSION: the CUPTI API version this stand-in reports"
#endif

extern "C" __attribute__((visibility("default"))) int cuptiGetVersion(uint32_t *version) {
  *version = PROTON_FAKE_CUPTI_VERSION;
  return 0;
}
