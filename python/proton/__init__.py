"""Proton: a lightweight GPU profiler for Triton, PyTorch and CUDA programs.

`import proton` can replace `import triton.profiler as proton`.
"""

from . import _threads, context, data, frameworks, mode
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
from .native import get_cmake_dir, get_include, get_lib_dir
from .profile import DEFAULT_PROFILE_NAME, activate, deactivate, finalize, profile, start
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope
from .state import enter_state, exit_state, metadata_state, state

_threads.install()
frameworks.install()


__all__ = [
    "get_include",
    "get_lib_dir",
    "get_cmake_dir",
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
