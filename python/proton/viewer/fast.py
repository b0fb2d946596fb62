"""The viewer's model, in C++ (proton._C, csrc/viewer): the one implementation of the tree
operations and metric arithmetic that model.py, derive.py, render.py, frames.py and the
one-file report (fast_report.py) share.

    tree = fast.read("run.hatchet", msgpack=False)   # a ViewerTree, or None: Python reads it
    tree = fast.tree(names, parents, rows)           # the same from Python's columns
    union, maps = fast.merge([tree_a, tree_b])        # trees merged by path
    text = fast.render(names, parents, [values], ["time/s"], None, 100, False, False)

Why one implementation, in C++: the model and its derived metrics used to exist twice (a
Python copy as the fallback of the C++ fast path) and every change of their meaning had
to be made in both. The C++ one must stay (a 1M-node profile renders in well under a
second only there), and `import proton` itself needs proton._C, so the viewer never runs
without it: the Python copy had no user left but the fallback for results C++ declined
(integers beyond int64), which the C++ arithmetic now defines itself (py_number.h: beyond
int64, floats). What stays in Python is what has no C++ twin: reading metric specs
(derive.recipe), `util` (device peaks), the frame naming rules (frames.py), combining
several files (main.build_view), --lines and the exports.
"""

from .. import _C

ViewerTree = _C.ViewerTree
tree = _C.viewer_tree
merge = _C.viewer_merge
depths = _C.viewer_depths
render = _C.viewer_render
visible = _C.viewer_visible
format_values = _C.viewer_format_values
short_kernel_name = _C.viewer_short_kernel_name


def can_read() -> bool:
    """Whether the C++ reader exists (always, in a built package)."""
    return True


def read(path, msgpack: bool):
    """The file's tree, or None where only the Python reader can read it (or say why not)."""
    if not isinstance(path, str):
        return None
    try:
        return _C.viewer_read(path, msgpack)
    except (TypeError, ValueError, UnicodeError):
        return None
