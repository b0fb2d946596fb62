// The viewer's model for Python: a profile's tree in C++ columns (a ViewerTree), read from a
// file or built from Python lists, and the operations of csrc/viewer on it. proton.viewer's
// Profile holds one, so that selection, folding, merging, inclusive sums and derived columns
// have one implementation whichever path the viewer takes (model.py, fast_report.py).
//
//   tree = _C.viewer_read("run.hatchet", False)            # a ViewerTree, or None
//   tree = _C.viewer_tree(names, parents, rows)            # from Python's lists and dicts
//   view = tree.select("__proton_launch_metadata", include_mask, None)
//   view.report([("scaled", "time (ns)", None, -9, 1)], ["time/s"], [], None, 100, None,
//               False, False, 1)                            # True: written to fd 1
//   tree.evaluate(("inclusive", "time (ns)", None, 0, 1), [])   # a list per node
//
// Metric values that are neither numbers nor strings (lists, bools, None; only Python gives
// them) are kept as the Python objects themselves. Called with the GIL held; reading,
// merging and the report release it.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstring>
#include <optional>

#include "bindings/viewer_lists.h"
#include "viewer/hatchet_reader.h"
#include "viewer/kernel_name.h"
#include "viewer/text_sink.h"
#include "viewer/tree_builder.h"
#include "viewer/tree_merge.h"
#include "viewer/tree_render.h"
#include "viewer/tree_view.h"

namespace proton::bindings {
namespace {

using viewer::CellValue;
using viewer::TreeColumns;
using viewer::ValueKind;

// A profile's tree in columns; Python objects are made on request.
class ViewerTree {
 public:
  explicit ViewerTree(TreeColumns tree, std::vector<nb::object> others = {})
      : tree_(std::move(tree)), others_(std::move(others)) {}

  size_t size() const { return tree_.size(); }
  const TreeColumns &columns() const { return tree_; }
  const std::vector<nb::object> &others() const { return others_; }

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

  // [(metric, is_number)] in first-seen order; is_number from the last value.
  nb::list metricKinds() const {
    std::vector<uint8_t> all(tree_.size(), 1);
    return kindsOf(tree_, all);
  }

  static nb::list kindsOf(const TreeColumns &tree, const std::vector<uint8_t> &keep) {
    nb::list out;
    for (const viewer::MetricKind &k : viewer::keptMetricKinds(tree, keep)) {
      const std::string &name = tree.metrics[k.column].name;
      out.append(nb::make_tuple(nb::str(name.data(), name.size()), k.number));
    }
    return out;
  }

  // The metric on each node as written, None where absent.
  nb::object column(const std::string &name) {
    int k = find(name);
    if (k < 0) return makeList(tree_.size(), [](size_t) { return Py_NewRef(Py_None); });
    return makeList(tree_.size(), [&](size_t i) { return value(tree_.metrics[k], i); });
  }

  // One dict per node, keys in column order (for code that wants rows).
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

  nb::bytes metadata() const { return nb::bytes(tree_.metadata.data(), tree_.metadata.size()); }
  nb::bytes devices() const { return nb::bytes(tree_.devices.data(), tree_.devices.size()); }

  int find(const std::string &name) const {
    for (size_t k = 0; k < tree_.metrics.size(); ++k) {
      if (tree_.metrics[k].name == name) return static_cast<int>(k);
    }
    return -1;
  }

  // Per column, whether it is one of `names` (metrics not summed into parents).
  std::vector<uint8_t> exclusiveColumns(nb::handle names) const {
    std::vector<uint8_t> out(tree_.metrics.size());
    for (nb::handle name : names) {
      int column = find(nb::cast<std::string>(name));
      if (column >= 0) out[column] = 1;
    }
    return out;
  }

