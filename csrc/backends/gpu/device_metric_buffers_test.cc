// DeviceMetricBuffers' drains through a driver with no GPU (fake_driver.h): which
// values a drain reads back, and that it does so without touching anything a CUDA graph
// capture depends on.
#include "backends/gpu/device_metric_buffers.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backends/gpu/fake_driver.h"
#include "core/session.h"
#include "core/stats.h"

namespace proton::gpu {
namespace {

// The program's tensors, in the fake's device memory past the rings (its first allocations).
constexpr DevicePtr kTensors = 0x100000 + 2 * DeviceMetricBuffers::kRingBytes;
const auto kStream = reinterpret_cast<Stream>(0x7777);

DriverResult tensorContext(Context *context, DevicePtr) {
  *context = fake::kOther;
  return kSuccess;
}

Driver tensorDriver() {
  fake::reset(fake::kOther);
  fake::ringMemory.assign(2 * DeviceMetricBuffers::kRingBytes + 4096, 0);
  fake::copiedBytes.clear();
  Driver driver = fake::driver();
  driver.pointerGetContext = tensorContext;
  return driver;
}

// Buffers reading back through the fake driver into one tree session's "scope" node.
struct Buffers {
  Buffers() : driver(tensorDriver()), tree{SessionId{80}, SessionOptions{}} {
    buffers.setDriver(&driver, [] {});
    node = tree.child(PhaseId{0}, kRootNode, S("scope"));
  }
  // A 0-d int64 tensor holding `value` (tensor number `i`), given now and bound to the node.
  void give(int64_t value, size_t i) {
    std::memcpy(fake::ringMemory.data() + (kTensors - 0x100000) + 8 * i, &value, 8);
    DeviceTensor tensor;
    tensor.dataPtr = kTensors + 8 * i;
    tensor.stream = reinterpret_cast<uint64_t>(kStream);
    DeviceMetricSink::Handle handle = buffers.copy(tensor);
    ASSERT_NE(handle, 0u);
    MetricTarget target{&tree, PhaseId{0}, node};
    buffers.bind(handle, MetricSpec::parse("tokens"), &target, 1);
  }
  // A flush that synchronised `synced` (the buffers' context, unless said otherwise).
  void flush(const std::vector<Context> &synced = {fake::kOther}) {
    buffers.beforeSync();
    buffers.drain(synced);
  }
  double tokens() { return metric(tree, node, "tokens"); }

