"""The hook registry: which launch hooks run, in which order, for which sessions.

    registry = HookRegistry(installer)
    registry.register(LaunchHook(), session=0)   # installs the dispatchers on first use
    registry.unregister(0)                       # removes them when no session needs a hook

Hooks run by descending priority on enter and in the reverse order on exit, so the first to
enter is the last to exit. A hook is active while at least one active session registered it;
the dispatchers are installed (through the installer, e.g. into triton.knobs) while any hook
is registered, and removed when the last session goes; while exactly one hook runs, its own
enter and exit are installed instead, so a launch calls it directly. Not thread-safe: sessions are started
and finalized from one thread at a time; dispatching reads a tuple swapped in atomically.
"""

from typing import Dict, Optional, Set


class Hook:
    """A launch hook. Subclasses override enter/exit (called with Triton's launch metadata)."""

    priority: int = 0

    def enter(self, metadata) -> None:
        pass

    def exit(self, metadata) -> None:
        pass

    def activate(self) -> None:
        """Called when the hook starts running (some active session needs it)."""

    def deactivate(self) -> None:
        """Called when no active session needs it any more."""


def _call(hook, method: str) -> None:
    """hook.activate() or hook.deactivate() where the object has it (a duck-typed hook may
    only have enter and exit)."""
    fn = getattr(hook, method, None)
    if callable(fn):
        fn()


class HookRegistry:
    def __init__(self, installer) -> None:
        self._installer = installer
        # session -> {hook: active}
        self._sessions: Dict[int, Dict[Hook, bool]] = {}
        self._enter = ()
        self._exit = ()
        self._installed = None  # the (enter, exit) pair installed, None when none is

    # ---- dispatch (launch path) -----------------------------------------------------------

    def enter(self, metadata) -> None:
        for hook in self._enter:
            hook.enter(metadata)

    def exit(self, metadata) -> None:
        for hook in self._exit:
            hook.exit(metadata)

    # ---- sessions -------------------------------------------------------------------------

    @property
    def active_hooks(self):
        """The running hooks, in enter order."""
        return self._enter

    @property
    def installed(self) -> bool:
        return self._installed is not None

    def register(self, hook: Hook, session: int) -> None:
        """Adds hook for session (active); installs the dispatchers if they are not yet."""
        if self._installed is None:  # no session yet: this hook will be the only one running
            self._installer.install(hook.enter, hook.exit)  # raises if it cannot
            self._installed = (hook.enter, hook.exit)
        self._sessions.setdefault(session, {})[hook] = True
        self._refresh()

    def unregister(self, session: Optional[int] = None) -> None:
        """Drops the hooks of one session (None: every session)."""
        if session is None:
            self._sessions.clear()
        else:
            self._sessions.pop(session, None)
        self._refresh()
        if not self._sessions and self._installed is not None:
            self._installer.uninstall()
            self._installed = None

    def activate(self, session: Optional[int] = None) -> None:
        self._set_active(session, True)

    def deactivate(self, session: Optional[int] = None) -> None:
        self._set_active(session, False)

    def sessions(self) -> Set[int]:
        return set(self._sessions)

    def _set_active(self, session: Optional[int], on: bool) -> None:
        targets = list(self._sessions) if session is None else [session]
        for s in targets:
            hooks = self._sessions.get(s)
            if hooks is not None:
                for hook in hooks:
                    hooks[hook] = on
        self._refresh()

    def _refresh(self) -> None:
        running = []
        for hooks in self._sessions.values():
            for hook, active in hooks.items():
                if active and hook not in running:
                    running.append(hook)
        before = set(self._enter)
        for hook in before - set(running):
            _call(hook, "deactivate")
        for hook in running:
            if hook not in before:
                _call(hook, "activate")
        # Stable sort: equal priorities keep registration order.
        running.sort(key=lambda h: getattr(h, "priority", 0), reverse=True)
        self._enter = tuple(running)
        self._exit = tuple(reversed(running))
        # One running hook is installed itself: no dispatch loop on the launch path.
        wanted = (
            (running[0].enter, running[0].exit) if len(running) == 1 else (self.enter, self.exit)
        )
        if self._sessions and self._installed is not None and self._installed != wanted:
            self._installer.uninstall()
            self._installer.install(*wanted)
            self._installed = wanted
