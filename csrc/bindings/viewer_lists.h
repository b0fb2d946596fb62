// Python lists in and out of the viewer's C++ model (bind_viewer.cc, bind_viewer_render.cc):
// lists made item by item, node parents and metric cells read from lists.
//
//   std::vector<int32_t> parents;
//   if (!toParents(list, &parents)) throw nb::value_error("...");
//   nb::object values = cellList(column);   // ints and floats, None for empty cells
//
// Called with the GIL held.
#pragma once

#include <Python.h>

#include <string_view>
#include <vector>

#include "bindings/common.h"
#include "viewer/py_number.h"

namespace proton::bindings {

inline nb::object steal(PyObject *o) {
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
inline bool toInt32s(nb::handle list, std::vector<int32_t> *out) {
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

// Parents of a tree in pre-order: ROOT's -1, every other node's an earlier node.
inline bool toParents(nb::handle list, std::vector<int32_t> *out) {
  if (!toInt32s(list, out)) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    int32_t p = (*out)[i];
    if (i == 0 ? p != -1 : (p < 0 || static_cast<size_t>(p) >= i)) return false;
  }
  return true;
}

// A metric cell: an int (an int beyond int64 as a float), a float, None for anything else.
inline viewer::CellValue toCell(PyObject *item) {
  using viewer::CellValue;
  if (PyFloat_Check(item)) return CellValue::ofDouble(PyFloat_AS_DOUBLE(item));
  if (PyLong_Check(item)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (!overflow) return CellValue::ofInt(v);
    double d = PyLong_AsDouble(item);
    if (d == -1.0 && PyErr_Occurred()) {  // beyond a double too
      PyErr_Clear();
      d = overflow > 0 ? HUGE_VAL : -HUGE_VAL;
    }
    return CellValue::ofDouble(d);
  }
  return CellValue::none();
}

inline PyObject *cellObject(const viewer::CellValue &c) {
  if (c.kind == viewer::CellValue::kInt) return PyLong_FromLongLong(c.i);
  if (c.kind == viewer::CellValue::kNone) return Py_NewRef(Py_None);
  return PyFloat_FromDouble(c.d);
}

inline nb::object cellList(const std::vector<viewer::CellValue> &cells) {
  return makeList(cells.size(), [&](size_t i) { return cellObject(cells[i]); });
}

// UTF-8 views of a list of str (valid while the list lives), or false.
inline bool toViews(nb::handle list, std::vector<std::string_view> *out) {
  if (!PyList_Check(list.ptr())) return false;
  Py_ssize_t n = PyList_GET_SIZE(list.ptr());
  out->resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *item = PyList_GET_ITEM(list.ptr(), i);
    if (!PyUnicode_Check(item)) return false;
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(item, &size);
    if (utf8 == nullptr) throw nb::python_error();
    (*out)[i] = std::string_view(utf8, size);
  }
  return true;
}

inline nb::object textObject(std::string_view text) {
  return steal(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr));
}

// Registers the renderer's functions (bind_viewer_render.cc).
void bindViewerRender(nb::module_ &m);

}  // namespace proton::bindings
