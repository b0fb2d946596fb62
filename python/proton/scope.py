"""Scopes: named regions of the program that kernels and metrics are attributed to."""

import functools
from typing import Optional

from . import _C


class scope(_C.Scope):
    """A context manager and decorator that opens a named scope.

        with proton.scope("forward", {"flops": 1e9}):
            model(x)

        @proton.scope("step")
        def step(): ...

    Metrics (int, float, str, list of numbers, or a 0-d or 1-d integer or float tensor) are
    added to the scope's node on entry; a name ending in "(exc)" is exclusive, "(pty)" a
    property. A GPU tensor is copied on the current stream, with no host synchronisation,
    and read back when the profile is flushed; inside CUDA graph capture, every replay
    records the value the tensor holds then. When profiling is off the scope does nothing.
    """

    __slots__ = ()

    def __call__(self, func):
        name, metrics, cls = self.name, self.metrics, type(self)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with cls(name, metrics):
                return func(*args, **kwargs)

        return wrapper


class cpu_timed_scope(_C.CpuTimedScope):
    """A scope that also records its wall time on the CPU as `cpu_time (ns)` (exclusive)."""

    __slots__ = ()

    __call__ = scope.__call__


def enter_scope(name: str, *, metrics: Optional[dict] = None) -> int:
    """Open a scope on this thread; returns its id, or -1 when profiling is off."""
    return _C.enter_scope(name, metrics)


def exit_scope(name: Optional[str] = None, *, metrics: Optional[dict] = None) -> int:
    """Close the innermost scope (checking its name when given); metrics are added on exit.

    Returns the id enter_scope gave, or -1 when profiling is off.
    """
    return _C.exit_scope(name, metrics)
