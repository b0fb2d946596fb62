// libFuzzer target for the C++ Hatchet readers (csrc/viewer/hatchet_reader.h), built twice:
// hatchet_json_fuzzer (readHatchetJson) and, with PROTON_FUZZ_MSGPACK=1,
// hatchet_msgpack_fuzzer (readHatchetMsgpack). Any input must give a Status, never a
// crash, sanitizer report or hang; an accepted tree must hold tree_check.h's invariants
// and go through proton-viewer's C++ report.
//
//   build/fuzz/hatchet_json_fuzzer -runs=20000 -seed=1 -dict=fuzz/hatchet_json.dict \
//       fuzz/corpus/hatchet_json
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tree_check.h"
#include "viewer/hatchet_reader.h"

#ifndef PROTON_FUZZ_MSGPACK
#define PROTON_FUZZ_MSGPACK 0
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  proton::viewer::TreeColumns tree;
  proton::Status status = PROTON_FUZZ_MSGPACK ? proton::viewer::readHatchetMsgpack(input, &tree)
                                              : proton::viewer::readHatchetJson(input, &tree);
  if (status.isOk()) {
    proton::fuzz::checkTree(tree, proton::fuzz::knobsFrom(data, size));
  } else {
    PROTON_FUZZ_REQUIRE(!status.message().empty());
  }
  return 0;
}