  // Profile.inclusive(metric, where): each node's number plus its descendants' (its own
  // for an exclusive metric); with `where`, counting only the nodes carrying that metric.
  nb::object inclusive(const std::string &metric, std::optional<std::string> where,
                       bool exclusive) {
    int column = find(metric), other = where ? find(*where) : -1;
    std::vector<uint8_t> excluded(tree_.metrics.size());
    if (column >= 0) excluded[column] = exclusive;
    std::vector<CellValue> values;
    {
      nb::gil_scoped_release release;
      std::vector<uint8_t> all(tree_.size(), 1);
      viewer::ColumnEvaluator evaluator(tree_, all, std::move(excluded));
      values = where ? evaluator.inclusiveWhere(column, other) : evaluator.inclusive(column);
    }
    return cellList(values);
  }

  // One derive.py recipe's column over every node.
  nb::object evaluate(nb::handle recipe, nb::handle exclusive) {
    viewer::ColumnRecipe r;
    if (!toRecipe(recipe.ptr(), &r)) throw nb::value_error("[PROTON] not a column recipe");
    std::vector<CellValue> values;
    std::vector<uint8_t> excluded = exclusiveColumns(exclusive);
    {
      nb::gil_scoped_release release;
      std::vector<uint8_t> all(tree_.size(), 1);
      viewer::ColumnEvaluator evaluator(tree_, all, std::move(excluded));
      evaluator.evaluate(r, &values);
    }
    return cellList(values);
  }

  // (op, source, other, exponent, divisor), as derive.Recipe holds it; "none" is a column
  // of Nones (a profile without metrics). False for anything else.
  bool toRecipe(PyObject *item, viewer::ColumnRecipe *recipe) const {
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
    *recipe = {};
    if (op == "none") return recipe->source = -1, true;
    bool known = false;
    for (const auto &[text, value] : kOps) {
      if (op == text) recipe->op = value, known = true;
    }
    recipe->source = source ? find(*source) : -1;
    recipe->other = other ? find(*other) : -1;
    recipe->exponent = exponent;
    recipe->divisor = divisor;
    return known && exponent >= -18 && exponent <= 18 && divisor > 0;
  }

 private:
  void strings() {
    if (strings_.size() == tree_.strings.size()) return;
    strings_.clear();
    for (const std::string &s : tree_.strings) strings_.push_back(textObject(s));
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
        return Py_NewRef(strings_[bits].ptr());
      }
      case ValueKind::kOther:
        return Py_NewRef(bits < others_.size() ? others_[bits].ptr() : Py_None);
      default:
        return Py_NewRef(Py_None);
    }
  }

