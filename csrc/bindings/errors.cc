#include <Python.h>

#include <array>
#include <stdexcept>
#include <string>

#include "bindings/common.h"

namespace proton::bindings {
namespace {

struct ProtonException : std::runtime_error {
  ProtonException(StatusCode c, const std::string &m) : std::runtime_error(m), code(c) {}
  StatusCode code;
};

// Indexed by StatusCode.
std::array<PyObject *, size_t(StatusCode::kInternal) + 1> exceptionTypes{};

PyObject *newException(nb::module_ &m, const char *name, PyObject *bases, const char *doc) {
  std::string qualified = std::string("proton._C.") + name;
  PyObject *type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

}  // namespace

void registerErrors(nb::module_ &m) {
  PyObject *base = newException(
      m, "ProfilerError", PyExc_RuntimeError,
      "Base class of every error Proton raises (a RuntimeError, as in triton.profiler).");
  auto sub = [&](const char *name, PyObject *second, const char *doc) {
    PyObject *bases = second ? PyTuple_Pack(2, base, second) : PyTuple_Pack(1, base);
    PyObject *type = newException(m, name, bases, doc);
    Py_DECREF(bases);
    return type;
  };
  exceptionTypes[size_t(StatusCode::kInternal)] = base;
  exceptionTypes[size_t(StatusCode::kInvalidArgument)] =
      sub("ConfigError", PyExc_ValueError, "An option or argument has a value Proton rejects.");
  exceptionTypes[size_t(StatusCode::kNotFound)] =
      sub("SessionError", nullptr, "The session does not exist or has been finalized.");
  exceptionTypes[size_t(StatusCode::kScopeMismatch)] =
      sub("ScopeError", PyExc_ValueError, "Scopes were exited out of order or never entered.");
  exceptionTypes[size_t(StatusCode::kMetricType)] =
      sub("MetricTypeError", PyExc_TypeError, "A metric changed type between two values.");
  exceptionTypes[size_t(StatusCode::kUnavailable)] =
      sub("BackendUnavailableError", nullptr,
          "The requested backend, context or mode cannot run here.");
  exceptionTypes[size_t(StatusCode::kBusy)] = exceptionTypes[size_t(StatusCode::kUnavailable)];
  exceptionTypes[size_t(StatusCode::kIo)] =
      sub("OutputError", PyExc_OSError, "The profile could not be written.");

  nb::register_exception_translator([](const std::exception_ptr &p, void *) {
    try {
      std::rethrow_exception(p);
    } catch (const ProtonException &e) {
      PyObject *type = exceptionTypes[size_t(e.code)];
      PyErr_SetString(type ? type : exceptionTypes[size_t(StatusCode::kInternal)], e.what());
    }
  });
}

void throwIfError(const Status &status) {
  if (!status.isOk()) throw ProtonException(status.code(), status.message());
}

bool looksLikeTensor(PyObject *value) {
  return PyObject_HasAttrString(value, "data_ptr") && PyObject_HasAttrString(value, "dtype") &&
         PyObject_HasAttrString(value, "device");
}

namespace {

// A host value of a CPU tensor (Python int, float or list of numbers).
bool hostValue(nb::handle v, MetricValue &out) {
  if (PyBool_Check(v.ptr())) return false;
  if (PyLong_Check(v.ptr())) {
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow) return false;
    out = static_cast<int64_t>(n);
    return true;
  }
  if (PyFloat_Check(v.ptr())) {
    out = PyFloat_AS_DOUBLE(v.ptr());
    return true;
  }
  if (!PyList_Check(v.ptr())) return false;
  std::vector<double> numbers;
  for (nb::handle item : nb::borrow<nb::list>(v)) {
    if (PyBool_Check(item.ptr())) {
      numbers.push_back(item.ptr() == Py_True ? 1.0 : 0.0);
    } else if (PyLong_Check(item.ptr()) || PyFloat_Check(item.ptr())) {
      numbers.push_back(PyFloat_AsDouble(item.ptr()));
    } else {
      return false;
    }
  }
  out = std::move(numbers);
  return true;
}

}  // namespace

bool tensorValue(const char *name, nb::handle value, std::vector<TensorMetric> &tensors,
                 const MetricSpec &spec, MetricValue &host) {
  // Leaked on purpose: a static nb::object would be released after the interpreter is gone.
  static nb::handle describe =
      nb::object(nb::module_::import_("proton._tensor").attr("describe")).release();
  nb::object d = describe(name, value, deviceMetricSink() != nullptr);
  if (!nb::isinstance<nb::tuple>(d)) {
    if (!hostValue(d, host))
      throwIfError(invalidArgument(std::string("[PROTON] metric '") + name +
                                   "': a CPU tensor must hold numbers"));
    return true;
  }
  TensorMetric m;
  m.spec = spec;
  m.tensor.dataPtr = nb::cast<uint64_t>(d[0]);
  m.tensor.numel = nb::cast<uint32_t>(d[1]);
  m.tensor.dtype = static_cast<TensorDType>(nb::cast<int>(d[2]));
  m.tensor.list = nb::cast<bool>(d[3]);
  m.tensor.device = nb::cast<int32_t>(d[4]);
  m.tensor.stream = nb::cast<uint64_t>(d[5]);
  tensors.push_back(m);
  return false;
}

MetricList toMetricList(nb::handle metrics, std::vector<TensorMetric> *tensors) {
  MetricList list;
  if (metrics.is_none()) return list;
  if (!PyDict_Check(metrics.ptr())) {
    throwIfError(invalidArgument(std::string("[PROTON] metrics must be a dict of name -> value, "
                                             "got ") +
                                 Py_TYPE(metrics.ptr())->tp_name));
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(metrics.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) {
      throwIfError(invalidArgument(std::string("[PROTON] metric names must be str, got ") +
                                   Py_TYPE(key)->tp_name));
    }
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(key, &len);
    if (!name) throw nb::python_error();
    NamedMetric metric{MetricSpec::parse(std::string_view(name, len)), int64_t{0}};
    auto bad = [&](const char *what) {
      throwIfError(invalidArgument("[PROTON] metric '" + std::string(name, len) + "' " + what +
                                   " (got " + Py_TYPE(value)->tp_name +
                                   "); allowed: int, float, str, list of numbers"));
    };
    if (PyLong_Check(value)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow) bad("does not fit in 64 bits");
      metric.value = static_cast<int64_t>(v);
    } else if (PyFloat_Check(value)) {
      metric.value = PyFloat_AS_DOUBLE(value);
    } else if (PyUnicode_Check(value)) {
      Py_ssize_t n;
      const char *s = PyUnicode_AsUTF8AndSize(value, &n);
      if (!s) throw nb::python_error();
      metric.value = std::string(s, n);
    } else if (PyList_Check(value) || PyTuple_Check(value)) {
      std::vector<double> numbers;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
      PyObject **items = PySequence_Fast_ITEMS(value);
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (PyBool_Check(items[i]) || !(PyLong_Check(items[i]) || PyFloat_Check(items[i])))
          bad("is a list with a non-number element");
        numbers.push_back(PyFloat_AsDouble(items[i]));
      }
      metric.value = std::move(numbers);
    } else if (tensors && looksLikeTensor(value)) {
      if (!tensorValue(name, nb::handle(value), *tensors, metric.spec, metric.value)) continue;
    } else {
      bad("has an unsupported type");
    }
    list.push_back(std::move(metric));
  }
  return list;
}

}  // namespace proton::bindings
