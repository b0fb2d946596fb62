// Shared pieces of the proton._C bindings: turning a core Status into the Python exception
// hierarchy, and converting Python metric dicts into core MetricLists.
//
//   throwIfError(manager.activate(id));         // raises proton.SessionError etc.
//   MetricList m = toMetricList(py_dict);        // raises ConfigError on a bad value
//
// Called with the GIL held.
#pragma once

#include <nanobind/nanobind.h>

#include "core/metric.h"
#include "core/status.h"
#include "core/tensor_metric.h"

namespace proton::bindings {

namespace nb = nanobind;

// Creates ProfilerError and its subclasses in module m. Call once at import.
void registerErrors(nb::module_ &m);
// Throws a C++ exception that nanobind translates into the matching Python exception.
void throwIfError(const Status &status);
template <typename T>
T valueOrThrow(Result<T> result) {
  throwIfError(result.status());
  return std::move(result.value());
}

// None or a dict of str -> int | float | str | list of numbers | tensor. Tensors (anything
// with data_ptr, device and dtype) go to `tensors` when on a GPU that a backend records
// (core/tensor_metric.h); other tensors become host values. Without `tensors`, a tensor
// raises ConfigError.
MetricList toMetricList(nb::handle metrics, std::vector<TensorMetric> *tensors = nullptr);
// A tensor metric value: appended to `tensors` (device) or returned as a host value in
// `host` (false: it was a device tensor). Raises ConfigError for a shape or dtype refused.
bool looksLikeTensor(PyObject *value);
bool tensorValue(const char *name, nb::handle value, std::vector<TensorMetric> &tensors,
                 const MetricSpec &spec, MetricValue &host);
// The interned id of a str, cached per str object on this thread (raises if not a str).
StringId internName(nb::handle name);

void bindSession(nb::module_ &m);
void bindScope(nb::module_ &m);
void bindData(nb::module_ &m);
void bindContext(nb::module_ &m);
void bindViewer(nb::module_ &m);
void bindInstrumentation(nb::module_ &m);
void bindFramework(nb::module_ &m);
void bindModuleEvents(nb::module_ &m);

}  // namespace proton::bindings
