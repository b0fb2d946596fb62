"""The exception hierarchy. Every class derives from ProfilerError (itself a RuntimeError);
where triton.profiler raises ValueError or TypeError, the subclass is also one."""

from ._C import (
    BackendUnavailableError,
    ConfigError,
    MetricTypeError,
    OutputError,
    ProfilerError,
    ScopeError,
    SessionError,
)

__all__ = [
    "ProfilerError",
    "ConfigError",
    "SessionError",
    "ScopeError",
    "MetricTypeError",
    "BackendUnavailableError",
    "OutputError",
]
