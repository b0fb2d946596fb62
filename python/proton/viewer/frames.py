"""Python frames as a user reads them: paths made relative, runs of library frames folded.

With `context="python"` a profile names each frame `file:line@function`, with the file as
CPython holds it (usually absolute). The profile keeps every frame; the viewer shows them
shorter:

    folded = fold(profile)                      # a new Profile; `profile` is unchanged
    folded = fold(profile, frames="short")      # paths shortened, nothing folded
    fold(profile, frames="all") is profile      # every frame, full names

    /usr/lib/python3.11/site-packages/torch/nn/modules/module.py:1790@_call_impl
        -> torch/nn/modules/module.py:1790@_call_impl
    /home/u/proj/train.py:10@main  (working directory /home/u/proj) -> train.py:10@main

Paths: a file under `site-packages/` or `dist-packages/` is shown from there on; a file of
the Python standard library (`.../lib/python3.X/...`) from its module path on; a file under
the program's working directory or its script's directory (the profile's metadata keys
`working_directory` and `script`, written by Proton since 0.2) relative to the deepest of
them. Anything else stays as it is.

Library frames: those in site-packages, dist-packages or the standard library, the
interpreter's own (`<frozen importlib._bootstrap>`, `<string>`, ...; not `<stdin>` or an
IPython cell), and, when the profile says where the program lives, every file outside its
working directory and script directory. A run of library frames, one calling the next, is
shown as one frame named after the first (outermost) one with the number of frames it
hides: `torch/nn/modules/module.py:1790@_call_impl (+17)`. A run ends where a frame of the
program, a scope or a kernel (any name that is not `file:line@function`) begins; those are
never folded. The frames of a run are shown where the run is left: below the last frame
of the run that has a child outside it, that has no child, or that has metrics of its own,
so a run left at different depths gives one line per depth. Nodes whose paths become the
same (two hidden chains of the same length, two spellings of one file) are merged, their
metrics added as model.align adds them.
"""

from __future__ import annotations

import posixpath
import re

from .model import Profile, _accumulate

MODES = ("folded", "short", "all")
DEFAULT_MODE = "folded"
MODES_HELP = (
    "how Python frames (file:line@function) are shown: 'folded' (default) shortens paths "
    "(relative to site-packages, the standard library, the working directory or the "
    "script's directory) and folds each run of library frames into its first frame, "
    "marked '(+N)' with the number of frames it hides; 'short' shortens paths only; "
    "'all' shows every frame with its full name, as written in the profile."
)

_FRAME = re.compile(r"(.+):(\d+)@(.*)", re.DOTALL)
_PACKAGES = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_STDLIB = re.compile(r"[/\\](?:lib[/\\](?:python|pypy)\d[\d.]*t?|Lib)[/\\]", re.IGNORECASE)
# Pseudo-files of code the user typed: the user's own, not the interpreter's.
_OWN_PSEUDO = ("<stdin>", "<ipython-input-", "<console>", "<input>")


def roots(metadata: dict) -> list:
    """The program's own directories recorded in the profile: its working directory and its
    script's directory (none for files written before Proton recorded them)."""
    out = []
    cwd = metadata.get("working_directory") if isinstance(metadata, dict) else None
    script = metadata.get("script") if isinstance(metadata, dict) else None
    if isinstance(cwd, str) and cwd.startswith("/"):
        out.append(posixpath.normpath(cwd))
    if isinstance(script, str) and script.startswith("/"):
        out.append(posixpath.dirname(posixpath.normpath(script)))
    return out


def short_path(path: str, own_roots=()) -> tuple:
    """(path as shown, whether it is a library's file) for a frame's file."""
    if path.startswith("<"):
        return path, not path.startswith(_OWN_PSEUDO)
    packages = None
    for packages in _PACKAGES.finditer(path):
        pass
    if packages is not None:
        return path[packages.end() :], True
    stdlib = None
    for stdlib in _STDLIB.finditer(path):
        pass
    if stdlib is not None:
        return path[stdlib.end() :], True
    best = None
    for root in own_roots:
        if root == "/" or path.startswith(root + "/"):
            rest = path[len(root) :].lstrip("/")
            if best is None or len(rest) < len(best):
                best = rest
    if best is not None:
        return best, False
    # Outside the program's directories: a library's, when the profile says where those are.
    return path, bool(own_roots) and path.startswith("/")


