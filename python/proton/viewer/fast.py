"""The viewer's C++ fast path (proton._C): the Hatchet reader and whole-column kernels.

    tree = fast.read("run.hatchet", msgpack=False)    # a ViewerTree, or None
    totals = fast.inclusive(column, parents)          # a list, or None

Each function returns None where the C++ code cannot give exactly the Python code's
answer (or the extension is missing); the caller then runs its Python code.
"""

try:
    from .. import _C
except ImportError:  # a source tree without the extension built
    _C = None

_READ = getattr(_C, "viewer_read", None)
_INCLUSIVE = getattr(_C, "viewer_inclusive", None)
_DEPTHS = getattr(_C, "viewer_depths", None)
_RENDER_ROWS = getattr(_C, "viewer_render_rows", None)


def can_read() -> bool:
    """Whether the C++ reader exists (a file it gave back is one it could not read)."""
    return _READ is not None


def read(path, msgpack: bool):
    if _READ is None or not isinstance(path, str):
        return None
    try:
        return _READ(path, msgpack)
    except (TypeError, ValueError, UnicodeError):
        return None


def inclusive(values, parents):
    if _INCLUSIVE is None or type(values) is not list or type(parents) is not list:
        return None
    return _INCLUSIVE(values, parents)


def depths(parents):
    if _DEPTHS is None or type(parents) is not list:
        return None
    return _DEPTHS(parents)


def render_rows(shown, names, parents, depths, columns, titles):
    """render.py's header and tree lines, joined by newlines."""
    if _RENDER_ROWS is None or type(names) is not list or type(parents) is not list:
        return None
    return _RENDER_ROWS(bytes(shown), names, parents, depths, columns, titles)
