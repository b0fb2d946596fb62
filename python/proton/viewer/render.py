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

The text is written by the viewer's C++ renderer (csrc/viewer/tree_render.h), the one that
proton-viewer's one-file report writes with; this module chooses the names shown and adds
the stats table.
"""

from . import fast
from .derive import Column
from .model import Profile
from .names import short_kernel_name

_INT64_MAX = 2**63 - 1


def format_value(value) -> str:
    return fast.format_values([value])[0]


def format_values(values) -> list:
    return fast.format_values(list(values))


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


def clip_depth(depth):
    """-d as the renderer takes it (an int64)."""
    return None if depth is None else max(min(depth, _INT64_MAX), -_INT64_MAX)


def visible_nodes(profile: Profile, first: list, threshold=None, depth=None) -> bytearray:
    """Nodes shown: those whose first metric is >= threshold, with their ancestors (ROOT is
    always shown), cut below `depth` levels (ROOT is level 0, hatchet's convention)."""
    return bytearray(fast.visible(profile.parents, list(first), threshold, clip_depth(depth)))


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
    names = display_names(profile.names, name_format, full_names)
    if not isinstance(names, list):
        names = list(names)
    text = fast.render(
        names,
        profile.parents,
        [c.values if isinstance(c.values, list) else list(c.values) for c in columns],
        [c.title for c in columns],
        threshold,
        clip_depth(depth),
        color,
        print_sorted,
    )
    tail = stats_lines(stats)
    return text + ("\n".join(tail) + "\n" if tail else "")


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