def frame_label(name: str, own_roots=()):
    """(name as shown, is a library frame) for a Python frame, None for any other name."""
    m = _FRAME.fullmatch(name)
    if m is None:
        return None
    file, line, function = m.groups()
    shown, library = short_path(file, own_roots)
    return f"{shown}:{line}@{function}", library


def labels(names, own_roots=()) -> dict:
    """name -> (name as shown, is a library frame) for the distinct frame names of `names`
    (other names are left out)."""
    out = {}
    for name in set(names):
        label = frame_label(name, own_roots)
        if label is not None:
            out[name] = label
    return out


def fold(profile: Profile, frames: str = DEFAULT_MODE, own_roots=None) -> Profile:
    """The profile as the viewer shows its Python frames (see the module docstring).

    frames: 'folded', 'short' or 'all' (the profile itself). own_roots: the program's
    directories; by default those of the profile's metadata (roots()). Returns a new
    Profile (the same devices, metadata and source); the input is not modified."""
    if frames not in MODES:
        raise ValueError(f"frames must be one of {', '.join(MODES)}, not {frames!r}")
    if frames == "all":
        return profile
    if own_roots is None:
        own_roots = roots(profile.metadata)
    table = labels(profile.names, own_roots)
    if not table:
        return profile
    targets, names, parents = fold_structure(
        profile.names, profile.parents, profile.rows, table, frames == "folded"
    )
    rows = [{} for _ in names]
    for i, row in enumerate(profile.rows):
        t = targets[i]
        if t >= 0 and row:
            _accumulate(rows[t], row)
    return Profile(names, parents, rows, profile.devices, profile.metadata, profile.source)


def fold_structure(names, parents, rows, table, folding: bool):
    """(targets, names, parents): targets[i] is the node of the folded tree that node i
    goes into (-1: none, a frame in the middle of a run), and names/parents describe the
    folded tree in pre-order. `table` is labels()' answer."""
    n = len(names)
    has_children = bytearray(n)
    has_other_child = bytearray(n)  # a child that is not a library frame
    library = bytearray(n)
    for i in range(n):
        label = table.get(names[i])
        if label is not None and label[1] and folding and i > 0:
            library[i] = 1
    for i in range(1, n):
        p = parents[i]
        has_children[p] = 1
        if not library[i]:
            has_other_child[p] = 1
    head = [-1] * n  # the first frame of i's run
    hidden = [0] * n  # how many frames of the run lie above i
    # Build the union tree: (new parent, shown name) -> new node, children first-seen.
    kids = [{}]
    union_names = [names[0]] if n else []
    raw = [-1] * n
    if n:
        raw[0] = 0
    for i in range(1, n):
        p = parents[i]
        name = names[i]
        label = table.get(name)
        shown = label[0] if label is not None else name
        if library[i]:
            if library[p]:
                head[i], hidden[i] = head[p], hidden[p] + 1
            else:
                head[i], hidden[i] = i, 0
            exit_here = has_other_child[i] or not has_children[i] or bool(rows[i])
            if not exit_here:
                continue
            h = head[i]
            base = parents[h]
            parent_new = raw[base]
            shown = table[names[h]][0] + (f" (+{hidden[i]})" if hidden[i] else "")
        else:
            parent_new = raw[p]
        table_kids = kids[parent_new]
        u = table_kids.get(shown)
        if u is None:
            u = table_kids[shown] = len(union_names)
            union_names.append(shown)
            kids.append({})
        raw[i] = u
    # Renumber in pre-order (children in first-seen order).
    order, out_parents = [], []
    new_index = [0] * len(union_names)
    stack = [(0, -1)] if n else []
    while stack:
        u, parent = stack.pop()
        new_index[u] = len(order)
        order.append(u)
        out_parents.append(parent)
        me = len(order) - 1
        for child in reversed(list(kids[u].values())):
            stack.append((child, me))
    targets = [new_index[u] if u >= 0 else -1 for u in raw]
    return targets, [union_names[u] for u in order], out_parents
