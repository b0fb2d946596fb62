"""Copies Triton's test files into a folder, with each top-level `from M import a, b` whose names
this Triton lacks (Triton's main-branch tests import APIs newer than the installed release, such
as a Blackwell-only Gluon module) importing the rest and binding each missing name to a
placeholder that skips the test using it. The tests themselves are not edited otherwise, so a
test that runs on this Triton runs as written, and one that needs a newer API is skipped with
the name it needed, instead of the whole file failing to import.

    python3 shim.py TESTS_DIR OUT_DIR      # OUT_DIR gets every file of TESTS_DIR, patched

Runs with the redirect active (triton.profiler is Proton), so `from triton.profiler.X import Y`
is checked against Proton too: a name Proton lacks is reported in shim.log, and skipped.
"""

import ast
import importlib
import os
import shutil
import sys

PLACEHOLDER = '''
class _AbsentFromThisTriton:
    """A name the installed Triton (or Proton) does not have: using it skips the test."""

    def __init__(self, name):
        self._name = name

    def _skip(self):
        import pytest

        pytest.skip(self._name + " is not in the installed Triton/Proton")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._skip()

    def __call__(self, *args, **kwargs):
        self._skip()

'''


# Helpers Triton's tests import from a newer Triton than the installed one, written here from
# what the tests need of them (never Triton's code): a missing name listed here gets this
# definition instead of a placeholder that skips its tests.
BACKPORTS = {
    "triton.testing.cuda_graph_without_gc": '''
import contextlib as _contextlib
import gc as _gc


@_contextlib.contextmanager
def cuda_graph_without_gc(graph, **kwargs):
    """torch.cuda.graph(graph, **kwargs) with Python's garbage collector off meanwhile."""
    import torch

    was_enabled = _gc.isenabled()
    _gc.disable()
    try:
        with torch.cuda.graph(graph, **kwargs):
            yield
    finally:
        if was_enabled:
            _gc.enable()
''',
}


def missing_names(node):
    """The names of an ImportFrom that do not import here."""
    try:
        module = importlib.import_module(node.module)
    except Exception:  # noqa: BLE001 (any import failure: every name is missing)
        return [alias for alias in node.names]
    missing = []
    for alias in node.names:
        if hasattr(module, alias.name):
            continue
        try:
            importlib.import_module(f"{node.module}.{alias.name}")
        except Exception:  # noqa: BLE001
            missing.append(alias)
    return missing


def patch(source, log):
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line, replacement)
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        missing = missing_names(node)
        if not missing:
            continue
        kept = [a for a in node.names if a not in missing]
        text = ""
        if kept:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            text += f"from {node.module} import {names}\n"
        for a in missing:
            bound = a.asname or a.name
            full = f"{node.module}.{a.name}"
            if full in BACKPORTS and bound == a.name:
                text += BACKPORTS[full]
                log.append(f"{full} (backported)")
                continue
            text += f"{bound} = _AbsentFromThisTriton({full!r})\n"
            log.append(full)
        edits.append((node.lineno, node.end_lineno, text))
    if not edits:
        return source
    for first, last, text in reversed(edits):
        lines[first - 1 : last] = [text]
    # After the module docstring and __future__ imports, before the first edited line.
    insert_at = edits[0][0] - 1
    lines.insert(insert_at, PLACEHOLDER)
    return "".join(lines)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    shutil.copytree(src, dst, dirs_exist_ok=True)
    report = []
    for name in sorted(os.listdir(dst)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        path = os.path.join(dst, name)
        with open(path) as f:
            source = f.read()
        log = []
        patched = patch(source, log)
        if patched != source:
            with open(path, "w") as f:
                f.write(patched)
        report.append(f"{name}: {', '.join(log) if log else 'as written'}")
    print("\n".join(report))


if __name__ == "__main__":
    main()
