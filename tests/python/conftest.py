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


@pytest.fixture
def pushed(monkeypatch):
    """What the launch hook handed to the core: (name, metrics) pending for the next kernel
    when each launch's exit hook runs, as the launch would have taken them."""
    from proton.hooks import LaunchHook

    calls = []

    def exit_recording(metadata=None):
        pending = _C.pending_launch_metadata()
        if pending is not None:
            calls.append(pending)
        _C.pop_launch_metadata(metadata)

    monkeypatch.setattr(LaunchHook, "exit", staticmethod(exit_recording))
    yield calls
    LaunchHook().configure()
