"""Installing launch dispatchers into Triton, chained with hooks installed before ours.

Triton calls `launch_enter_hook(metadata)` before and `launch_exit_hook(metadata)` after each
kernel launch. Where those live depends on the version:
- newest Triton: `triton.knobs.runtime.launch_enter_hook` is a HookChain (`add`/`remove`);
- Triton 3.4 and 3.5: `triton.knobs.runtime.launch_enter_hook` is one callable or None;
- older Triton: `triton.compiler.CompiledKernel.launch_enter_hook`, a class attribute.

A HookChain chains for us. A plain attribute gets a wrapper that calls the hook found there
first on enter and last on exit; on removal the attribute is restored when it still holds our
wrapper, and otherwise (someone installed theirs on top of ours meanwhile) our wrapper stays
and only forwards to the previous hook.
"""

from ..errors import BackendUnavailableError


def _is_hook_chain(value) -> bool:
    return callable(getattr(value, "add", None)) and callable(getattr(value, "remove", None))


class _ChainedHook:
    """Ours plus the hook that was installed before us. `reverse`: ours runs first (exit)."""

    __slots__ = ("previous", "ours", "reverse")

    def __init__(self, previous, ours, reverse: bool) -> None:
        self.previous = previous
        self.ours = ours
        self.reverse = reverse

    def __call__(self, metadata):
        ours, previous = self.ours, self.previous
        if self.reverse:
            if ours is not None:
                ours(metadata)
            if previous is not None:
                previous(metadata)
        else:
            if previous is not None:
                previous(metadata)
            if ours is not None:
                ours(metadata)


class _Slot:
    """One hook attribute, owner.attr."""

    def __init__(self, owner, attr: str, reverse: bool) -> None:
        self.owner = owner
        self.attr = attr
        self.reverse = reverse
        self._chain = None  # the HookChain we added to
        self._wrapper = None
        self._fn = None

    def install(self, fn) -> None:
        current = getattr(self.owner, self.attr, None)
        self._fn = fn
        if _is_hook_chain(current):
            current.add(fn)
            self._chain = current
            return
        self._wrapper = _ChainedHook(current, fn, self.reverse)
        setattr(self.owner, self.attr, self._wrapper)

    def uninstall(self) -> None:
        if self._chain is not None:
            self._chain.remove(self._fn)
            self._chain = None
        elif self._wrapper is not None:
            if getattr(self.owner, self.attr, None) is self._wrapper:
                setattr(self.owner, self.attr, self._wrapper.previous)
            else:
                self._wrapper.ours = None  # someone chained on top of us: only forward now
            self._wrapper = None
        self._fn = None


class LaunchHookInstaller:
    """Installs (enter, exit) dispatchers on an object with launch_enter_hook and
    launch_exit_hook attributes (triton.knobs.runtime, CompiledKernel, or a fake in tests)."""

    def __init__(self, owner) -> None:
        self._slots = (
            _Slot(owner, "launch_enter_hook", reverse=False),
            _Slot(owner, "launch_exit_hook", reverse=True),
        )

    def install(self, enter, exit) -> None:
        self._slots[0].install(enter)
        self._slots[1].install(exit)

    def uninstall(self) -> None:
        for slot in self._slots:
            slot.uninstall()


def triton_hook_owner():
    """Where this Triton keeps its launch hooks; BackendUnavailableError without Triton."""
    try:
        import triton  # noqa: F401
    except Exception as e:  # ImportError, or a broken install raising anything else
        raise BackendUnavailableError(
            "[PROTON] hook='triton' needs Triton, which could not be imported "
            f"({type(e).__name__}: {e}). Install it (pip install triton) or start without "
            "hook='triton'."
        ) from None
    try:
        from triton import knobs

        runtime = getattr(knobs, "runtime", None)
        if runtime is not None and hasattr(type(runtime), "launch_enter_hook"):
            return runtime
    except ImportError:
        pass
    try:
        from triton.compiler import CompiledKernel
    except ImportError:
        CompiledKernel = None
    if CompiledKernel is not None and hasattr(CompiledKernel, "launch_enter_hook"):
        return CompiledKernel
    raise BackendUnavailableError(
        f"[PROTON] hook='triton': this Triton ({getattr(triton, '__version__', '?')}) has "
        "neither triton.knobs.runtime.launch_enter_hook nor CompiledKernel.launch_enter_hook."
    )


class TritonInstaller:
    """Finds Triton's hook attributes at install time (so importing proton never imports
    Triton) and installs the dispatchers there."""

    def __init__(self) -> None:
        self._installer = None

    def install(self, enter, exit) -> None:
        installer = LaunchHookInstaller(triton_hook_owner())
        installer.install(enter, exit)
        self._installer = installer

    def uninstall(self) -> None:
        if self._installer is not None:
            self._installer.uninstall()
            self._installer = None
