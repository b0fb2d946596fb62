"""Launch hooks: `hook="triton"` evaluates Triton's launch metadata for every session.

    proton.start("run", hook="triton")
    proton.hooks.configure_launch_filter(include="matmul_.*")   # optional
    proton.start("run", hook=proton.hooks.launch.LaunchHook())  # the same, as an object

A hook object is any `Hook` (or an object with `enter(metadata)` and `exit(metadata)`, such
as a triton.profiler hook): it runs for every Triton launch while its session is active.

The registry installs its dispatchers into Triton (chained with any hook already there) when
the first session asks for a hook and removes them when the last such session is finalized.
"""

from typing import Optional, Union

from . import launch
from .install import LaunchHookInstaller, TritonInstaller, triton_hook_owner
from .launch import LaunchHook, metrics_of
from .registry import Hook, HookRegistry

registry = HookRegistry(TritonInstaller())

_HOOKS = {"triton": LaunchHook}


def is_hook_object(hook) -> bool:
    """Whether start(hook=...) can run this object for each launch."""
    if isinstance(hook, Hook):
        return True
    return callable(getattr(hook, "enter", None)) and callable(getattr(hook, "exit", None))


def resolve(hook) -> Optional[Hook]:
    """start(hook=...)'s value as a hook object: None, "triton" or a hook object; anything else
    raises ValueError as triton.profiler does."""
    if hook is None:
        return None
    if isinstance(hook, str) and hook in _HOOKS:
        return _HOOKS[hook]()
    if not isinstance(hook, str) and is_hook_object(hook):
        return hook
    raise ValueError(f"Unsupported hook: {hook!r}")


def register(session: int, hook: Union[str, Hook]) -> None:
    """Runs the hook (a name or an object) for session; BackendUnavailableError when Triton
    is missing."""
    registry.register(resolve(hook), session)


def __getattr__(name):
    """`proton.hooks.InstrumentationHook`, as triton.profiler's scripts reach it (imported on
    first use: it needs proton.instrumentation, which imports this package)."""
    if name == "InstrumentationHook":
        from .instrumentation import InstrumentationHook

        return InstrumentationHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "is_hook_object",
    "launch",
    "metrics_of",
    "register",
    "registry",
    "resolve",
    "triton_hook_owner",
]
