"""GPU tests: every test here is marked `gpu` and skipped when no NVIDIA GPU is usable."""

import pytest


def _gpu_reason():
    try:
        from proton import _C
    except ImportError as e:  # pragma: no cover - the package must be installed
        return f"proton is not installed: {e}"
    available, count, reason = _C.probe_gpu()
    return None if available and count > 0 else f"no NVIDIA GPU: {reason}"


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


import contextlib
import sys
from pathlib import Path

# The hatchet helpers of the CPU tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


@pytest.fixture(autouse=True)
def isolated_gpu_proton(tmp_path, monkeypatch):
    """Runs each GPU test in tmp_path and finalizes whatever it left open."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROTON_DISABLE", raising=False)
    yield tmp_path
    import proton

    for _ in range(100):
        with contextlib.suppress(proton.ProfilerError):
            proton.exit_scope()
    proton.exit_state()
    with contextlib.suppress(proton.ProfilerError):
        proton.finalize()
