// The viewer's text report for proton.viewer.render() (render.py): columns given as Python
// lists, rendered by csrc/viewer/tree_render (the renderer proton-viewer's one-file report
// uses too), with the shown nodes chosen by csrc/viewer/tree_view.
//
//   _C.viewer_render(names, parents, [values], ["time/s"], None, 100, False, False)
//   -> "time/s  name\n 2.000  ROOT\n..."
//
// Called with the GIL held; the rendering releases it.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>

#include "bindings/viewer_lists.h"
#include "viewer/kernel_name.h"
#include "viewer/text_sink.h"
#include "viewer/tree_render.h"
#include "viewer/tree_view.h"

namespace proton::bindings {
namespace {

using viewer::CellValue;

std::vector<int32_t> parentsOf(nb::handle list) {
  std::vector<int32_t> parents;
  if (!toParents(list, &parents)) {
    throw nb::value_error("[PROTON] parents must list -1 for ROOT, then earlier nodes");
  }
  return parents;
}

std::vector<CellValue> cellsOf(nb::handle list, size_t n) {
  if (!PyList_Check(list.ptr()) || static_cast<size_t>(PyList_GET_SIZE(list.ptr())) != n) {
    throw nb::value_error("[PROTON] a column must be a list with one value per node");
  }
  std::vector<CellValue> cells(n);
  for (size_t i = 0; i < n; ++i) cells[i] = toCell(PyList_GET_ITEM(list.ptr(), i));
  return cells;
}

// render.visible_nodes: shown[i] for each node.
nb::bytes visible(nb::handle parentList, nb::handle first, std::optional<double> threshold,
                  std::optional<int64_t> depth) {
  std::vector<int32_t> parents = parentsOf(parentList);
  std::vector<CellValue> cells = cellsOf(first, parents.size());
  std::vector<uint8_t> shown(parents.size());
  {
    nb::gil_scoped_release release;
    std::vector<uint8_t> all(parents.size(), 1);
    std::vector<int32_t> depths = viewer::nodeDepths(parents);
    for (int32_t i : viewer::visibleNodes(parents, depths, all, cells, threshold, depth)) {
      shown[i] = 1;
    }
  }
  return nb::bytes(shown.data(), shown.size());
}

// The tree report (render.render but the stats table): header, shown nodes (-t/-d), the
// legend when coloured, the sorted list when asked for.
nb::object render(nb::handle names, nb::handle parentList, nb::handle columns, nb::handle titles,
                  std::optional<double> threshold, std::optional<int64_t> depth, bool color,
                  bool printSorted) {
  std::vector<int32_t> parents = parentsOf(parentList);
  size_t n = parents.size();
  std::vector<std::string_view> nameViews;
  if (!toViews(names, &nameViews) || nameViews.size() != n) {
    throw nb::value_error("[PROTON] names must be a list of str, one per node");
  }
  if (!PyList_Check(columns.ptr()) || !PyList_Check(titles.ptr()) ||
      PyList_GET_SIZE(columns.ptr()) != PyList_GET_SIZE(titles.ptr()) ||
      PyList_GET_SIZE(columns.ptr()) == 0) {
    throw nb::value_error("[PROTON] one title per column, one column at least");
  }
  std::vector<int32_t> depths = viewer::nodeDepths(parents);
  viewer::TreeTable table{&parents, &depths, nullptr, &nameViews, {}, {}, {}};
  std::vector<std::vector<CellValue>> cells;
  for (Py_ssize_t c = 0; c < PyList_GET_SIZE(columns.ptr()); ++c) {
    cells.push_back(cellsOf(PyList_GET_ITEM(columns.ptr(), c), n));
    std::string title = nb::cast<std::string>(nb::handle(PyList_GET_ITEM(titles.ptr(), c)));
    table.titleLengths.push_back(viewer::countCharacters(title));
    table.titles.push_back(std::move(title));
  }
  for (const auto &column : cells) table.columns.push_back(&column);
  std::string text;
  {
    nb::gil_scoped_release release;
    std::vector<uint8_t> all(n, 1);
    viewer::TextSink sink(&text);
    std::vector<int32_t> order =
        viewer::visibleNodes(parents, depths, all, cells[0], threshold, depth);
    viewer::writeTreeLines(table, order, color, &sink);
    if (printSorted) {
      if (depth) order = viewer::visibleNodes(parents, depths, all, cells[0], threshold, {});
      viewer::writeSortedLines(table, order, &sink);
    }
  }
  return textObject(text);
}

nb::object formatValues(nb::handle values) {
  if (!PyList_Check(values.ptr())) throw nb::type_error("[PROTON] values must be a list");
  std::string text;
  return makeList(static_cast<size_t>(PyList_GET_SIZE(values.ptr())), [&](size_t i) {
    text.clear();
    viewer::appendValue(toCell(PyList_GET_ITEM(values.ptr(), static_cast<Py_ssize_t>(i))), &text);
    return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr);
  });
}

nb::object depths(nb::handle parentList) {
  std::vector<int32_t> depth = viewer::nodeDepths(parentsOf(parentList));
  return makeList(depth.size(), [&](size_t i) { return PyLong_FromLong(depth[i]); });
}

}  // namespace

void bindViewerRender(nb::module_ &m) {
  m.def("viewer_render", &render, nb::arg("names"), nb::arg("parents"), nb::arg("columns"),
        nb::arg("titles"), nb::arg("threshold").none(), nb::arg("depth").none(), nb::arg("color"),
        nb::arg("print_sorted"),
        "The tree report of one column list per metric (render.render but the stats table).");
  m.def("viewer_visible", &visible, nb::arg("parents"), nb::arg("first"),
        nb::arg("threshold").none(), nb::arg("depth").none(),
        "Per node, 1 where the report shows it (render.visible_nodes).");
  m.def("viewer_format_values", &formatValues, nb::arg("values"),
        "Each value as the report prints it ('-' for None or NaN).");
  m.def("viewer_depths", &depths, nb::arg("parents"));
  m.def(
      "viewer_short_kernel_name",
      [](const std::string &name) {
        std::string out;
        return viewer::shortenKernelName(name, &out) ? out : name;
      },
      nb::arg("name"), "The name proton-viewer's tree shows for `name` (viewer/kernel_name.h).");
}

}  // namespace proton::bindings
