// proton-viewer's fast path: the Hatchet readers of csrc/viewer and the column kernels the
// Python model and renderer call on whole columns (lists) at once. Each function returns
// None where it cannot give exactly the answer of the Python code, which then runs instead.
// Called with the GIL held; file reading, parsing and the whole report release it.
//
//   tree = _C.viewer_read("run.hatchet", False)            # a ViewerTree, or None
//   view = tree.select("__proton_launch_metadata", include_mask, None)
//   view.report([("scaled", "time (ns)", None, -9, 1)], ["time/s"], [], None, 100, None,
//               False, False, 1)                            # True: written to fd 1
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstring>
#include <optional>

#include "bindings/common.h"
#include "viewer/hatchet_reader.h"
#include "viewer/kernel_name.h"
#include "viewer/text_sink.h"
#include "viewer/tree_render.h"
#include "viewer/tree_view.h"

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
    *cell = CellValue::none();
  } else if (PyFloat_CheckExact(item)) {
    *cell = CellValue::ofDouble(PyFloat_AS_DOUBLE(item));
  } else if (PyLong_CheckExact(item)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) return false;
    *cell = CellValue::ofInt(v);
  } else {
    return false;
  }
  return true;
}

// UTF-8 views of a list of str (valid while the list lives), or false.
bool toViews(nb::handle list, std::vector<std::string_view> *out) {
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

  // [(metric, is_number)] in Python's first-seen order; is_number from the last value.
  nb::list metricKinds() const {
    nb::list out;
    std::vector<uint8_t> all(tree_.size(), 1);
    for (const viewer::MetricKind &k : viewer::keptMetricKinds(tree_, all)) {
      const std::string &name = tree_.metrics[k.column].name;
      out.append(nb::make_tuple(nb::str(name.data(), name.size()), k.number));
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

  // Every interned string (frame names and string metric values), by id.
  nb::object stringList() {
    strings();
    return makeList(strings_.size(), [&](size_t i) { return Py_NewRef(strings_[i].ptr()); });
  }

  const TreeColumns &columns() const { return tree_; }

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
      out[i] = CellValue::ofInt(0);
    } else if (!toCell(item, &out[i])) {
      return nb::none();
    }
  }
  for (size_t i = n; i-- > 1;) {
    int32_t p = parents[i];
    if (p < 0 || static_cast<size_t>(p) >= i) return nb::none();
    if (!viewer::add(out[p], out[i], &out[p])) return nb::none();
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

// Decodes a whole text report for Python.
nb::object textObject(const std::string &text) {
  return steal(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr));
}

// render.py's header and tree lines for the nodes with shown[i] set, joined by newlines;
// None when a value is not None, an int fitting int64 or a float.
nb::object renderRows(nb::bytes shown, nb::handle names, nb::handle parentList,
                      nb::handle depthList, nb::handle columns, nb::handle titles) {
  std::vector<int32_t> parents, depths;
  std::vector<std::string_view> nameViews;
  if (!toInt32s(parentList, &parents) || !toInt32s(depthList, &depths)) return nb::none();
  size_t n = parents.size();
  if (shown.size() != n || depths.size() != n || !PyList_Check(names.ptr()) ||
      static_cast<size_t>(PyList_GET_SIZE(names.ptr())) != n || !PyList_Check(columns.ptr()) ||
      !PyList_Check(titles.ptr()) ||
      PyList_GET_SIZE(titles.ptr()) != PyList_GET_SIZE(columns.ptr()) ||
      !toViews(names, &nameViews)) {
    return nb::none();
  }
  std::vector<int32_t> order;
  const char *flags = static_cast<const char *>(shown.data());
  for (size_t i = 0; i < n; ++i) {
    if (flags[i]) order.push_back(static_cast<int32_t>(i));
  }
  viewer::TreeTable table{&parents, &depths, nullptr, &nameViews, {}, {}, {}};
  std::vector<std::vector<CellValue>> cells;
  for (Py_ssize_t c = 0; c < PyList_GET_SIZE(columns.ptr()); ++c) {
    PyObject *values = PyList_GET_ITEM(columns.ptr(), c);
    PyObject *title = PyList_GET_ITEM(titles.ptr(), c);
    if (!PyList_Check(values) || static_cast<size_t>(PyList_GET_SIZE(values)) != n ||
        !PyUnicode_Check(title)) {
      return nb::none();
    }
    auto &column = cells.emplace_back(n);
    for (int32_t i : order) {
      if (!toCell(PyList_GET_ITEM(values, i), &column[i])) return nb::none();
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(title, &size);
    if (utf8 == nullptr) throw nb::python_error();
    table.titles.emplace_back(utf8, size);
    table.titleLengths.push_back(static_cast<size_t>(PyUnicode_GET_LENGTH(title)));
  }
  for (const auto &column : cells) table.columns.push_back(&column);
  std::string text;
  {
    nb::gil_scoped_release release;
    viewer::TextSink sink(&text);
    viewer::writeTreeLines(table, order, /*color=*/false, &sink);
  }
  if (!text.empty()) text.pop_back();  // the last '\n': render.py joins the lines
  return textObject(text);
}

// A profile's kept frames (launch metadata hidden, -i/-e applied) and the whole report on
// them; holds its ViewerTree alive.
class ViewerSelection {
 public:
  ViewerSelection(nb::object owner, const TreeColumns *tree, std::vector<uint8_t> keep)
      : owner_(std::move(owner)), tree_(tree), keep_(std::move(keep)) {}

  // [(metric, is_number)] of the kept frames, as Profile._metric_kinds orders them.
  nb::list metricKinds() const {
    nb::list out;
    for (const viewer::MetricKind &k : viewer::keptMetricKinds(*tree_, keep_)) {
      const std::string &name = tree_->metrics[k.column].name;
      out.append(nb::make_tuple(nb::str(name.data(), name.size()), k.number));
    }
    return out;
  }

  // The report of render.render() but the stats table, written to fd (True) or returned
  // (fd < 0); None, with nothing written, where only Python can give the same answer.
  nb::object report(nb::handle recipes, nb::handle titles, nb::handle exclusive,
                    std::optional<double> threshold, std::optional<int64_t> depth,
                    nb::handle displayNames, bool color, bool printSorted, int fd,
                    bool shortNames) {
    viewer::TreeTable table;
    std::vector<std::string_view> names;
    std::vector<viewer::ColumnRecipe> columns;
    std::vector<uint8_t> noneColumns;
    std::vector<uint8_t> exclusiveColumns(tree_->metrics.size());
    if (!PyList_Check(recipes.ptr()) || !PyList_Check(titles.ptr()) ||
        PyList_GET_SIZE(recipes.ptr()) != PyList_GET_SIZE(titles.ptr()) ||
        PyList_GET_SIZE(recipes.ptr()) == 0) {
      return nb::none();
    }
    for (nb::handle name : exclusive) {
      int column = find(nb::cast<std::string>(name));
      if (column >= 0) exclusiveColumns[column] = 1;
    }
    for (Py_ssize_t c = 0; c < PyList_GET_SIZE(recipes.ptr()); ++c) {
      viewer::ColumnRecipe recipe;
      bool none = false;
      if (!toRecipe(PyList_GET_ITEM(recipes.ptr(), c), &recipe, &none)) return nb::none();
      columns.push_back(recipe);
      noneColumns.push_back(none);
      std::string title = nb::cast<std::string>(nb::handle(PyList_GET_ITEM(titles.ptr(), c)));
      table.titleLengths.push_back(viewer::countCharacters(title));
      table.titles.push_back(std::move(title));
    }
    std::vector<std::string> shortened;  // names[i] views shortened[i] where it is set
    if (displayNames.is_none()) {
      names.assign(tree_->strings.begin(), tree_->strings.end());
      if (shortNames) {
        shortened.resize(names.size());
        for (size_t i = 0; i < names.size(); ++i) {
          if (viewer::shortenKernelName(names[i], &shortened[i])) names[i] = shortened[i];
        }
      }
    } else if (!toViews(displayNames, &names) || names.size() != tree_->strings.size()) {
      return nb::none();
    }
    std::string text;
    Status status;
    bool done;
    {
      nb::gil_scoped_release release;
      viewer::ColumnEvaluator evaluator(*tree_, keep_, std::move(exclusiveColumns));
      std::vector<std::vector<CellValue>> values(columns.size());
      done = true;
      for (size_t c = 0; c < columns.size() && done; ++c) {
        if (noneColumns[c]) {
          values[c].assign(tree_->size(), CellValue::none());
        } else {
          done = evaluator.evaluate(columns[c], &values[c]);
        }
      }
      std::vector<int32_t> depths = viewer::nodeDepths(tree_->parents);
      table.parents = &tree_->parents;
      table.depths = &depths;
      table.nameIds = &tree_->nameIds;
      table.names = &names;
      for (const auto &column : values) table.columns.push_back(&column);
      std::optional<viewer::TextSink> sink;
      if (fd >= 0) {
        sink.emplace(fd);
      } else {
        sink.emplace(&text);
      }
      if (done) {
        std::vector<int32_t> order =
            viewer::visibleNodes(tree_->parents, depths, keep_, values[0], threshold, depth);
        done = viewer::writeTreeLines(table, order, color, &*sink);
        if (done && printSorted) {
          if (depth) {  // the sorted list is not cut by depth
            order = viewer::visibleNodes(tree_->parents, depths, keep_, values[0], threshold,
                                         std::nullopt);
          }
          viewer::writeSortedLines(table, order, &*sink);
        }
      }
      status = sink->flush();
      if (!status.isOk()) errno = sink->error();
    }
    if (!status.isOk()) {
      PyErr_SetFromErrno(PyExc_OSError);
      throw nb::python_error();
    }
    if (!done) return nb::none();
    if (fd >= 0) return nb::bool_(true);
    return textObject(text);
  }

 private:
  int find(const std::string &name) const {
    for (size_t k = 0; k < tree_->metrics.size(); ++k) {
      if (tree_->metrics[k].name == name) return static_cast<int>(k);
    }
    return -1;
  }

  // (op, source, other, exponent, divisor), as fast_report.py encodes derive.py's recipes.
  bool toRecipe(PyObject *item, viewer::ColumnRecipe *recipe, bool *none) const {
    static const std::pair<const char *, viewer::ColumnOp> kOps[] = {
        {"inclusive", viewer::ColumnOp::kInclusive},
        {"own", viewer::ColumnOp::kOwn},
        {"scaled", viewer::ColumnOp::kScaled},
        {"average", viewer::ColumnOp::kAverage},
        {"rate", viewer::ColumnOp::kRate},
        {"percent", viewer::ColumnOp::kPercent},
        {"timed_average", viewer::ColumnOp::kTimedAverage}};
    auto t = nb::cast<std::tuple<std::string, std::optional<std::string>,
                                 std::optional<std::string>, int, int64_t>>(nb::handle(item));
    const auto &[op, source, other, exponent, divisor] = t;
    if (op == "none") return *none = true, true;
    bool known = false;
    for (const auto &[text, value] : kOps) {
      if (op == text) recipe->op = value, known = true;
    }
    recipe->source = source ? find(*source) : -1;
    recipe->other = other ? find(*other) : -1;
    recipe->exponent = exponent;
    recipe->divisor = divisor;
    return known && recipe->source >= 0 && (!other || recipe->other >= 0) && exponent >= -18 &&
           exponent <= 18 && divisor > 0;
  }

  nb::object owner_;
  const TreeColumns *tree_;
  std::vector<uint8_t> keep_;
};

// A per-string-id mask from Python (bytes), or false when its size is wrong.
bool toMask(nb::handle mask, size_t size, std::optional<std::vector<uint8_t>> *out) {
  if (mask.is_none()) return true;
  if (!PyBytes_Check(mask.ptr()) || static_cast<size_t>(PyBytes_GET_SIZE(mask.ptr())) != size) {
    return false;
  }
  const char *data = PyBytes_AS_STRING(mask.ptr());
  out->emplace(data, data + size);
  return true;
}

nb::object selectFrames(ViewerTree &self, const std::string &hiddenName, nb::handle include,
                        nb::handle exclude) {
  const TreeColumns &tree = self.columns();
  std::optional<std::vector<uint8_t>> includeMask, excludeMask;
  if (!toMask(include, tree.strings.size(), &includeMask) ||
      !toMask(exclude, tree.strings.size(), &excludeMask)) {
    return nb::none();
  }
  std::vector<uint8_t> keep;
  {
    nb::gil_scoped_release release;
    viewer::NodeSelection selection{hiddenName, includeMask ? &*includeMask : nullptr,
                                    excludeMask ? &*excludeMask : nullptr};
    keep = viewer::selectNodes(tree, selection);
  }
  if (keep.empty()) return nb::none();
  return nb::cast(ViewerSelection(nb::find(&self), &tree, std::move(keep)));
}

}  // namespace

void bindViewer(nb::module_ &m) {
  nb::class_<ViewerTree>(m, "ViewerTree")
      .def("__len__", &ViewerTree::size)
      .def("names", &ViewerTree::names)
      .def("parents", &ViewerTree::parents)
      .def("strings", &ViewerTree::stringList)
      .def("metric_kinds", &ViewerTree::metricKinds)
      .def("column", &ViewerTree::column, nb::arg("metric"))
      .def("rows", &ViewerTree::rows)
      .def("select", &selectFrames, nb::arg("hidden_name"), nb::arg("include").none(),
           nb::arg("exclude").none(),
           "The frames kept after hiding `hidden_name` subtrees and applying per-string "
           "-i/-e masks (bytes); None when only Python can tell.")
      .def_prop_ro("metadata", &ViewerTree::metadata)
      .def_prop_ro("devices", &ViewerTree::devices);
  nb::class_<ViewerSelection>(m, "ViewerSelection")
      .def("metric_kinds", &ViewerSelection::metricKinds)
      .def("report", &ViewerSelection::report, nb::arg("recipes"), nb::arg("titles"),
           nb::arg("exclusive"), nb::arg("threshold").none(), nb::arg("depth").none(),
           nb::arg("names").none(), nb::arg("color"), nb::arg("print_sorted"), nb::arg("fd"),
           nb::arg("short_names") = false,
           "short_names: kernel signatures shown short (viewer/kernel_name.h) where `names` "
           "is None.");
  m.def("viewer_read", &readTree, nb::arg("path"), nb::arg("msgpack"),
        "A profile file in columns (a ViewerTree), or None when only the Python reader can "
        "read it (or explain why not).");
  m.def(
      "viewer_short_kernel_name",
      [](const std::string &name) {
        std::string out;
        return viewer::shortenKernelName(name, &out) ? out : name;
      },
      nb::arg("name"), "The name proton-viewer's tree shows for `name` (viewer/kernel_name.h).");
  m.def("viewer_inclusive", &inclusive, nb::arg("values"), nb::arg("parents"));
  m.def("viewer_depths", &depths, nb::arg("parents"));
  m.def("viewer_render_rows", &renderRows, nb::arg("shown"), nb::arg("names"), nb::arg("parents"),
        nb::arg("depths"), nb::arg("columns"), nb::arg("titles"));
}

}  // namespace proton::bindings
