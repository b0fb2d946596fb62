"""Helpers shared by the Python API tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

import proton

PYTHON_DIR = str(Path(proton.__file__).resolve().parent.parent)


def shape(node):
    """A hatchet node reduced to (name, metrics, [children]) for exact comparisons."""
    assert node["frame"]["type"] == "function"
    return (node["frame"]["name"], node["metrics"], [shape(c) for c in node["children"]])


def names(node):
    """A hatchet node reduced to (name, [children]) (metrics ignored)."""
    return (node["frame"]["name"], [names(c) for c in node["children"]])


def find(node, *path):
    """The descendant of node reached by following child names."""
    for name in path:
        matches = [c for c in node["children"] if c["frame"]["name"] == name]
        assert len(matches) == 1, f"{name!r} not found exactly once under {node['frame']['name']!r}"
        node = matches[0]
    return node


def tree(session, phase=0):
    """The root of the session's phase as shape()."""
    return shape(proton.data.get(session, phase)[0])


def load_hatchet(path):
    with open(path) as f:
        return json.load(f)


def run_interpreter(argv, cwd, env=None, timeout=120, drop=(), paths=()):
    """argv run by this interpreter in cwd, with the proton package (and `paths`) importable
    and PROTON_DISABLE (and `drop`) unset."""
    full_env = dict(os.environ)
    for key in ("PROTON_DISABLE", *drop):
        full_env.pop(key, None)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [PYTHON_DIR, *map(str, paths), full_env.get("PYTHONPATH", "")]
    )
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, *argv],
        cwd=str(cwd),
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_python(code: str, cwd, env=None, timeout=60):
    """Runs code in a fresh interpreter with the proton package importable."""
    return run_interpreter(["-c", code], cwd, env, timeout)


def run_program(code: str, cwd, *, before=(), after=(), env=None, drop=(), paths=(), timeout=300):
    """Runs code written to cwd/prog.py (Triton reads its kernels' source from a file) as
    `python <before...> prog.py <after...>` in a fresh interpreter."""
    (Path(cwd) / "prog.py").write_text(code)
    return run_interpreter([*before, "prog.py", *after], cwd, env, timeout, drop, paths)


def leftover_tmp_files(directory):
    return sorted(p.name for p in Path(directory).rglob("*") if ".tmp." in p.name)
