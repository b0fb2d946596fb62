// Intra-kernel instrumentation (backend="instrumentation"): the PTX rewrite that Proton's
// Triton compile step calls, scope tables of loaded kernels, and the per-launch device
// buffers that Triton's launcher asks for through Proton's profile allocator.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>

#include "backends/gpu_backend.h"
#include "backends/instrumentation/ptx_rewrite.h"
#include "bindings/common.h"

namespace proton::bindings {

void bindInstrumentation(nb::module_ &m) {
  m.def(
      "instrument_ptx",
      [](std::string_view ptx, std::string_view mode, uint32_t sharedBytes,
         uint32_t maxSharedBytes) {
        auto config = valueOrThrow(instrumentation::parseInstrumentationMode(mode));
        config.sharedBytes = sharedBytes;
        config.maxSharedBytes = maxSharedBytes;
        instrumentation::RewriteResult r;
        {
          nb::gil_scoped_release release;
          Result<instrumentation::RewriteResult> result = instrumentation::rewritePtx(ptx, config);
          throwIfError(result.status());
          r = std::move(result.value());
        }
        uint32_t shared = r.table.sharedBytes;
        return std::make_tuple(std::move(r.ptx), instrumentation::encodeTable(r.table), shared);
      },
      nb::arg("ptx"), nb::arg("mode"), nb::arg("shared_bytes") = 0, nb::arg("max_shared_bytes") = 0,
      "(instrumented PTX, its scope table as text, the kernel's dynamic shared memory after "
      "the rewrite or 0 when unchanged); ConfigError if the PTX cannot be instrumented. "
      "shared_bytes: what the kernel uses; max_shared_bytes: the most a CTA may have (0: "
      "unknown, no CTA sums).");
  m.def(
      "register_instrumentation_table",
      [](std::string_view text) { throwIfError(registerInstrumentationTable(text)); },
      nb::arg("table"));
  m.def(
      "instrumentation_alloc",
      [](size_t bytes, bool trace, uint64_t stream) {
        uint64_t ptr = 0;
        throwIfError(allocateInstrumentationBuffer(bytes, trace, stream, &ptr));
        return ptr;
      },
      nb::arg("bytes"), nb::arg("trace"), nb::arg("stream"),
      "Device address of the next launch's buffer on this thread; 0 records nothing.");
  m.attr("INSTRUMENTATION_LAYOUT") = instrumentation::kLayoutVersion;
  m.def("set_instrumentation_limits", &setInstrumentationLimits, nb::arg("ring_bytes"),
        nb::arg("max_trace_events"), nb::arg("trace_capacity"));
}

}  // namespace proton::bindings
