"""proton-viewer's report of one file, without ever holding the nodes or the text as Python
objects: a 1M-node profile renders in well under a second.

    if fast_report.show(args, specs, color=False):   # written to stdout
        return 0                                       # else: main's path over Profiles

The same C++ model computes it as main's path over Profiles (fast.py): selection,
folding (frames.py's labels), derived columns and the renderer; this module only skips
making Python lists of the nodes. Python decides everything about names: metric specs are
resolved by derive.recipe (same errors), -i/-e regexes, frame labels and -f formats run on
each distinct string. show() returns False, having written nothing, for what only main's
path does: a file the C++ reader does not take (main's path reads it with Python's
reader), `util` (device peaks).
"""

import os
import sys

from ..state import COMPUTE_METADATA_SCOPE_NAME
from . import fast, frames
from .derive import default_metrics, recipe
from .model import exclusive_names, name_mask
from .readers import _decode_value, _decoding, _looks_like_msgpack, too_large
from .render import clip_depth, display_name, stats_lines


class _Metrics:
    """What derive.recipe needs to know of a profile: its metric names."""

    def __init__(self, names, exclusive, source):
        self.metric_names = names
        self.exclusive_metrics = exclusive
        self.source = source


def _read(path):
    """(ViewerTree, metadata dict) from the C++ reader, or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    except (OSError, ValueError, TypeError):
        return None
    if not head:
        return None
    msgpack = _looks_like_msgpack(path, head)
    try:
        tree = fast.read(path, msgpack)
    except MemoryError:
        raise too_large(path) from None
    if tree is None:
        return None
    try:
        with _decoding():
            metadata = _decode_value(tree.metadata, msgpack) if tree.metadata else {}
    except (ValueError, RecursionError, MemoryError):
        return None
    return tree, metadata if isinstance(metadata, dict) else {}


def _stdout_fd() -> int:
    """stdout's file descriptor when bytes written there read as sys.stdout's text; -1 when
    sys.stdout is not a UTF-8 file (a test's capture, another encoding)."""
    out = sys.stdout
    encoding = (getattr(out, "encoding", None) or "").lower().replace("_", "-")
    if encoding not in ("utf-8", "utf8"):
        return -1
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):
        return -1


def show(args, specs, color: bool) -> bool:
    """Writes the report of args.files[0] to stdout; False, having written nothing, when
    the Python path must do it."""
    path = args.files[0]
    loaded = _read(path)
    if loaded is None:
        return False
    tree, metadata = loaded
    folding = getattr(args, "frames", "all") != "all"
    need_strings = args.include or args.exclude or args.format != "full" or folding
    strings = tree.strings() if need_strings else None
    include = name_mask(strings, args.include, "-i/--include")
    exclude = name_mask(strings, args.exclude, "-e/--exclude")
    selection = tree.select(COMPUTE_METADATA_SCOPE_NAME, include, exclude)
    table = frames.labels(strings, frames.roots(metadata)) if folding else None
    if table:
        shown, library = frames.label_columns(strings, table)
        tree = selection.fold(shown, library, args.frames == "folded")
        selection = tree.select("", None, None)
        strings = tree.strings() if args.format != "full" else None
    names = [name for name, number in selection.metric_kinds() if number]
    try:
        exclusive = exclusive_names(metadata.get("metric_aggregation"), names)  # as the model
    except ValueError:
        return False  # malformed metadata: the Python model says what it makes of it
    metrics = _Metrics(names, exclusive, str(path))
    specs = specs if specs is not None else default_metrics(metrics)
    recipes = [recipe(metrics, s) for s in specs]
    if any(r.op == "util" for r in recipes):
        return False
    threshold = args.threshold
    if recipes:
        encoded = [(r.op, r.source, r.other, r.exponent, r.divisor) for r in recipes]
        titles = [r.title for r in recipes]
    else:  # a profile without metrics: names only
        encoded, titles, threshold, color = [("none", None, None, 0, 1)], [""], None, False
    display = None
    full_names = getattr(args, "full_names", False)
    if args.format != "full":
        display = [display_name(s, args.format, full_names) for s in strings]
    depth = clip_depth(args.depth)
    fd = _stdout_fd()
    if fd >= 0:
        sys.stdout.flush()
    text = selection.report(
        encoded,
        titles,
        sorted(exclusive),
        threshold,
        depth,
        display,
        color,
        args.print_sorted,
        fd,
        not full_names,  # short kernel names, computed in C++ where `display` is None
    )
    if text is None:
        return False
    if fd < 0:
        sys.stdout.write(text)
    stats = metadata.get("stats")
    tail = stats_lines(stats if isinstance(stats, dict) else {})
    if tail:
        sys.stdout.write("\n".join(tail) + "\n")
    return True


def enabled() -> bool:
    """False when PROTON_VIEWER_PYTHON=1 asks for main's path over Profiles (tests compare
    both)."""
    return os.environ.get("PROTON_VIEWER_PYTHON", "") in ("", "0")