  TreeColumns tree_;
  std::vector<nb::object> others_;  // kOther values, by index
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

// One Python metric value into a column slot: exact ints (a float beyond int64), exact
// floats and str as themselves; anything else (bool, None, a list, ...) as an object.
void setValue(viewer::TreeBuilder &b, int32_t node, std::string_view key, PyObject *value,
              std::vector<nb::object> *others) {
  ValueKind kind = ValueKind::kOther;
  uint64_t bits = 0;
  if (PyLong_CheckExact(value) || PyFloat_CheckExact(value)) {
    CellValue cell = toCell(value);
    kind = cell.kind == CellValue::kInt ? ValueKind::kInt : ValueKind::kDouble;
    std::memcpy(&bits, cell.kind == CellValue::kInt ? static_cast<const void *>(&cell.i) : &cell.d,
                8);
  } else if (PyUnicode_Check(value)) {
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(value, &size);
    if (utf8 == nullptr) throw nb::python_error();
    kind = ValueKind::kString;
    bits = b.internValue(std::string_view(utf8, size));
  } else {
    bits = others->size();
    others->push_back(nb::borrow(value));
  }
  b.setMetric(node, key, kind, bits);
}

// A ViewerTree from Profile's columns: names (str), parents (pre-order) and rows (dicts
// of str keys, or None for a node without metrics).
ViewerTree treeFromPython(nb::handle names, nb::handle parentList, nb::handle rows) {
  std::vector<int32_t> parents;
  std::vector<std::string_view> nameViews;
  if (!toParents(parentList, &parents) || !toViews(names, &nameViews) ||
      nameViews.size() != parents.size() || !PyList_Check(rows.ptr()) ||
      static_cast<size_t>(PyList_GET_SIZE(rows.ptr())) != parents.size()) {
    throw nb::value_error(
        "[PROTON] a profile needs one name (str), parent and row per node, ROOT first "
        "(parent -1), every other node after its parent");
  }
  TreeColumns tree;
  std::vector<nb::object> others;
  viewer::TreeBuilder b(&tree, parents.size(), /*strictOrder=*/false);
  for (size_t i = 0; i < parents.size(); ++i) {
    int32_t node = b.beginNode(parents[i]);
    b.setName(node, nameViews[i]);
    PyObject *row = PyList_GET_ITEM(rows.ptr(), static_cast<Py_ssize_t>(i));
    if (!PyDict_Check(row)) continue;
    b.beginMetrics();
    PyObject *key, *value;
    Py_ssize_t at = 0;
    while (PyDict_Next(row, &at, &key, &value)) {
      if (!PyUnicode_Check(key)) continue;  // not a metric name
      Py_ssize_t size;
      const char *utf8 = PyUnicode_AsUTF8AndSize(key, &size);
      if (utf8 == nullptr) throw nb::python_error();
      setValue(b, node, std::string_view(utf8, size), value, &others);
    }
  }
  b.finish();
  return ViewerTree(std::move(tree), std::move(others));
}

// The union of trees by path (model.align): (merged tree, per input the merged node of
// each of its nodes).
nb::tuple mergeTrees(nb::handle trees) {
  std::vector<ViewerTree *> inputs;
  for (nb::handle tree : trees) inputs.push_back(nb::cast<ViewerTree *>(tree));
  std::vector<viewer::MergeInput> plans;
  std::vector<nb::object> others;
  for (ViewerTree *tree : inputs) {
    plans.push_back(viewer::pathsOf(tree->columns(), nullptr));
    plans.back().otherOffset = others.size();
    others.insert(others.end(), tree->others().begin(), tree->others().end());
  }
  std::vector<const viewer::MergeInput *> pointers;
  for (const viewer::MergeInput &plan : plans) pointers.push_back(&plan);
  std::vector<std::vector<int32_t>> maps;
  TreeColumns merged;
  {
    nb::gil_scoped_release release;
    merged = viewer::mergeTrees(pointers, &maps);
  }
  nb::object mapLists = makeList(maps.size(), [&](size_t k) {
    return makeList(maps[k].size(), [&](size_t i) { return PyLong_FromLong(maps[k][i]); })
        .release()
        .ptr();
  });
  return nb::make_tuple(ViewerTree(std::move(merged), std::move(others)), mapLists);
}

// A profile's kept frames (launch metadata hidden, -i/-e applied), the whole report on
// them, and the kept frames as a tree of their own (compacted, or folded); holds its
// ViewerTree alive.
class ViewerSelection {
 public:
  ViewerSelection(nb::object owner, std::vector<uint8_t> keep)
      : owner_(std::move(owner)), tree_(nb::cast<ViewerTree *>(owner_)), keep_(std::move(keep)) {}

  nb::list metricKinds() const { return ViewerTree::kindsOf(tree_->columns(), keep_); }

  nb::bytes keep() const { return nb::bytes(keep_.data(), keep_.size()); }

  // The kept nodes as a tree, in their order (Profile.subset).
  ViewerTree subset() const {
    TreeColumns out;
    {
      nb::gil_scoped_release release;
      out = viewer::subsetTree(tree_->columns(), keep_);
    }
    return ViewerTree(std::move(out), tree_->others());
  }

  // The kept nodes with Python frames shown as frames.py labels them (per string id: the
  // name shown, or None for a name that is not a frame; library: 1 for a library's frame),
  // library runs folded when `fold` (frames.fold).
  ViewerTree fold(nb::handle shown, nb::handle library, bool fold) const {
    const TreeColumns &tree = tree_->columns();
    size_t count = tree.strings.size();
    if (!PyList_Check(shown.ptr()) || static_cast<size_t>(PyList_GET_SIZE(shown.ptr())) != count ||
        !PyBytes_Check(library.ptr()) ||
        static_cast<size_t>(PyBytes_GET_SIZE(library.ptr())) != count) {
      throw nb::value_error("[PROTON] one label and one library flag per string");
    }
    std::vector<viewer::FrameLabel> labels(count);
    const char *flags = PyBytes_AS_STRING(library.ptr());
    for (size_t s = 0; s < count; ++s) {
      PyObject *name = PyList_GET_ITEM(shown.ptr(), static_cast<Py_ssize_t>(s));
      if (name == Py_None) continue;
      labels[s] = {true, flags[s] != 0, nb::cast<std::string>(nb::handle(name))};
    }
    TreeColumns out;
    {
      nb::gil_scoped_release release;
      viewer::MergeInput plan = viewer::foldFrames(tree, &keep_, labels, fold);
      out = viewer::mergeTrees({&plan}, nullptr);
    }
    out.metadata = tree.metadata;
    out.devices = tree.devices;
    return ViewerTree(std::move(out), tree_->others());
  }

