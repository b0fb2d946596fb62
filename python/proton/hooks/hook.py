"""triton.profiler's `hooks.hook` names over Proton's hook registry, for scripts that import them.

    from proton.hooks.hook import Hook, HookManager
    HookManager.register(my_hook, session)        # as proton.start(..., hook=my_hook) does
    HookManager.active_hooks                      # the running hooks, by descending priority
    HookManager.session_hooks[session][my_hook]   # whether it runs for that session

HookManager holds no state of its own: every name reads or changes proton.hooks.registry,
which proton.start/activate/deactivate/finalize drive. Its lists and maps are snapshots.
"""

from typing import Dict, List, Optional

from .registry import Hook

__all__ = ["Hook", "HookManager"]


def _registry():
    """proton.hooks.registry, the HookRegistry instance (not the module of that name)."""
    from .. import hooks

    return hooks.registry


class _HookManagerType(type):
    @property
    def active_hooks(cls) -> List[Hook]:
        return list(_registry().active_hooks)

    @property
    def session_hooks(cls) -> Dict[int, Dict[Hook, bool]]:
        return {s: dict(hooks) for s, hooks in _registry()._sessions.items()}


class HookManager(metaclass=_HookManagerType):
    """triton.profiler's HookManager, as static methods over Proton's registry."""

    @staticmethod
    def enter(metadata) -> None:
        _registry().enter(metadata)

    @staticmethod
    def exit(metadata) -> None:
        _registry().exit(metadata)

    @staticmethod
    def register(hook: Hook, session: int) -> None:
        _registry().register(hook, session)

    @staticmethod
    def unregister(session: Optional[int] = None) -> None:
        _registry().unregister(session)

    @staticmethod
    def activate(session: Optional[int] = None) -> None:
        _registry().activate(session)

    @staticmethod
    def deactivate(session: Optional[int] = None) -> None:
        _registry().deactivate(session)
