"""Scopes inside Triton kernels: `import proton.language as pl`.

    @triton.jit
    def kernel(...):
        with pl.scope("load"):
            a = tl.load(a_ptrs)
        pl.enter_scope("mma")
        acc = tl.dot(a, b, acc)
        pl.exit_scope("mma")
        event = pl.allocate_event("store")  # an event: a slice between start and end
        pl.start_event(event)
        tl.store(c_ptrs, acc)
        pl.end_event(event)

Names are compile-time strings. While a session with backend="instrumentation" is live,
each call compiles to a marker (an inline-assembly no-op naming the scope) that Proton's PTX
step turns into clock reads and buffer stores; otherwise the calls compile to nothing, so
the kernel's binary is the one it would be without them. Nesting is taken from the order of
the calls in the kernel's source, as the compiler sees it.

Thread-safety: compile-time only; the nesting stacks live on the builder of the code being
generated, which one thread uses.
"""

import warnings

_MARKER_PREFIX = "@proton"
_INSTRUMENTATION_PREFIX = "proton:"


def _triton_core():
    from triton.language import core

    return core


def _name(name) -> str:
    core = _triton_core()
    value = core._unwrap_if_constexpr(name)
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"[PROTON] a scope name must be a non-empty constant string, got {value!r}"
        )
    return value


# Kernel languages whose scopes are recorded. triton.profiler.language records Gluon kernels
# only until enable_semantic("triton"); here both are on until disable_semantic(name).
SEMANTICS = ("triton", "gluon")
_disabled = set()


def _semantic_name(semantic) -> str:
    return "gluon" if type(semantic).__name__.startswith("Gluon") else "triton"


def _check_semantic(name: str) -> str:
    if name not in SEMANTICS:
        from .errors import ConfigError

        raise ConfigError(
            f"[PROTON] Unknown semantic: {name!r}. Allowed values: {', '.join(SEMANTICS)}"
        )
    return name


def enable_semantic(name: str) -> None:
    """Records the scopes of kernels written in `name` ("triton" or "gluon"), the default for
    both: accepted so that code written for triton.profiler.language runs unchanged. Like
    disable_semantic, it takes effect for sessions started after it."""
    _disabled.discard(_check_semantic(name))


def disable_semantic(name: str) -> None:
    """Compiles the scopes of kernels written in `name` to nothing in sessions started after
    this call: their kernels keep only the implicit kernel scope. The choice goes into the
    session's mode string ("no_<name>"), so it keys Triton's caches."""
    _disabled.add(_check_semantic(name))


def disabled_semantics() -> tuple:
    return tuple(name for name in SEMANTICS if name in _disabled)


def _instrumenting(semantic) -> bool:
    options = getattr(semantic.builder, "options", None)
    mode = getattr(options, "instrumentation_mode", "") or ""
    if not mode.startswith(_INSTRUMENTATION_PREFIX):
        return False
    return f"no_{_semantic_name(semantic)}" not in mode.rpartition(":")[2].split(",")


class _CompileState:
    """What the calls of one code generator (a kernel, or a warp-specialized partition, which
    Gluon generates with a builder of its own) have left open: the scopes, outermost first,
    and each event's start path, where an end in that code finds it. It lives on the builder
    (Triton's builders take attributes; Triton sets `options` on them) and goes with it: an
    event started in a partition and never ended there, or a scope never closed, keeps
    nothing alive after the kernel is compiled."""

    __slots__ = ("events", "stack")

    def __init__(self):
        self.stack = []
        self.events = {}


# Builders that take no attribute (none of Triton's so far): by id, holding the builder so
# that its id is not reused; kept for the process, as the only way left.
_fallback_states = {}


def _state(semantic) -> _CompileState:
    builder = semantic.builder
    state = getattr(builder, "_proton_language", None)
    if state is None:
        state = _CompileState()
        try:
            builder._proton_language = state
        except (AttributeError, TypeError):
            entry = _fallback_states.get(id(builder))
            if entry is None or entry[0] is not builder:
                entry = _fallback_states[id(builder)] = (builder, state)
            state = entry[1]
    return state


def _stack(semantic) -> list:
    """The open scopes of the code `semantic` generates."""
    return _state(semantic).stack


def _marker(kind: str, path: list, semantic) -> None:
    core = _triton_core()
    encoded = "\x1f".join(path).encode("utf-8").hex()
    core.inline_asm_elementwise(
        f"mov.u32 $0, 0; // {_MARKER_PREFIX}:{kind}:{encoded}",
        "=r",
        [],
        dtype=core.int32,
        is_pure=False,
        pack=1,
        _semantic=semantic,
    )


def _enter(name, semantic, kind="E") -> None:
    if not _instrumenting(semantic):
        return
    stack = _stack(semantic)
    stack.append(_name(name))
    _marker(kind, stack, semantic)
    if kind == "S":  # where an end in other code (another partition) finds the event
        _event_paths(semantic)[stack[-1]] = list(stack)


