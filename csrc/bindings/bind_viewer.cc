// proton-viewer's fast path: the Hatchet readers of csrc/viewer and the column kernels the
// Python model and renderer call on whole columns (lists) at once. Each function returns
// None where it cannot give exactly the answer of the Python code, which then runs instead.
// Called with the GIL held; file reading and parsing release it.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <cstring>

#include "bindings/common.h"
#include "viewer/hatchet_reader.h"
#include "viewer/tree_render.h"

namespace proton::bindings {
namespace {

using viewer::CellValue;
using viewer::TreeColumns;
using viewer::ValueKind;

nb::object steal(PyObject *o) {
  if (o == nullptr) throw nb::python_error();
  return nb::steal(o);
}

// A list of n items made by make(i) (a new reference each).
template <typename F>
nb::object makeList(size_t n, F make) {
  nb::object list = steal(PyList_New(static_cast<Py_ssize_t>(n)));
  for (size_t i = 0; i < n; ++i) {
    PyObject *item = make(i);
    if (item == nullptr) throw nb::python_error();
    PyList_SET_ITEM(list.ptr(), static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

// The items of a list, or false when it is not a list of ints that fit int32.
bool toInt32s(nb::handle list, std::vector<int32_t> *out) {
  if (!PyList_Check(list.ptr())) return false;
  Py_ssize_t n = PyList_GET_SIZE(list.ptr());
  out->resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyList_GET_ITEM(list.ptr(), i);
    if (!PyLong_CheckExact(item)) return false;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow || v < INT32_MIN || v > INT32_MAX) return false;
    (*out)[i] = static_cast<int32_t>(v);
  }
  return true;
}

// A None, exact int (fitting int64) or exact float, else false.
bool toCell(PyObject *item, CellValue *cell) {
  if (item == Py_None) {
    cell->kind = CellValue::kNone;
  } else if (PyFloat_CheckExact(item)) {
    cell->kind = CellValue::kDouble;
    cell->d = PyFloat_AS_DOUBLE(item);
  } else if (PyLong_CheckExact(item)) {
    int overflow = 0;
    cell->i = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) return false;
    cell->kind = CellValue::kInt;
  } else {
    return false;
  }
  return true;
}

PyObject *cellObject(const CellValue &c) {
  if (c.kind == CellValue::kInt) return PyLong_FromLongLong(c.i);
  return PyFloat_FromDouble(c.d);
}

// The file's tree in columns; Python objects are made on request.
class ViewerTree {
 public:
  explicit ViewerTree(TreeColumns tree) : tree_(std::move(tree)) {}

  size_t size() const { return tree_.size(); }

  nb::object names() {
    strings();
    return makeList(tree_.size(), [&](size_t i) {
      PyObject *s = strings_[tree_.nameIds[i]].ptr();
      Py_INCREF(s);
      return s;
    });
  }

  nb::object parents() const {
    return makeList(tree_.size(), [&](size_t i) { return PyLong_FromLong(tree_.parents[i]); });
  }

  // [(metric, is_number)] in first-seen order; is_number from the last value seen.
  nb::list metricKinds() const {
    nb::list out;
    for (const auto &m : tree_.metrics) {
      bool number = m.lastKind == ValueKind::kInt || m.lastKind == ValueKind::kDouble;
      out.append(nb::make_tuple(nb::str(m.name.data(), m.name.size()), number));
    }
    return out;
  }

  // The metric on each node as written, None where absent.
  nb::object column(const std::string &name) {
    const viewer::MetricColumn *m = find(name);
    if (m == nullptr) {
      return makeList(tree_.size(), [](size_t) { return Py_NewRef(Py_None); });
    }
    return makeList(tree_.size(), [&](size_t i) { return value(*m, i); });
  }

