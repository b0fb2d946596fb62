// Tensor metrics: a metric whose value is a device tensor (0-d or 1-d, integer or float),
// recorded without a host synchronisation and read back at flush.
//
//   TensorMetric m{MetricSpec::parse("tokens"), DeviceTensor{ptr, 1, TensorDType::kInt64, ...}};
//   MetricTarget where{&session, phase, node};
//   sink->record(m, &where, 1);          // the backend copies it on m.tensor.stream now
//   ...                                  // at flush: decodeTensorValue() -> addMetrics
//
// The core decides where a value belongs (MetricTarget); the GPU backend, through the
// DeviceMetricSink it registers, owns the device memory, the copies and the read-back. The
// value's type is fixed at record time (metricTypeOfTensor): int for a 0-d integer tensor,
// float for a 0-d float tensor, list for a 1-d tensor, so type conflicts are reported when
// the metric is given, not at flush.
//
// Value types; the sink is set once by the backend and is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/capture_context.h"
#include "core/ids.h"
#include "core/metric.h"

namespace proton {

class Session;

enum class TensorDType : uint8_t {
  kInt64 = 0,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kCount
};
size_t tensorDTypeBytes(TensorDType dtype);
bool tensorDTypeIsFloat(TensorDType dtype);

// Where a tensor's bytes live and the stream the copy is ordered on.
struct DeviceTensor {
  uint64_t dataPtr = 0;  // device address of the first element (contiguous)
  uint32_t numel = 1;
  bool list = false;  // 1-d: recorded as a list metric; 0-d: as an int or float
  TensorDType dtype = TensorDType::kInt64;
  int32_t device = 0;
  uint64_t stream = 0;  // the launching (current) stream; 0: the legacy default stream

  size_t bytes() const { return size_t{numel} * tensorDTypeBytes(dtype); }
};

struct TensorMetric {
  MetricSpec spec;
  DeviceTensor tensor;
};

// A value of the metric's type (zero), for type checks when the metric is given.
MetricValue placeholderValue(const DeviceTensor &tensor);
// The value a tensor's bytes (as copied back to the host) stand for.
MetricValue decodeTensorValue(const uint8_t *bytes, const DeviceTensor &tensor);

// Where one recorded value is filed in one session.
struct MetricTarget {
  enum class Kind : uint8_t {
    kNode,      // tree data: added to `node`
    kEvent,     // trace data: added to the phase's event number `event`
    kNewEvent,  // trace data: a new zero-length slice named `eventName` at `timeNs` on the
                // CPU lane of `thread`, with call stack `node` (a value recorded by a replay)
  };
  Session *session = nullptr;
  PhaseId phase;
  NodeId node;
  Kind kind = Kind::kNode;
  uint32_t event = 0;
  StringId eventName;
  uint64_t thread = 0;
  uint64_t timeNs = 0;
};

// Files one decoded value into its target (type conflicts and vanished phases are counted).
void fileTensorValue(const MetricTarget &target, const NamedMetric &metric);

// Implemented by a GPU backend. Called with no Proton lock held, on the thread that gives
// the metric. Every call is noexcept in effect: failures are counted, never thrown.
class DeviceMetricSink {
 public:
  virtual ~DeviceMetricSink() = default;
  using Handle = uint64_t;  // 0: nothing was recorded (counted by the sink)

  // True when the tensor's stream is being captured into a CUDA graph now.
  virtual bool capturing(const DeviceTensor &tensor) = 0;
  // Outside capture: copies the tensor's bytes now, on its stream, into device memory the
  // sink owns. The value is filed into the targets given to bind(), at the next drain;
  // discard() drops it. A handle is bound or discarded exactly once.
  virtual Handle copy(const DeviceTensor &tensor) = 0;
  virtual void bind(Handle handle, const MetricSpec &spec, const MetricTarget *targets,
                    size_t n) = 0;
  virtual void discard(Handle handle) = 0;
  // Inside capture: the copy becomes a node of the graph being captured. Every replay of a
  // graph instantiated from it files the value the tensor holds at that replay, under
  // <replay's launch context>/<captured_at>/<context.names> in the sessions that record
  // at the replay and in `context`.
  virtual void recordCaptured(const TensorMetric &metric, CaptureContext context,
                              StringId sliceName) = 0;
  // Whether the calling thread is capturing a CUDA graph now. Then scalar metrics it gives
  // belong to the graph's replays, as triton.profiler files them: recordCapturedScalars.
  virtual bool threadCapturing() { return false; }
  // Scalar metrics given while the calling thread captures: every replay of a graph
  // instantiated from the capture adds them under <replay's launch context>/<captured_at>/
  // <context.names> (trace: as a slice named sliceName), as recordCaptured does with values.
  virtual void recordCapturedScalars(const MetricList & /*metrics*/, CaptureContext /*context*/,
                                     StringId /*sliceName*/) {}
  // Values copied and not filed yet.
  virtual size_t pending() const = 0;
};

// A tensor metric copied to the device and not yet filed anywhere.
struct PendingTensor {
  TensorMetric metric;
  DeviceMetricSink::Handle handle = 0;
};
// Drops copies that will never be filed, and empties the list.
void discardTensors(std::vector<PendingTensor> &tensors);

void setDeviceMetricSink(DeviceMetricSink *sink);
DeviceMetricSink *deviceMetricSink();

}  // namespace proton
