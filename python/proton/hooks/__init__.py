"""Launch hooks: `hook="triton"` evaluates Triton's launch metadata for every session.

    proton.start("run", hook="triton")
    proton.hooks.configure_launch_filter(include="matmul_.*")   # optional

The registry installs its dispatchers into Triton (chained with any hook already there) when
the first session asks for a hook and removes them when the last such session is finalized.
"""

from typing import Optional

from .install import LaunchHookInstaller, TritonInstaller, triton_hook_owner
from .launch import LaunchHook, metrics_of
from .registry import Hook, HookRegistry

registry = HookRegistry(TritonInstaller())

_HOOKS = {"triton": LaunchHook}


def register(session: int, hook: str) -> None:
    """Runs the named hook for session; BackendUnavailableError when Triton is missing."""
    registry.register(_HOOKS[hook](), session)


def configure_launch_filter(include: Optional[str] = None, exclude: Optional[str] = None) -> None:
    """Evaluate launch metadata only for kernels whose name matches include (re.match) and
    does not match exclude; the others keep their own name and get no metrics."""
    LaunchHook().configure(include=include, exclude=exclude)


__all__ = [
    "Hook",
    "HookRegistry",
    "LaunchHook",
    "LaunchHookInstaller",
    "TritonInstaller",
    "configure_launch_filter",
    "metrics_of",
    "register",
    "registry",
    "triton_hook_owner",
]
