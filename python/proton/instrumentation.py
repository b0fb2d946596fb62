"""backend="instrumentation": compiles Triton kernels with Proton's intra-kernel recording.

While an instrumentation session is live:
- `triton.knobs.compilation.instrumentation_mode` holds Proton's mode string, so Triton's
  in-memory and on-disk caches keep instrumented binaries apart from plain ones (kernels
  compiled before start() are compiled again; after finalize() the plain ones are used);
- a compile step after Triton's PTX stage rewrites the scope markers (proton.language) and
  adds one implicit scope around the kernel (ptx_rewrite.cc);
- each loaded kernel's scope table is handed to the core (from its compile metadata, so
  binaries from Triton's cache decode too);
- Triton's profile allocator hands each launch its slice of Proton's device buffer;
- kernels that torch.compile generated, and Triton kernels launched with a binary loaded
  before the session, run instrumented binaries of their own (_inductor.py,
  _triton_launcher.py).
Everything is put back as it was when the last instrumentation session is finalized, but on
Triton 3.6, whose null profile allocator raises, the allocator then hands out no buffer (so a
CompiledKernel compiled in a session and kept by the program still launches).
"""

import dataclasses
import hashlib
import json
import os
import warnings

from . import _C, _inductor, _triton_launcher
from . import mode as _mode

_PREFIX = "proton:"
_METADATA_KEY = "proton_instrumentation"
_DEFAULT_UNIT_BYTES = 2048
_UNIT_WARPS = {
    "cta": 0,
    "warp": 1,
    "warp_2": 2,
    "warp_4": 4,
    "warp_8": 8,
    "warp_group": 4,
    "warp_group_2": 8,
    "warp_group_4": 16,
    "warp_group_8": 32,
}
# Device buffers: GPU memory per device for the launches between two drains (and an eighth of
# it more for CUDA graphs' slots); slices kept in a trace (the size cap: beyond it launches run
# without recording, counted). PROTON_INSTRUMENTATION_RING_MB and
# PROTON_INSTRUMENTATION_TRACE_EVENTS set them.
RING_BYTES = 256 << 20
MAX_TRACE_EVENTS = 1 << 20
_LIMITS = {
    "PROTON_INSTRUMENTATION_RING_MB": (RING_BYTES >> 20, 1, 1 << 20),
    "PROTON_INSTRUMENTATION_TRACE_EVENTS": (MAX_TRACE_EVENTS, 1, 1 << 40),
}


def limit(variable: str) -> int:
    """The value of one of the _LIMITS environment variables (its default when unset)."""
    default, low, high = _LIMITS[variable]
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        from .errors import ConfigError

        raise ConfigError(
            f"[PROTON] {variable}={text!r}: expected a whole number from {low} to {high} "
            f"(default {default})"
        )
    return value


class _State:
    """What the live instrumentation sessions share: one compile configuration."""

    def __init__(self):
        self.sessions = set()
        self.config = ""
        self.trace = False
        self.saved = {}
        self.warned = set()


_state = _State()


def _as_mode(mode) -> _mode.InstrumentationMode:
    if mode is None or mode == "":
        return _mode.Default()
    if isinstance(mode, _mode.InstrumentationMode):
        return mode
    if isinstance(mode, str):
        from .errors import ConfigError

        name, _, rest = mode.partition(":")
        cls = {"default": _mode.Default, "mma": _mode.MMA}.get(name)
        if cls is None:
            raise ConfigError(
                f"[PROTON] backend='instrumentation' takes mode 'default' or 'mma', got {mode!r}"
            )
        allowed = [f.name for f in dataclasses.fields(cls) if f.init]
        fields = {}
        for item in filter(None, rest.split(":")):
            key, _, value = item.partition("=")
            if key not in allowed:
                raise ConfigError(
                    f"[PROTON] Unknown option {key!r} in mode {mode!r}. Allowed options: "
                    + ", ".join(allowed)
                )
            fields[key] = value.replace(";", ",")
        if "buffer_size" in fields:
            try:
                fields["buffer_size"] = int(fields["buffer_size"] or 0)
            except ValueError:
                raise ConfigError(
                    f"[PROTON] buffer_size must be a number of bytes, got {fields['buffer_size']!r}"
                ) from None
        return cls(**fields)
    raise TypeError(f"[PROTON] mode must be a str or proton.mode object, got {type(mode).__name__}")