  // The report of render.render() but the stats table, written to fd (True) or returned
  // (fd < 0). None, having written nothing, for arguments it does not take.
  nb::object report(nb::handle recipes, nb::handle titles, nb::handle exclusive,
                    std::optional<double> threshold, std::optional<int64_t> depth,
                    nb::handle displayNames, bool color, bool printSorted, int fd,
                    bool shortNames) {
    const TreeColumns &tree = tree_->columns();
    viewer::TreeTable table;
    std::vector<std::string_view> names;
    std::vector<viewer::ColumnRecipe> columns;
    if (!PyList_Check(recipes.ptr()) || !PyList_Check(titles.ptr()) ||
        PyList_GET_SIZE(recipes.ptr()) != PyList_GET_SIZE(titles.ptr()) ||
        PyList_GET_SIZE(recipes.ptr()) == 0) {
      return nb::none();
    }
    std::vector<uint8_t> exclusiveColumns = tree_->exclusiveColumns(exclusive);
    for (Py_ssize_t c = 0; c < PyList_GET_SIZE(recipes.ptr()); ++c) {
      viewer::ColumnRecipe recipe;
      if (!tree_->toRecipe(PyList_GET_ITEM(recipes.ptr(), c), &recipe)) return nb::none();
      columns.push_back(recipe);
      std::string title = nb::cast<std::string>(nb::handle(PyList_GET_ITEM(titles.ptr(), c)));
      table.titleLengths.push_back(viewer::countCharacters(title));
      table.titles.push_back(std::move(title));
    }
    std::vector<std::string> shortened;  // names[i] views shortened[i] where it is set
    if (displayNames.is_none()) {
      names.assign(tree.strings.begin(), tree.strings.end());
      if (shortNames) {
        shortened.resize(names.size());
        for (size_t i = 0; i < names.size(); ++i) {
          if (viewer::shortenKernelName(names[i], &shortened[i])) names[i] = shortened[i];
        }
      }
    } else if (!toViews(displayNames, &names) || names.size() != tree.strings.size()) {
      return nb::none();
    }
    std::string text;
    Status status;
    {
      nb::gil_scoped_release release;
      viewer::ColumnEvaluator evaluator(tree, keep_, std::move(exclusiveColumns));
      std::vector<std::vector<CellValue>> values(columns.size());
      for (size_t c = 0; c < columns.size(); ++c) evaluator.evaluate(columns[c], &values[c]);
      std::vector<int32_t> depths = viewer::nodeDepths(tree.parents);
      table.parents = &tree.parents;
      table.depths = &depths;
      table.nameIds = &tree.nameIds;
      table.names = &names;
      for (const auto &column : values) table.columns.push_back(&column);
      std::optional<viewer::TextSink> sink;
      if (fd >= 0) {
        sink.emplace(fd);
      } else {
        sink.emplace(&text);
      }
      std::vector<int32_t> order =
          viewer::visibleNodes(tree.parents, depths, keep_, values[0], threshold, depth);
      viewer::writeTreeLines(table, order, color, &*sink);
      if (printSorted) {
        if (depth) {  // the sorted list is not cut by depth
          order =
              viewer::visibleNodes(tree.parents, depths, keep_, values[0], threshold, std::nullopt);
        }
        viewer::writeSortedLines(table, order, &*sink);
      }
      status = sink->flush();
      if (!status.isOk()) errno = sink->error();
    }
    if (!status.isOk()) {
      PyErr_SetFromErrno(PyExc_OSError);
      throw nb::python_error();
    }
    if (fd >= 0) return nb::bool_(true);
    return textObject(text);
  }

