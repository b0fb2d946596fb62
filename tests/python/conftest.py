"""Shared fixtures for the Python API tests (no GPU needed).

The C++ session manager is process-global, so every test runs in its own temporary
directory and leaves no session, open scope or state behind.
"""

import contextlib

import proton
import pytest
from proton import _C
from proton.flags import flags


def pytest_configure(config):
    # start() without a GPU warns once per process; the warning itself is tested in a subprocess.
    config.addinivalue_line("filterwarnings", "ignore:.*CPU scopes:RuntimeWarning")


def _close_open_scopes() -> None:
    """Pops scopes a test left open on this thread (only possible while profiling is on)."""
    if not _C.live_sessions():
        return
    for _ in range(10_000):
        try:
            proton.exit_scope()
        except proton.ScopeError:
            return


@pytest.fixture(autouse=True)
def isolated_proton(tmp_path, monkeypatch):
    """Runs the test inside tmp_path and finalizes every session after it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROTON_DISABLE", raising=False)
    yield tmp_path
    flags.command_line = False
    # Best effort: a failure here is reported below as leaked sessions.
    with contextlib.suppress(proton.ProfilerError):
        _close_open_scopes()
    proton.exit_state()
    with contextlib.suppress(proton.ProfilerError):
        proton.finalize()
    flags.command_line = False
    leaked = _C.live_sessions()
    assert not leaked, f"test left sessions {leaked} that could not be finalized"
