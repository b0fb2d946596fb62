"""Text rendering of a profile: the tree with one column per metric, the sorted list and
the stats table. Colour (ANSI) only when asked for; the layout is the same either way.

    text = render(profile, [derive(profile, "time/s")], threshold=0.1, depth=5)

     time/s  name
      2.000  ROOT
      1.500  ├─ forward
      1.500  │  └─ gemm
      0.500  └─ backward

Values are printed with three decimals, or in scientific notation when that would hide
them (|v| < 0.001 or >= 1e9); integers as they are; "-" where a node has no value.
"""

from . import fast
from .derive import Column
from .model import Profile, is_missing
from .names import short_kernel_name

TEE, ELBOW, PIPE, BLANK = "├─ ", "└─ ", "│  ", "   "
RESET = "\033[0m"
# Legend bands, high to low, as fractions of the first metric's range (as in hatchet).
BANDS = ((0.9, 1.0), (0.7, 0.9), (0.5, 0.7), (0.3, 0.5), (0.1, 0.3), (0.0, 0.1))
BAND_COLORS = tuple(f"\033[38;5;{c}m" for c in (196, 208, 220, 118, 40, 28))
SORTED_NAME_WIDTH = 105


def format_value(value) -> str:
    if is_missing(value):
        return "-"
    if value.__class__ is int:
        return str(value)
    magnitude = abs(value)
    if magnitude == 0 or 1e-3 <= magnitude < 1e9:
        return f"{value:.3f}"
    return f"{value:.3e}"


def format_values(values) -> list:
    """format_value over a column, inlined (this is the renderer's hottest loop)."""
    return [
        "-"
        if v is None
        else str(v)
        if v.__class__ is int
        else f"{v:.3f}"
        if v == 0 or 1e-3 <= abs(v) < 1e9
        else ("-" if v != v else f"{v:.3e}")  # noqa: PLR0124 (NaN)
        for v in values
    ]


def format_name(name: str, name_format: str) -> str:
    """Triton's -f formats for `file:line@function` frames (other names stay as they are)."""
    if name_format == "file_function_line":
        return name.split("/")[-1]
    if name_format == "function_line":
        return name.split(":")[-1]
    if name_format == "file_function" and "@" in name:
        return f"{name.split('/')[-1].split(':')[0]}@{name.split('@')[-1].split(':')[0]}"
    return name


def display_name(name: str, name_format: str = "full", full_names: bool = False) -> str:
    """A frame's name as the tree shows it: kernel signatures shortened (names.py) unless
    full_names, then the -f format."""
    if not full_names:
        name = short_kernel_name(name)
    return name if name_format == "full" else format_name(name, name_format)


def display_names(names, name_format: str = "full", full_names: bool = False) -> list:
    """display_name over a list, computed once per distinct name."""
    if full_names and name_format == "full":
        return names
    cache = {}
    out = []
    for name in names:
        shown = cache.get(name)
        if shown is None:
            shown = cache[name] = display_name(name, name_format, full_names)
        out.append(shown)
    return out


def visible_nodes(profile: Profile, first: list, threshold=None, depth=None) -> bytearray:
    """Nodes shown: those whose first metric is >= threshold, with their ancestors (ROOT is
    always shown), cut below `depth` levels (ROOT is level 0, hatchet's convention)."""
    n, parents = len(profile), profile.parents
    if threshold is None:
        shown = bytearray(b"\x01") * n
    else:
        shown = bytearray(n)
        for i in range(n - 1, 0, -1):
            v = first[i]
            if shown[i] or (v is not None and v >= threshold):
                shown[i] = 1
                shown[parents[i]] = 1
        shown[0] = 1
    if depth is not None:
        level = profile.depths()
        if max(level) >= depth:
            for i in range(n):
                if level[i] >= depth:
                    shown[i] = 0
            shown[0] = 1
    return shown


def _band(value, low, span) -> int:
    if is_missing(value) or span <= 0:
        return 0 if span <= 0 and value is not None else -1
    fraction = (value - low) / span
    for k, (bottom, _) in enumerate(BANDS):
        if fraction >= bottom:
            return k
    return len(BANDS) - 1