 private:
  nb::object owner_;
  ViewerTree *tree_;
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

ViewerSelection selectFrames(nb::handle self, const std::string &hiddenName, nb::handle include,
                             nb::handle exclude) {
  const TreeColumns &tree = nb::cast<ViewerTree *>(self)->columns();
  std::optional<std::vector<uint8_t>> includeMask, excludeMask;
  if (!toMask(include, tree.strings.size(), &includeMask) ||
      !toMask(exclude, tree.strings.size(), &excludeMask)) {
    throw nb::value_error("[PROTON] an -i/-e mask needs one byte per string");
  }
  std::vector<uint8_t> keep;
  {
    nb::gil_scoped_release release;
    viewer::NodeSelection selection{hiddenName, includeMask ? &*includeMask : nullptr,
                                    excludeMask ? &*excludeMask : nullptr};
    keep = viewer::selectNodes(tree, selection);
  }
  return ViewerSelection(nb::borrow(self), std::move(keep));
}

// The tree's nodes with keep[i] set (bytes; closed under taking parents), compacted.
ViewerTree subsetOf(nb::handle self, nb::bytes keep) {
  const TreeColumns &tree = nb::cast<ViewerTree *>(self)->columns();
  if (keep.size() != tree.size()) throw nb::value_error("[PROTON] one keep flag per node");
  const auto *flags = static_cast<const uint8_t *>(keep.data());
  std::vector<uint8_t> mask(flags, flags + keep.size());
  for (size_t i = 1; i < mask.size(); ++i) {
    if (mask[i] && !mask[tree.parents[i]]) {
      throw nb::value_error("[PROTON] a kept node's parent must be kept");
    }
  }
  return ViewerSelection(nb::borrow(self), std::move(mask)).subset();
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
      .def("inclusive", &ViewerTree::inclusive, nb::arg("metric"), nb::arg("where").none(),
           nb::arg("exclusive"))
      .def("evaluate", &ViewerTree::evaluate, nb::arg("recipe"), nb::arg("exclusive"),
           "The column of one recipe (op, source, other, exponent, divisor) on every node.")
      .def("subset", &subsetOf, nb::arg("keep"))
      .def("select", &selectFrames, nb::arg("hidden_name"), nb::arg("include").none(),
           nb::arg("exclude").none(),
           "The frames kept after hiding `hidden_name` subtrees and applying per-string "
           "-i/-e masks (bytes).")
      .def_prop_ro("metadata", &ViewerTree::metadata)
      .def_prop_ro("devices", &ViewerTree::devices);
  nb::class_<ViewerSelection>(m, "ViewerSelection")
      .def("metric_kinds", &ViewerSelection::metricKinds)
      .def("keep", &ViewerSelection::keep)
      .def("subset", &ViewerSelection::subset)
      .def("fold", &ViewerSelection::fold, nb::arg("shown"), nb::arg("library"), nb::arg("fold"))
      .def("report", &ViewerSelection::report, nb::arg("recipes"), nb::arg("titles"),
           nb::arg("exclusive"), nb::arg("threshold").none(), nb::arg("depth").none(),
           nb::arg("names").none(), nb::arg("color"), nb::arg("print_sorted"), nb::arg("fd"),
           nb::arg("short_names") = false,
           "short_names: kernel signatures shown short (viewer/kernel_name.h) where `names` "
           "is None.");
  m.def("viewer_read", &readTree, nb::arg("path"), nb::arg("msgpack"),
        "A profile file in columns (a ViewerTree), or None when only the Python reader can "
        "read it (or explain why not).");
  m.def("viewer_tree", &treeFromPython, nb::arg("names"), nb::arg("parents"), nb::arg("rows"),
        "A ViewerTree of a profile's names, parents and rows (dicts).");
  m.def("viewer_merge", &mergeTrees, nb::arg("trees"),
        "(union of the trees by path, per tree the union node of each of its nodes).");
  bindViewerRender(m);
}

}  // namespace proton::bindings
