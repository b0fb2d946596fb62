#include "backends/cupti/intra_kernel_buffers.h"

#include <gtest/gtest.h>

#include <string>

#include "core/session.h"
#include "core/string_table.h"

namespace proton::cupti {
namespace {

StringId S(const std::string &s) { return StringTable::global().intern(s); }

SessionOptions instrumentation() {
  SessionOptions options;
  options.backend = BackendKind::kInstrumentation;
  return options;
}

// A launch's intra-kernel data goes under the frame kernel tracing files the kernel at: the
// launch metadata's name for entries that hook="triton" named, the kernel's own otherwise.
// (Before, a named entry's data went to the launch's context itself, beside the kernel.)
TEST(IntraKernelTargets, NamedLaunchesFileUnderTheMetadataNameOthersUnderTheKernel) {
  Session hooked{SessionId{21}, instrumentation()};
  Session plain{SessionId{22}, instrumentation()};
  NodeId scope = hooked.child(PhaseId{0}, kRootNode, S("thread0"));
  LaunchEntry entries[] = {{&hooked, scope, PhaseId{0}, /*named=*/true},
                           {&plain, kRootNode, PhaseId{0}, /*named=*/false}};
  instrumentation::IntraTarget out[2];
  ASSERT_EQ(kernelTargets(entries, 2, "hooked_kernel", S("named_100000"), out), 2u);
  EXPECT_EQ(out[0].session, &hooked);
  EXPECT_EQ(out[0].kernelNode, hooked.child(PhaseId{0}, scope, S("named_100000")));
  EXPECT_NE(out[0].kernelNode, scope);
  EXPECT_EQ(out[1].session, &plain);
  EXPECT_EQ(out[1].kernelNode, plain.child(PhaseId{0}, kRootNode, S("hooked_kernel")));
  // A named entry without a name (a kernel built with proton/instrument.cuh) takes the
  // kernel's, demangled as kernel tracing shows it.
  ASSERT_EQ(kernelTargets(entries, 1, "_Z6kernelPf", StringId{}, out), 1u);
  EXPECT_EQ(out[0].kernelNode, hooked.child(PhaseId{0}, scope, S("kernel(float*)")));
}

// A kernel-tracing session beside an instrumentation session gets none of the intra-kernel
// data: its profile is the one it would write alone.
TEST(IntraKernelTargets, KernelTracingSessionsBesideAnInstrumentationSessionGetNothing) {
  Session tracing{SessionId{23}, SessionOptions{}};
  Session instrumenting{SessionId{24}, instrumentation()};
  LaunchEntry entries[] = {{&tracing, kRootNode, PhaseId{0}, false},
                           {&instrumenting, kRootNode, PhaseId{0}, false}};
  instrumentation::IntraTarget out[2];
  ASSERT_EQ(kernelTargets(entries, 2, "sv", StringId{}, out), 1u);
  EXPECT_EQ(out[0].session, &instrumenting);
}

}  // namespace
}  // namespace proton::cupti