  // One dict per node, keys in the file's order (for code that wants rows).
  nb::object rows() {
    nb::object keys = makeList(tree_.metrics.size(), [&](size_t k) {
      const std::string &n = tree_.metrics[k].name;
      return PyUnicode_DecodeUTF8(n.data(), static_cast<Py_ssize_t>(n.size()), nullptr);
    });
    return makeList(tree_.size(), [&](size_t i) -> PyObject * {
      PyObject *row = PyDict_New();
      if (row == nullptr) return nullptr;
      for (size_t k = 0; k < tree_.metrics.size(); ++k) {
        const auto &m = tree_.metrics[k];
        if (m.kinds[i] == ValueKind::kAbsent) continue;
        PyObject *v = value(m, i);
        int rc = v ? PyDict_SetItem(row, PyList_GET_ITEM(keys.ptr(), k), v) : -1;
        Py_XDECREF(v);
        if (rc < 0) {
          Py_DECREF(row);
          return nullptr;
        }
      }
      return row;
    });
  }

  nb::bytes metadata() const { return nb::bytes(tree_.metadata.data(), tree_.metadata.size()); }
  nb::bytes devices() const { return nb::bytes(tree_.devices.data(), tree_.devices.size()); }

 private:
  const viewer::MetricColumn *find(const std::string &name) const {
    for (const auto &m : tree_.metrics) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }

  void strings() {
    if (strings_.size() == tree_.strings.size()) return;
    strings_.clear();
    for (const std::string &s : tree_.strings) {
      strings_.push_back(
          steal(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr)));
    }
  }

  PyObject *value(const viewer::MetricColumn &m, size_t i) {
    uint64_t bits = m.values[i];
    switch (m.kinds[i]) {
      case ValueKind::kInt: {
        int64_t v;
        std::memcpy(&v, &bits, 8);
        return PyLong_FromLongLong(v);
      }
      case ValueKind::kDouble: {
        double d;
        std::memcpy(&d, &bits, 8);
        return PyFloat_FromDouble(d);
      }
      case ValueKind::kString: {
        strings();
        PyObject *s = strings_[bits].ptr();
        Py_INCREF(s);
        return s;
      }
      default:
        return Py_NewRef(Py_None);
    }
  }

