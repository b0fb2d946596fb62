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

import itertools
import numbers
import re
import threading
from contextvars import ContextVar
from typing import Optional

from .. import _C
from .registry import Hook

# Keys Triton itself puts into the launch metadata; never metrics.
_RESERVED = frozenset(("name", "function", "stream"))

# The launch being (or last) handled on this thread; see the module's docstring.
id = ContextVar("id", default=None)  # noqa: A001 (triton.profiler's name)
op_name = ContextVar("op_name", default=None)
_launch_ids = itertools.count(1)  # next() on it is atomic under the GIL


def metrics_of(data) -> dict:
    """The numeric values of an evaluated launch-metadata dict, as metrics."""
    metrics = {}
    for key, value in data.items():
        if key in _RESERVED or not isinstance(key, str):
            continue
        t = type(value)
        if t is int or t is float:
            metrics[key] = value
        elif t is bool or isinstance(value, numbers.Integral):
            metrics[key] = int(value)
        elif isinstance(value, numbers.Real):
            metrics[key] = float(value)
        elif hasattr(value, "data_ptr") and hasattr(value, "dtype") and hasattr(value, "device"):
            metrics[key] = value  # a tensor: copied on the device, read back at flush
    return metrics


class LaunchHook(Hook):
    """The process-wide launch-metadata hook (a singleton: every session shares it)."""

    priority = 100
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._local = threading.local()
            cls._instance.configure()
        return cls._instance

    def configure(self, *, include: Optional[str] = None, exclude: Optional[str] = None) -> None:
        """Evaluate metadata only for kernel names matching include and not exclude."""
        self._include = re.compile(include) if include else None
        self._exclude = re.compile(exclude) if exclude else None
        self._matches_cache = {}

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

    def enter(self, metadata) -> None:
        local = self._local
        if getattr(local, "evaluating", False):
            return  # a kernel launched by a metadata function: no metadata of its own
        data = getattr(metadata, "data", None)
        kernel = data.get("name") if data is not None else None
        if data is not None and not self.matches(kernel):
            return
        local.evaluating = True
        id.set(next(_launch_ids))
        op_name.set(kernel)
        previous = _C.enter_metadata_state(kernel if isinstance(kernel, str) else None)
        try:
            data = metadata.get() if hasattr(metadata, "get") else metadata
        finally:
            _C.restore_state(previous)
            local.evaluating = False
        name = data.get("name")
        op_name.set(name)
        if not isinstance(name, str) or not self.matches(name):
            return
        _C.push_launch_metadata(name, metrics_of(data))

    def exit(self, metadata) -> None:
        # Nothing to undo when the launch consumed the metadata; when it did not (no kernel
        # was launched, or no GPU backend), the next kernel must not inherit it.
        _C.pop_launch_metadata()