def capacity_of(mode: _mode.InstrumentationMode) -> int:
    """Events per recording unit: buffer_size bytes (8 per event), a power of two."""
    events = max(8, (mode.buffer_size or _DEFAULT_UNIT_BYTES) // 8)
    return 1 << (events.bit_length() - 1)


def config_string(mode: _mode.InstrumentationMode, data: str) -> str:
    """The compile-time configuration: what ptx_rewrite.cc parses; it keys Triton's caches."""
    units = ",".join(str(u) for u in mode.selected_units())
    if mode.sampling_strategy != "selective":
        units = "*"
    opts = [o for o in mode.optimizations if o in ("clock32", "time_shift")]
    if data != "trace" and "clock32" not in opts:
        # A tree's scope times are 64-bit unless clock32 is asked for, as in triton.profiler:
        # 32-bit deltas wrap, unsaid, in a scope run of 2^32 cycles (about 2.2 s on an H100).
        opts.insert(0, "clock64")
    if mode.buffer_type == "shared":
        # Tree: a CTA's units add their sums in shared memory and store one record per CTA
        # (where the kernel's shared memory allows; ptx_rewrite.cc decides per kernel).
        opts.append("cta_sums")
    from . import language

    # Languages whose scopes compile to nothing (language.disable_semantic).
    opts += [f"no_{name}" for name in language.disabled_semantics()]
    # The device-buffer layout keys Triton's caches too: a kernel cached by a Proton that
    # wrote another layout is compiled again.
    opts.append(f"layout{_C.INSTRUMENTATION_LAYOUT}")
    return (
        f"{_PREFIX}{'trace' if data == 'trace' else 'tree'}:{_UNIT_WARPS[mode.granularity]}"
        f":{capacity_of(mode)}:{units}:{','.join(opts)}"
    )


def prepare(mode, data: str) -> tuple:
    """Checks the mode before the session starts: (mode string for the core, typed mode)."""
    m = _as_mode(mode)
    config = config_string(m, data or "tree")
    for variable in _LIMITS:
        limit(variable)  # a bad value fails here, before the session exists
    if _state.sessions and config != _state.config:
        from .errors import ConfigError

        raise ConfigError(
            "[PROTON] another instrumentation session compiles kernels with "
            f"{_state.config!r}, this one would with {config!r} (another mode, or "
            "proton.language.disable_semantic/enable_semantic called since it started); one "
            "configuration per process at a time (finalize it first)"
        )
    return str(m), m


def activate(session: int, m: _mode.InstrumentationMode, data: str) -> None:
    """The session started: install the compile step, the load hook and the allocator."""
    config = config_string(m, data or "tree")
    first = not _state.sessions
    _state.sessions.add(session)
    if not first:
        return
    _state.config = config
    _state.trace = config.split(":")[1] == "trace"
    _C.set_instrumentation_limits(
        limit("PROTON_INSTRUMENTATION_RING_MB") << 20,
        limit("PROTON_INSTRUMENTATION_TRACE_EVENTS"),
        capacity_of(m),
    )
    try:
        import triton
        from triton.runtime import _allocation
    except ImportError:
        return  # no Triton: only kernels built with proton/instrument.cuh record
    knobs = triton.knobs
    _state.saved = {
        "mode": knobs.compilation.instrumentation_mode,
        "stages": knobs.runtime.add_stages_inspection_hook,
        "allocator": _allocation._profile_allocator.get(),
    }
    knobs.compilation.instrumentation_mode = config
    previous = _state.saved["stages"]

    def stages_hook(*args):
        # Triton 3.7 and later first call the hook with no arguments for a cache key and its
        # hash; then, like 3.6, with (backend, stages, options, language, capability).
        if not args:
            key = (previous()[0] if previous is not None else "") + config
            return key, hashlib.sha256(key.encode()).hexdigest()
        if previous is not None:
            previous(*args)
        stages, options = args[1], args[2]
        _add_ptx_step(stages, getattr(options, "instrumentation_mode", ""))

    knobs.runtime.add_stages_inspection_hook = stages_hook
    knobs.runtime.kernel_load_end_hook.add(_on_kernel_load)
    _allocation.set_profile_allocator(_allocate)
    _inductor.install(config, _state.trace, _max_shared, _warn_once)
    _triton_launcher.install(config, _max_shared, _warn_once)


def live_sessions() -> set:
    return set(_state.sessions)


def deactivate(session=None) -> None:
    """Sessions were finalized (None: all): the last one puts Triton back as it was."""
    if session is None:
        _state.sessions.clear()
    else:
        _state.sessions.discard(session)
    if _state.sessions or not _state.saved:
        return
    import triton
    from triton.runtime import _allocation

    knobs = triton.knobs
    knobs.compilation.instrumentation_mode = _state.saved["mode"]
    knobs.runtime.add_stages_inspection_hook = _state.saved["stages"]
    knobs.runtime.kernel_load_end_hook.remove(_on_kernel_load)
    allocator = _state.saved["allocator"]
    null = isinstance(allocator, _allocation.NullAllocator)
    if null and not hasattr(_allocation, "has_profile_allocator"):
        # A binary compiled in the session (a CompiledKernel the program kept) asks for a
        # profile buffer at every launch, and Triton 3.6's launcher calls the null allocator,
        # which raises (later Tritons allocate a default buffer when none is set). It gets
        # none: its recording is off (the buffer's address is checked in the kernel).
        allocator = _no_buffer
    _allocation.set_profile_allocator(allocator)
    _inductor.uninstall()
    _triton_launcher.uninstall()
    _state.saved = {}


def _warn_once(kernel: str, message: str) -> None:
    if kernel not in _state.warned:
        _state.warned.add(kernel)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _add_ptx_step(stages: dict, config: str) -> None:
    if not config.startswith(_PREFIX) or "ptx" not in stages:
        return
    make_ptx = stages["ptx"]

    def ptx_with_instrumentation(src, metadata):
        ptx = make_ptx(src, metadata)
        name = metadata.get("name", "?")
        shared = int(metadata.get("shared", 0) or 0)
        try:
            new_ptx, needed, slot_bytes, table = _triton_launcher.instrument(
                ptx, config, shared, _max_shared()
            )
        except _C.ProfilerError as e:
            _warn_once(name, f"[PROTON] kernel {name} runs without instrumentation: {e}")
            return ptx
        if needed != shared:
            metadata["shared"] = needed  # the CTA sums sit past the kernel's own
        # Per CTA, its units' records: Triton's launcher asks the profile allocator for
        # grid * this many bytes per launch.
        metadata["profile_scratch_size"] = slot_bytes
        metadata["profile_scratch_align"] = 256
        metadata[_METADATA_KEY] = table
        return new_ptx

    stages["ptx"] = ptx_with_instrumentation


def _max_shared() -> int:
    """The most dynamic shared memory a CTA may have on the current GPU (0: unknown)."""
    try:
        from triton.runtime import driver

        device = driver.active.get_current_device()
        if device not in _max_shared_by_device:
            props = driver.active.utils.get_device_properties(device)
            _max_shared_by_device[device] = int(props.get("max_shared_mem", 0))
        return _max_shared_by_device[device]
    except Exception:  # noqa: BLE001 - no CTA sums rather than no instrumentation
        return 0


_max_shared_by_device = {}


def _on_kernel_load(module, function, name, metadata_group, hash, **_kwargs) -> None:
    """Registers the scope table of a kernel loaded from Triton's cache (or just compiled), and
    where its PTX is, should it be launched with its plain binary (_triton_launcher)."""
    try:
        _triton_launcher.note_loaded(function, name, metadata_group, hash)
    except Exception as e:  # noqa: BLE001 - Triton's load hook: never the program's failure
        warnings.warn(f"[PROTON] kernel {name}: not noted for instrumentation: {e}", stacklevel=2)
    for path in (metadata_group or {}).values():
        if not str(path).endswith(".json"):
            continue
        try:
            with open(path) as f:
                table = json.load(f).get(_METADATA_KEY)
        except (OSError, ValueError):
            continue
        if table:
            _C.register_instrumentation_table(table)


def _no_buffer(size: int, alignment: int, stream):
    """The profile allocator once no instrumentation session is live (Triton 3.6 had none)."""
    return 0


def _allocate(size: int, alignment: int, stream):
    """Triton's profile allocator: the launch's buffer, as the device address itself. Triton's
    launcher takes an int as it is; an object with data_ptr() would cost it a Python call and a
    cuPointerGetAttribute at every launch. 0 (no buffer, counted): the launch records nothing."""
    address = _C.instrumentation_alloc(size, _state.trace, int(stream or 0))
    if _hook_class is not None and _hook_class.enable_host_buffer:
        _state.last_buffer = (address, size, int(stream or 0)) if address else None
    return address


# proton.hooks.instrumentation.InstrumentationHook once imported (triton.profiler's switch
# enable_host_buffer lives on it); None: no script asked for host copies.
_hook_class = None


def last_buffer():
    """(device address, bytes, stream) of the last launch given a buffer while
    InstrumentationHook.enable_host_buffer was set; None if none."""
    return getattr(_state, "last_buffer", None)


def forget_last_buffer() -> None:
    _state.last_buffer = None
