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
