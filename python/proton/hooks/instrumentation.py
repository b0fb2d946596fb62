"""triton.profiler's `hooks.instrumentation.InstrumentationHook`, for scripts that import it.

    from proton.hooks.instrumentation import InstrumentationHook
    InstrumentationHook.enable_host_buffer = True
    proton.start("run", backend="instrumentation")
    kernel[grid](...)
    raw = InstrumentationHook.host_buffer   # uint8 CPU tensor: the last launch's device buffer

Proton's intra-kernel recording is not a launch hook (backend="instrumentation" installs it),
so this class only carries triton.profiler's switches: `active_count` (live instrumentation
sessions) and the host copy of the last instrumented launch's buffer. That copy holds
Proton's own buffer layout (csrc/backends/instrumentation/ptx_rewrite.h), not Triton's
header and records: scripts that parse Triton's bytes cannot read it (docs/compatibility.md).
Reading host_buffer waits for that launch's stream.
"""

import ctypes
from typing import Optional

from .. import instrumentation as _instrumentation
from .registry import Hook

__all__ = ["InstrumentationHook"]


def _copy_to_host(address: int, size: int, stream: int):
    """The bytes at a device address, once the stream has run up to now (uint8 CPU tensor)."""
    import torch

    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuStreamSynchronize(ctypes.c_void_p(stream)) != 0:
        return None
    out = torch.empty(size, dtype=torch.uint8)
    copy = cuda.cuMemcpyDtoH_v2
    copy.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    if copy(ctypes.c_void_p(out.data_ptr()), address, size) != 0:
        return None
    return out


class _InstrumentationHookType(type):
    @property
    def active_count(cls) -> int:
        return len(_instrumentation.live_sessions())

    @property
    def host_buffer(cls):
        if not cls.enable_host_buffer:
            return None
        last = _instrumentation.last_buffer()
        return None if last is None else _copy_to_host(*last)

    @host_buffer.setter
    def host_buffer(cls, value) -> None:
        if value is not None:
            raise ValueError("host_buffer is read-only; set it to None to forget the last one")
        _instrumentation.forget_last_buffer()


class InstrumentationHook(Hook, metaclass=_InstrumentationHookType):
    """triton.profiler's switches of intra-kernel instrumentation (see the module docstring)."""

    priority: int = 0
    enable_host_buffer: bool = False
    profile_buffer_alignment: int = 128

    def __init__(self, mode_obj: Optional[object] = None) -> None:
        self.mode = _instrumentation._as_mode(mode_obj)


_instrumentation._hook_class = InstrumentationHook
