"""context="native" from Python, no GPU needed: scopes are filed under the unwound C/C++ stack
of the interpreter that entered them, Proton's own frames (the bindings, libproton) left out,
and a native and a python session cannot run at once. Kernels: tests/gpu/test_native.py."""

import json
import re

import proton
import pytest

FRAME = re.compile(r".+ \(.+\+0x[0-9a-f]+\)")


def path_to(node, name, above=()):
    """The names above the first node called `name` (depth first), or None."""
    for c in node["children"]:
        if c["frame"]["name"] == name:
            return list(above)
        found = path_to(c, name, (*above, c["frame"]["name"]))
        if found is not None:
            return found
    return None


def test_scopes_sit_under_the_interpreters_native_frames(tmp_path):
    proton.start(str(tmp_path / "nat"), context="native")
    with proton.scope("outer"), proton.scope("inner"):
        pass
    proton.finalize()
    with open(tmp_path / "nat.hatchet") as f:
        root = json.load(f)[0]
    above = path_to(root, "inner")
    assert above is not None and above[-1] == "outer", above
    frames = above[:-1]
    # The interpreter's own C frames, each "function (module+0xoffset)", outermost first.
    assert frames, above
    assert all(FRAME.fullmatch(f) for f in frames), frames
    assert any("_PyEval_EvalFrame" in f or "PyEval_EvalCode" in f for f in frames), frames
    for f in frames:
        assert "libproton" not in f and "_C.cpython" not in f and "proton::" not in f, frames


def test_native_and_python_contexts_cannot_run_at_once(tmp_path):
    proton.start(str(tmp_path / "n"), context="native")
    try:
        with pytest.raises(proton.ConfigError, match="cannot run at the same time"):
            proton.start(str(tmp_path / "p"), context="python")
    finally:
        proton.finalize()
    proton.start(str(tmp_path / "p"), context="python")  # fine once the native one is gone
    proton.finalize()