  Driver driver;
  DeviceMetricBuffers buffers;
  Session tree;
  NodeId node;
};

// A synchronous copy runs on the legacy stream, which waits for every blocking stream (one
// being captured among them) and is refused inside a global-mode capture: the read-back is an
// asynchronous copy on the ring's own non-blocking stream, in relaxed capture mode.
TEST(DeviceMetricBuffers, ADrainReadsBackOnItsOwnStreamInRelaxedCaptureMode) {
  Buffers b;
  b.give(3, 0);
  b.give(4, 1);
  b.flush();
  EXPECT_EQ(b.tokens(), 7.0);
  EXPECT_EQ(b.buffers.pending(), 0u);
  EXPECT_EQ(fake::legacyCopies, 0u);
  EXPECT_EQ(fake::ownStreams, 1u);
  EXPECT_TRUE(fake::syncedStreams.empty());  // the program's streams are not waited for
  ASSERT_EQ(fake::modesAtSync.size(), 1u);   // its own stream is, once
  EXPECT_EQ(fake::modesAtSync[0], CaptureMode::kRelaxed);
  EXPECT_EQ(fake::captureMode, CaptureMode::kGlobal);  // restored
}

// Values are copied by the driver's copy kernel where it has one (a launch the core files as
// <metric>), and by a plain copy where that kernel fails; the values read back are the same.
size_t kernelCopies = 0;
bool kernelCopyFails = false;
DriverResult kernelCopy(DevicePtr to, DevicePtr from, size_t bytes, Stream stream) {
  ++kernelCopies;
  if (kernelCopyFails) return fake::kLaunchFailed;
  return fake::copyAsync(to, from, bytes, stream);
}

TEST(DeviceMetricBuffers, ValuesAreCopiedByTheCopyKernelOrAPlainCopyWhereItFails) {
  Buffers b;
  b.driver.copyKernelAsync = kernelCopy;
  kernelCopies = 0;
  kernelCopyFails = false;
  b.give(3, 0);
  EXPECT_EQ(kernelCopies, 1u);
  EXPECT_EQ(fake::asyncCopies, 1u);  // the kernel's own (the fake copies through copyAsync)
  kernelCopyFails = true;
  b.give(4, 1);
  EXPECT_EQ(kernelCopies, 2u);
  EXPECT_EQ(fake::asyncCopies, 2u);  // the plain copy, after the kernel failed
  b.flush();
  EXPECT_EQ(b.tokens(), 7.0);
}

// A value given after the flush synchronised the contexts may not have landed yet: the drain
// leaves it on the device for the next one, and the ring starts over once nothing is left.
TEST(DeviceMetricBuffers, AValueGivenAfterTheSynchronisationIsReadByTheNextDrain) {
  Buffers b;
  b.give(3, 0);
  b.buffers.beforeSync();
  b.give(40, 1);
  b.buffers.drain({fake::kOther});
  EXPECT_EQ(b.tokens(), 3.0);
  EXPECT_EQ(b.buffers.pending(), 1u);
  EXPECT_EQ(fake::copiedBytes.back(), 8u);  // the part given before the synchronisation
  b.flush();
  EXPECT_EQ(b.tokens(), 43.0);
  EXPECT_EQ(b.buffers.pending(), 0u);
  EXPECT_EQ(fake::copiedBytes.back(), 8u);  // from the value left, not the ring's start
  b.give(500, 2);
  b.flush();
  EXPECT_EQ(b.tokens(), 543.0);
  EXPECT_EQ(fake::copiedBytes.back(), 8u);  // the ring started over: one slot read back
}

// A flush that did not synchronise a context (a CUDA graph was being captured on it) does not
// read its values: they stay, counted, and the next drain after a synchronisation files them.
// The flush learns the buffers' contexts from them: a value may be given in a context where
// no kernel was launched.
TEST(DeviceMetricBuffers, ValuesOfAContextTheFlushDidNotSynchroniseWaitForTheNextDrain) {
  Buffers b;
  Counter &putOff = Stats::global().counter("tensor_metric_reads_put_off_for_captures");
  const uint64_t before = putOff.value();
  EXPECT_TRUE(b.buffers.contexts().empty());
  b.give(3, 0);
  b.give(4, 1);
  EXPECT_EQ(b.buffers.contexts(), std::vector<Context>{fake::kOther});
  b.flush({});
  EXPECT_EQ(b.tokens(), -1.0);
  EXPECT_EQ(b.buffers.pending(), 2u);
  EXPECT_TRUE(fake::copiedBytes.empty());
  EXPECT_EQ(putOff.value(), before + 2);
  b.flush({fake::kPrimary});  // another context synchronised, not theirs
  EXPECT_EQ(b.tokens(), -1.0);
  EXPECT_EQ(putOff.value(), before + 4);
  b.flush();
  EXPECT_EQ(b.tokens(), 7.0);
  EXPECT_EQ(b.buffers.pending(), 0u);
}

// A context being destroyed (cudaDeviceReset) takes the ring's memory and stream with it: its
// values are read back first (after its work finished), and the next value, in a context that
// may have the same handle, goes into a ring of its own.
TEST(DeviceMetricBuffers, AContextBeingDestroyedHasItsValuesReadAndItsRingRetired) {
  Buffers b;
  b.give(3, 0);
  b.give(4, 1);
  const size_t syncs = fake::contextSyncs;
  b.buffers.onContextDestroying(fake::kPrimary);  // not theirs
  EXPECT_EQ(b.tokens(), -1.0);
  b.buffers.onContextDestroying(fake::kOther);
  EXPECT_EQ(fake::contextSyncs, syncs + 1);
  EXPECT_EQ(b.tokens(), 7.0);
  EXPECT_EQ(b.buffers.pending(), 0u);
  EXPECT_TRUE(b.buffers.contexts().empty());
  const size_t allocated = fake::allocated;
  b.give(40, 2);
  EXPECT_EQ(fake::allocated, allocated + DeviceMetricBuffers::kRingBytes);  // a new ring
  EXPECT_EQ(fake::ownStreams, 2u);
  b.flush();
  EXPECT_EQ(b.tokens(), 47.0);
}

}  // namespace
}  // namespace proton::gpu