def render(
    profile: Profile,
    columns: list,
    *,
    threshold=None,
    depth=None,
    name_format="full",
    color=False,
    print_sorted=False,
    stats=None,
    full_names=False,
) -> str:
    """The whole report as one string (ending in a newline). Kernel signatures are shown
    short unless full_names (the profile's names are not changed)."""
    if not columns:  # a profile without metrics: names only
        columns, threshold, color = [Column("", [None] * len(profile))], None, False
    first = columns[0].values
    shown = visible_nodes(profile, first, threshold, depth)
    names = display_names(profile.names, name_format, full_names)
    body = None if color else _fast_rows(profile, columns, shown, names)
    lines = [body] if body is not None else _rows(profile, columns, shown, names, color)
    if print_sorted:
        if depth is not None:  # the sorted list is not cut by depth
            shown = visible_nodes(profile, first, threshold)
        lines.extend(_sorted_lines(profile, columns[0], shown, names))
    lines.extend(stats_lines(stats))
    return "\n".join(lines) + "\n"


def stats_lines(stats) -> list:
    """The stats table's lines (a blank line first), or none when every counter is 0."""
    if not stats or not any(v for v in stats.values() if isinstance(v, (int, float))):
        return []
    stats = {str(k): v for k, v in stats.items()}  # a damaged file may key them otherwise
    width = max(map(len, stats))
    return [
        "",
        "Profile stats (nonzero: something was dropped or unmatched):",
        *(f"  {k.ljust(width)}  {v}" for k, v in stats.items()),
    ]


def _fast_rows(profile: Profile, columns: list, shown, names):
    """The header and tree lines from the C++ renderer as one string; None if it cannot."""
    values = [col.values for col in columns]
    titles = [col.title for col in columns]
    return fast.render_rows(shown, names, profile.parents, profile.depths(), values, titles)


def _rows(profile: Profile, columns: list, shown, names, color) -> list:
    """The header and tree lines (and the legend when coloured), in Python."""
    first = columns[0].values
    order = [i for i in range(len(profile)) if shown[i]]
    cells = [format_values([col.values[i] for i in order]) for col in columns]
    widths = [max(len(col.title), max(map(len, texts))) for col, texts in zip(columns, cells)]
    lines = ["  ".join(c.title.rjust(w) for c, w in zip(columns, widths)) + "  name"]
    first_texts = [t.rjust(widths[0]) for t in cells[0]]
    if color:
        values = [first[i] for i in order if first[i] is not None and first[i] == first[i]]
        low, high = (min(values), max(values)) if values else (0, 0)
        for k, i in enumerate(order):
            band = _band(first[i], low, high - low)
            if band >= 0:
                first_texts[k] = BAND_COLORS[band] + first_texts[k] + RESET
    rest = [[t.rjust(w) for t in texts] for texts, w in zip(cells[1:], widths[1:])]
    tree_names = _tree_names(profile, order, names)
    lines.extend(map("  ".join, zip(first_texts, *rest, tree_names)))
    if color:
        lines.extend(_legend(columns[0].title, low, high))
    return lines


def _tree_names(profile: Profile, order, names) -> list:
    """Each shown node's (display) name behind its box-drawing prefix."""
    parents, level = profile.parents, profile.depths()
    is_last = _last_children(parents, order, len(profile))
    out = []
    add = out.append
    stems = [""]  # stems[d]: what a node at depth d+1 writes before its glyph
    for i in order:
        name = names[i]
        d = level[i]
        if d == 0:
            add(name)
            continue
        stem = stems[d - 1]
        del stems[d:]
        if is_last[i]:
            stems.append(stem + BLANK)
            add(stem + ELBOW + name)
        else:
            stems.append(stem + PIPE)
            add(stem + TEE + name)
    return out


def _last_children(parents, order, n) -> bytearray:
    """is_last[i]: node i is the last shown child of its parent."""
    is_last, seen = bytearray(n), bytearray(n)
    for i in reversed(order):
        p = parents[i]
        if p >= 0 and not seen[p]:
            seen[p] = 1
            is_last[i] = 1
    return is_last


def _legend(title, low, high) -> list:
    span = high - low
    lines = ["", f"Legend ({title}: min {format_value(low)}, max {format_value(high)})"]
    for color, (bottom, top) in zip(BAND_COLORS, BANDS):
        lo, hi = low + bottom * span, low + top * span
        lines.append(f"{color}█{RESET} {format_value(float(lo))} - {format_value(float(hi))}")
    return lines


def _sorted_lines(profile, column, shown, names) -> list:
    values = column.values
    nodes = [i for i in range(1, len(profile)) if shown[i]]
    nodes.sort(key=lambda i: (values[i] is None or values[i] != values[i], -(values[i] or 0)))
    lines = ["", f"Sorted kernels by metric {column.title}"]
    for i in nodes:
        name = names[i]
        if len(name) > 100:
            name = name[:100] + "..."
        lines.append(f"{name.ljust(SORTED_NAME_WIDTH)} {format_value(values[i])}")
    return lines
