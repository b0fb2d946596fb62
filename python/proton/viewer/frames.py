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
`working_directory` and `script`; older files lack them) relative to the deepest of
them. Anything else stays as it is.

Code torch.compile generates (a file under a `torchinductor_<user>/` directory, Inductor's
cache) is shown from that directory on.

Library frames: those in site-packages, dist-packages, the standard library or Inductor's
cache, the
interpreter's own (`<frozen importlib._bootstrap>`, `<string>`, ...; not `<stdin>` or an
IPython cell), and, when the profile says where the program lives, every file outside its
working directory and script directory. A run of library frames, one calling the next, is
shown as one frame named after the first (outermost) one with the number of frames it
hides: `torch/nn/modules/module.py:1790@_call_impl (+17)`. A run ends where a frame of the
program, a scope or a kernel (any name that is not `file:line@function`) begins; those are
never folded. A run shows one line per place it is left (a frame of the run with a child
outside it, with no child, or with metrics of its own), so a run left at two depths gives
two lines, `(+2)` and `(+5)`, each with what lies below it. Nodes whose paths become the
same (two hidden chains of the same length, two spellings of one file) are merged, their
metrics added as model.align adds them.

The naming rules live here; the tree is folded by the viewer's C++ model
(csrc/viewer/tree_merge.h, foldFrames), which proton-viewer's one-file report calls too.
"""

from __future__ import annotations

import posixpath
import re

from .model import Profile

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
# Code torch.compile generates (Inductor's cache, torchinductor_<user>/ in the temporary
# directory or TORCHINDUCTOR_CACHE_DIR): a library's, wherever the program runs.
_GENERATED = re.compile(r"(?:^|[/\\])(torchinductor_[^/\\]*[/\\].*)")


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
    generated = _GENERATED.search(path)
    if generated is not None:
        return generated.group(1), True
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


def label_columns(strings, table) -> tuple:
    """labels() as the C++ fold takes them: per string, the name shown (None: not a frame),
    and a byte per string, 1 for a library's frame."""
    shown = [None] * len(strings)
    library = bytearray(len(strings))
    for k, name in enumerate(strings):
        label = table.get(name)
        if label is not None:
            shown[k], library[k] = label
    return shown, bytes(library)


def fold(profile: Profile, frames: str = DEFAULT_MODE, own_roots=None) -> Profile:
    """The profile as the viewer shows its Python frames (see the module docstring).

    frames: 'folded', 'short' or 'all'. own_roots: the program's directories; by default
    those of the profile's metadata (roots()). Returns a new Profile (the same devices,
    metadata and source), or the profile itself where nothing changes ('all', no Python
    frames); the input is never modified."""
    if frames not in MODES:
        raise ValueError(f"frames must be one of {', '.join(MODES)}, not {frames!r}")
    if frames == "all":
        return profile
    if own_roots is None:
        own_roots = roots(profile.metadata)
    tree = profile.tree
    strings = tree.strings()
    table = labels(strings, own_roots)
    if not table:
        return profile
    shown, library = label_columns(strings, table)
    folded = tree.select("", None, None).fold(shown, library, frames == "folded")
    return Profile.from_tree(folded, profile)
