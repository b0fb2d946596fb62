"""Proton: a lightweight GPU profiler for Triton, PyTorch and CUDA programs.

`import proton` can replace `import triton.profiler as proton`.
"""

from . import _threads, context, data, mode
from ._C import __version__
from .errors import (
    BackendUnavailableError,
    ConfigError,
    MetricTypeError,
    OutputError,
    ProfilerError,
    ScopeError,
    SessionError,
)
from .profile import DEFAULT_PROFILE_NAME, activate, deactivate, finalize, profile, start
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope
from .state import enter_state, exit_state, metadata_state, state

_threads.install()


def get_include() -> str:
    """The folder with Proton's C/C++ headers (proton/instrument.cuh), for nvcc -I."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


__all__ = [
    "get_include",
    "start",
    "activate",
    "deactivate",
    "finalize",
    "profile",
    "scope",
    "cpu_timed_scope",
    "enter_scope",
    "exit_scope",
    "state",
    "enter_state",
    "exit_state",
    "metadata_state",
    "context",
    "data",
    "mode",
    "DEFAULT_PROFILE_NAME",
    "ProfilerError",
    "ConfigError",
    "SessionError",
    "ScopeError",
    "MetricTypeError",
    "BackendUnavailableError",
    "OutputError",
    "__version__",
]
