"""The Triton launch hook: evaluates `launch_metadata` and hands its result to the core.

For a kernel declared `@triton.jit(launch_metadata=fn)`, Triton passes each launch a lazy
dict; evaluating it calls `fn(grid, metadata, args)`. Its `name` renames the kernel's frame
and every numeric value becomes a metric of that kernel (flops8/16/32/64, flops, bytes, and
any other number). The core applies both to the next kernel this thread launches, which is
the one Triton launches between our enter and exit.

Kernels launched while `fn` runs (a torch op computing a size, say) are filed under
`__proton_launch_metadata/<name of the kernel being launched>` and get no metadata of their
own, so nothing is counted twice and you can tell whose metadata launched them. Kernel names matching `exclude`, or not matching `include` (regular expressions,
`re.match`), skip evaluation entirely.

As in triton.profiler, `id` and `op_name` are context variables: while a launch's metadata
function runs, and after that launch on the same thread, `id.get()` is a number unique to
that launch in this process and `op_name.get()` the kernel's name (None before any launch).

    hook = proton.hooks.launch.LaunchHook()      # the one instance of this process
    hook.configure(include="matmul_.*")
    proton.start("run", hook=hook)
"""

import re
from contextvars import ContextVar
from typing import Optional

from .. import _C
from .registry import Hook

# The launch being (or last) handled on this thread; see the module's docstring.
id = ContextVar("id", default=None)  # noqa: A001 (triton.profiler's name)
op_name = ContextVar("op_name", default=None)


def metrics_of(data) -> dict:
    """The metrics an evaluated launch-metadata dict gives its kernel: numbers (bool as int,
    numbers.Integral/Real converted) and tensors; never Triton's name/function/stream."""
    return _C.launch_metrics_of(data)


class LaunchHook(Hook):
    """The process-wide launch-metadata hook (a singleton: every session shares it)."""

    priority = 100
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance.configure()
        return cls._instance

    def configure(self, *, include: Optional[str] = None, exclude: Optional[str] = None) -> None:
        """Evaluate metadata only for kernel names matching include and not exclude."""
        self._include = re.compile(include) if include else None
        self._exclude = re.compile(exclude) if exclude else None
        self._matches_cache = {}
        filtered = self._include is not None or self._exclude is not None
        _C.configure_launch_hook(id, op_name, self.matches if filtered else None)

    def matches(self, kernel_name) -> bool:
        cached = self._matches_cache.get(kernel_name)
        if cached is not None:
            return cached
        name = kernel_name if isinstance(kernel_name, str) else ""
        ok = (self._include is None or self._include.match(name) is not None) and (
            self._exclude is None or self._exclude.match(name) is None
        )
        if len(self._matches_cache) < 4096:
            self._matches_cache[kernel_name] = ok
        return ok

    # The launch path: Triton calls the core's functions themselves, no Python frame between.
    # enter: the state becomes __proton_launch_metadata/<kernel>, `id` and `op_name` are set,
    # the metadata function runs, and its name and metrics go to the core for the next kernel
    # (not for a kernel whose name the filter rejects, before or after renaming).
    enter = staticmethod(_C.enter_launch_metadata)

    # Nothing to undo when the launch consumed the metadata; when it did not (no kernel was
    # launched, or no GPU backend), the next kernel must not inherit it. The core's function
    # itself, so that the dispatcher calls it with no Python frame in between.
    exit = staticmethod(_C.pop_launch_metadata)
