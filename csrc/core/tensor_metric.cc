#include "core/tensor_metric.h"

#include <atomic>
#include <cstring>

#include "core/session.h"
#include "core/stats.h"

namespace proton {
namespace {

std::atomic<DeviceMetricSink *> gSink{nullptr};

template <typename T>
T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: normalise the mantissa.
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float bfloatToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

double element(const uint8_t *p, TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kInt64:
      return static_cast<double>(load<int64_t>(p));
    case TensorDType::kInt32:
      return load<int32_t>(p);
    case TensorDType::kInt16:
      return load<int16_t>(p);
    case TensorDType::kInt8:
      return load<int8_t>(p);
    case TensorDType::kUInt8:
      return load<uint8_t>(p);
    case TensorDType::kFloat64:
      return load<double>(p);
    case TensorDType::kFloat32:
      return load<float>(p);
    case TensorDType::kFloat16:
      return halfToFloat(load<uint16_t>(p));
    case TensorDType::kBFloat16:
      return bfloatToFloat(load<uint16_t>(p));
    case TensorDType::kCount:
      break;
  }
  return 0;
}

int64_t integerElement(const uint8_t *p, TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kInt64:
      return load<int64_t>(p);
    case TensorDType::kInt32:
      return load<int32_t>(p);
    case TensorDType::kInt16:
      return load<int16_t>(p);
    case TensorDType::kInt8:
      return load<int8_t>(p);
    case TensorDType::kUInt8:
      return load<uint8_t>(p);
    default:
      return static_cast<int64_t>(element(p, dtype));
  }
}

}  // namespace

size_t tensorDTypeBytes(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kInt64:
    case TensorDType::kFloat64:
      return 8;
    case TensorDType::kInt32:
    case TensorDType::kFloat32:
      return 4;
    case TensorDType::kInt16:
    case TensorDType::kFloat16:
    case TensorDType::kBFloat16:
      return 2;
    case TensorDType::kInt8:
    case TensorDType::kUInt8:
      return 1;
    case TensorDType::kCount:
      break;
  }
  return 0;
}

bool tensorDTypeIsFloat(TensorDType dtype) {
  return dtype == TensorDType::kFloat64 || dtype == TensorDType::kFloat32 ||
         dtype == TensorDType::kFloat16 || dtype == TensorDType::kBFloat16;
}

MetricValue placeholderValue(const DeviceTensor &tensor) {
  if (tensor.list) return std::vector<double>(tensor.numel, 0.0);
  if (tensorDTypeIsFloat(tensor.dtype)) return 0.0;
  return int64_t{0};
}

MetricValue decodeTensorValue(const uint8_t *bytes, const DeviceTensor &tensor) {
  size_t width = tensorDTypeBytes(tensor.dtype);
  if (tensor.list) {
    std::vector<double> values(tensor.numel);
    for (uint32_t i = 0; i < tensor.numel; ++i)
      values[i] = element(bytes + i * width, tensor.dtype);
    return values;
  }
  if (tensorDTypeIsFloat(tensor.dtype)) return element(bytes, tensor.dtype);
  return integerElement(bytes, tensor.dtype);
}

void fileTensorValue(const MetricTarget &target, const NamedMetric &metric) {
  Session &s = *target.session;
  Status status;
  switch (target.kind) {
    case MetricTarget::Kind::kNode:
      status = s.addMetrics(target.phase, target.node, MetricList{metric});
      break;
    case MetricTarget::Kind::kEvent:
      status = s.addEventMetrics(target.phase, target.event, MetricList{metric});
      break;
    case MetricTarget::Kind::kNewEvent: {
      TraceEvent event;
      event.name = target.eventName;
      event.context = target.node;
      event.lane = Lane{Lane::Kind::kCpuThread, 0, target.thread};
      event.beginNs = target.timeNs;
      event.endNs = target.timeNs;
      status = s.addEvent(target.phase, event, MetricList{metric});
      break;
    }
  }
  if (!status.isOk()) dropConflictingMetrics(status, target.eventName);
}

void discardTensors(std::vector<PendingTensor> &tensors) {
  DeviceMetricSink *sink = deviceMetricSink();
  for (PendingTensor &p : tensors)
    if (p.handle && sink) sink->discard(p.handle);
  tensors.clear();
}

void setDeviceMetricSink(DeviceMetricSink *sink) { gSink.store(sink, std::memory_order_release); }
DeviceMetricSink *deviceMetricSink() { return gSink.load(std::memory_order_acquire); }

}  // namespace proton
