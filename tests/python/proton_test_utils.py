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


def run_python(code: str, cwd, env=None, timeout=60):
    """Runs code in a fresh interpreter with the proton package importable."""
    full_env = dict(os.environ)
    full_env.pop("PROTON_DISABLE", None)
    full_env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=str(cwd),
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def leftover_tmp_files(directory):
    return sorted(p.name for p in Path(directory).rglob("*") if ".tmp." in p.name)