  TreeColumns tree_;
  std::vector<nb::object> strings_;
};

nb::object readTree(const std::string &path, bool msgpack) {
  TreeColumns tree;
  Status status;
  {
    nb::gil_scoped_release release;
    status = viewer::readHatchetFile(path, msgpack, &tree);
  }
  if (!status.isOk()) return nb::none();
  return nb::cast(ViewerTree(std::move(tree)));
}

// Profile.inclusive(): `out = exclusive(values)`, then `out[parents[i]] += out[i]` for i
// from n - 1 down to 1; None when an integer does not fit int64.
nb::object inclusive(nb::handle values, nb::handle parentList) {
  std::vector<int32_t> parents;
  if (!PyList_Check(values.ptr()) || !toInt32s(parentList, &parents)) return nb::none();
  size_t n = parents.size();
  if (static_cast<size_t>(PyList_GET_SIZE(values.ptr())) != n) return nb::none();
  // As Profile.exclusive(): values that are not exact ints or floats count as 0.
  std::vector<CellValue> out(n);
  for (size_t i = 0; i < n; ++i) {
    PyObject *item = PyList_GET_ITEM(values.ptr(), i);
    if (!PyLong_CheckExact(item) && !PyFloat_CheckExact(item)) {
      out[i].kind = CellValue::kInt;
    } else if (!toCell(item, &out[i])) {
      return nb::none();
    }
  }
  for (size_t i = n; i-- > 1;) {
    int32_t p = parents[i];
    if (p < 0 || static_cast<size_t>(p) >= i) return nb::none();
    CellValue &a = out[p];
    const CellValue &b = out[i];
    if (a.kind == CellValue::kInt && b.kind == CellValue::kInt) {
      if (__builtin_add_overflow(a.i, b.i, &a.i)) return nb::none();
    } else {
      double x = a.kind == CellValue::kInt ? static_cast<double>(a.i) : a.d;
      double y = b.kind == CellValue::kInt ? static_cast<double>(b.i) : b.d;
      a.kind = CellValue::kDouble;
      a.d = x + y;
    }
  }
  return makeList(n, [&](size_t i) { return cellObject(out[i]); });
}

nb::object depths(nb::handle parentList) {
  std::vector<int32_t> parents;
  if (!toInt32s(parentList, &parents)) return nb::none();
  std::vector<int32_t> depth(parents.size());
  for (size_t i = 1; i < parents.size(); ++i) {
    int32_t p = parents[i];
    if (p < 0 || static_cast<size_t>(p) >= i) return nb::none();
    depth[i] = depth[p] + 1;
  }
  return makeList(depth.size(), [&](size_t i) { return PyLong_FromLong(depth[i]); });
}

// render.py's header and tree lines for the nodes with shown[i] set; None when a value
// is not None, an int fitting int64 or a float.
nb::object renderRows(nb::bytes shown, nb::handle names, nb::handle parentList,
                      nb::handle depthList, nb::handle columns, nb::handle titles) {
  viewer::RenderRows in;
  if (!toInt32s(parentList, &in.parents) || !toInt32s(depthList, &in.depths)) return nb::none();
  size_t n = in.parents.size();
  if (shown.size() != n || in.depths.size() != n || !PyList_Check(names.ptr()) ||
      static_cast<size_t>(PyList_GET_SIZE(names.ptr())) != n || !PyList_Check(columns.ptr()) ||
      !PyList_Check(titles.ptr()) ||
      PyList_GET_SIZE(titles.ptr()) != PyList_GET_SIZE(columns.ptr())) {
    return nb::none();
  }
  const char *flags = static_cast<const char *>(shown.data());
  for (size_t i = 0; i < n; ++i) {
    if (flags[i]) in.order.push_back(static_cast<int32_t>(i));
  }
  in.names.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Py_ssize_t size;
    PyObject *name = PyList_GET_ITEM(names.ptr(), i);
    if (!PyUnicode_Check(name)) return nb::none();
    const char *utf8 = flags[i] ? PyUnicode_AsUTF8AndSize(name, &size) : "";
    if (utf8 == nullptr) throw nb::python_error();
    in.names[i] = std::string_view(utf8, flags[i] ? size : 0);
  }
  for (Py_ssize_t c = 0; c < PyList_GET_SIZE(columns.ptr()); ++c) {
    PyObject *values = PyList_GET_ITEM(columns.ptr(), c);
    PyObject *title = PyList_GET_ITEM(titles.ptr(), c);
    if (!PyList_Check(values) || static_cast<size_t>(PyList_GET_SIZE(values)) != n ||
        !PyUnicode_Check(title)) {
      return nb::none();
    }
    auto &cells = in.columns.emplace_back(in.order.size());
    for (size_t r = 0; r < in.order.size(); ++r) {
      if (!toCell(PyList_GET_ITEM(values, in.order[r]), &cells[r])) return nb::none();
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(title, &size);
    if (utf8 == nullptr) throw nb::python_error();
    in.titles.emplace_back(utf8, size);
    in.titleLengths.push_back(static_cast<size_t>(PyUnicode_GET_LENGTH(title)));
  }
  std::string text;
  {
    nb::gil_scoped_release release;
    text = viewer::renderTreeRows(in);
  }
  return steal(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr));
}

}  // namespace

void bindViewer(nb::module_ &m) {
  nb::class_<ViewerTree>(m, "ViewerTree")
      .def("__len__", &ViewerTree::size)
      .def("names", &ViewerTree::names)
      .def("parents", &ViewerTree::parents)
      .def("metric_kinds", &ViewerTree::metricKinds)
      .def("column", &ViewerTree::column, nb::arg("metric"))
      .def("rows", &ViewerTree::rows)
      .def_prop_ro("metadata", &ViewerTree::metadata)
      .def_prop_ro("devices", &ViewerTree::devices);
  m.def("viewer_read", &readTree, nb::arg("path"), nb::arg("msgpack"),
        "A profile file in columns (a ViewerTree), or None when only the Python reader can "
        "read it (or explain why not).");
  m.def("viewer_inclusive", &inclusive, nb::arg("values"), nb::arg("parents"));
  m.def("viewer_depths", &depths, nb::arg("parents"));
  m.def("viewer_render_rows", &renderRows, nb::arg("shown"), nb::arg("names"), nb::arg("parents"),
        nb::arg("depths"), nb::arg("columns"), nb::arg("titles"));
}

}  // namespace proton::bindings