def _event_paths(semantic) -> dict:
    """Event name -> the scope path of its start, in the code `semantic` generates."""
    return _state(semantic).events


def _end_event(name, semantic) -> None:
    """An event's end: the exit of its scope when it is open here (started in this code);
    otherwise an end of an event started in other code (a warp-specialized partition), which
    a trace links to the start across warps."""
    if not _instrumenting(semantic):
        return
    if name in _stack(semantic):
        _exit(name, semantic)
        return
    _marker("F", _event_paths(semantic).get(name, [name]), semantic)


def _exit(name, semantic) -> None:
    if not _instrumenting(semantic):
        return
    stack = _stack(semantic)
    name = _name(name)
    if name in stack:
        # Exiting an outer scope closes the ones opened inside it (crossing pairs are marked
        # as such, so the decoder counts them).
        while stack[-1] != name:
            warnings.warn(
                f"[PROTON] pl.exit_scope({name!r}) closes {stack[-1]!r}, opened inside it: "
                "counted as a crossing pair (stat instrumentation_crossing_scopes)",
                stacklevel=4,
            )
            _marker("C", list(stack), semantic)
            stack.pop()
        _marker("X", list(stack), semantic)
        stack.pop()
    else:
        warnings.warn(
            f"[PROTON] pl.exit_scope({name!r}) without a matching pl.enter_scope: counted "
            "(stat instrumentation_unmatched_scopes), not recorded",
            stacklevel=4,
        )
        _marker("U", stack + [name], semantic)


def _builtin(fn):
    from triton.language.core import builtin

    return builtin(fn)


class _Scope:
    def __init__(self, name, semantic):
        self.name = name
        self.semantic = semantic

    def __enter__(self):
        _enter(self.name, self.semantic)

    def __exit__(self, *exc):
        _exit(self.name, self.semantic)
        return False


def _event_name(event, semantic, call: str):
    """The name of an event from allocate_event (its type carries it), or None (with a
    warning) for any other value."""
    if not _instrumenting(semantic):
        return None
    name = getattr(getattr(event, "type", None), "proton_event_name", None)
    if name is None:
        warnings.warn(
            f"[PROTON] pl.{call} got a value that is not an event from pl.allocate_event: "
            "not recorded",
            stacklevel=4,
        )
    return name


def _event_type():
    core = _triton_core()

    class EventType(core.dtype):
        """int32, carrying the event's name: Triton rebuilds values from their type when it
        enters a loop or a branch, or calls a function, so the name travels in the type."""

        def __init__(self, name):
            super().__init__("int32")
            self.proton_event_name = name

    return EventType


def _define():
    EventType = _event_type()

    @_builtin
    def enter_scope(name, _semantic=None):
        """Opens the scope `name` (a constant string) for the calling warp."""
        _enter(name, _semantic)

    @_builtin
    def exit_scope(name, _semantic=None):
        """Closes the scope `name`, which must be the innermost one open."""
        _exit(name, _semantic)

    @_builtin
    def scope(name, _semantic=None):
        """`with pl.scope("name"):` in a kernel: enter_scope and exit_scope around the block."""
        return _Scope(name, _semantic)

    @_builtin
    def allocate_event(name, _semantic=None):
        """An event named `name` (a constant string), for start_event and end_event: what
        triton.profiler.language calls an async event. It is an int32 value in the kernel
        (0 when no instrumentation session is live, as Triton's)."""
        if not _instrumenting(_semantic):
            return 0
        return _triton_core().tensor(_semantic.to_tensor(0).handle, EventType(_name(name)))

    @_builtin
    def start_event(event, _semantic=None):
        """Starts the event: its slice runs from here to the next end_event of it. Started and
        ended in one warp's code, it is recorded as a scope of the event's name is; ended in
        other code (a warp-specialized partition), a trace links each warp's start to another
        warp's end (see docs/intra-kernel.md)."""
        name = _event_name(event, _semantic, "start_event")
        if name is not None:
            _enter(name, _semantic, "S")

    @_builtin
    def end_event(event, _semantic=None):
        """Ends the event started by the last start_event of it."""
        name = _event_name(event, _semantic, "end_event")
        if name is not None:
            _end_event(name, _semantic)

    return enter_scope, exit_scope, scope, allocate_event, start_event, end_event


try:
    enter_scope, exit_scope, scope, allocate_event, start_event, end_event = _define()
except ImportError:  # no Triton: the names exist, and say what is missing when used

    def _missing(*_args, **_kwargs):
        raise ImportError("[PROTON] proton.language needs Triton: pip install triton")

    enter_scope = exit_scope = scope = _missing
    allocate_event = start_event = end_event = _missing

# A kernel that uses these names must also compile inside torch.compile (Inductor's copy of it).
from . import _inductor_source  # noqa: E402

_inductor_source.install()
