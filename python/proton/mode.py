"""Typed profiling modes. Each has a string form that start(mode=...) also accepts."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BaseMode:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class PCSampling(BaseMode):
    """Instruction (PC) sampling on the CUPTI backend; `interval` is in GPU cycles."""

    name: str = field(default="pcsampling", init=False)
    interval: int = 1000

    def __post_init__(self):
        if not isinstance(self.interval, int) or self.interval <= 0:
            raise ValueError("Interval must be a positive integer.")

    def __str__(self) -> str:
        return f"{self.name}:interval={self.interval}"


@dataclass(frozen=True)
class PeriodicFlushing(BaseMode):
    """Write each completed phase to `<name>.part_<phase>.<format>` and free it."""

    name: str = field(default="periodic_flushing", init=False)
    format: str = "hatchet"

    def __post_init__(self):
        allowed = ("hatchet", "hatchet_msgpack", "chrome_trace")
        if self.format not in allowed:
            raise ValueError(
                f"[PROTON] Unknown format: {self.format!r}. Allowed values: {', '.join(allowed)}"
            )

    def __str__(self) -> str:
        return f"{self.name}:format={self.format}"


_INSTRUMENTATION_CHOICES = {
    "metric_type": ("cycle",),
    "sampling_strategy": ("none", "selective"),
    "granularity": (
        "cta",
        "warp",
        "warp_2",
        "warp_4",
        "warp_8",
        "warp_group",
        "warp_group_2",
        "warp_group_4",
        "warp_group_8",
    ),
    # A unit's buffer is circular: past buffer_size, the oldest events are overwritten (and
    # counted). triton.profiler's "flush" (copy out when full) is not implemented: refused.
    "buffer_strategy": ("circular",),
    "buffer_type": ("shared", "global"),
    # data="trace": "full" writes warp slices as triton.profiler does, then kernel slices, CPU
    # scopes and launch flows; "triton" writes exactly triton.profiler's events and no others.
    "trace_layout": ("full", "triton"),
}
OPTIMIZATIONS = ("clock32", "time_shift")
# triton.profiler's compiler passes that reorder its record stores and barriers: Proton's PTX
# rewrite has no such pass, so they are refused rather than accepted and ignored.
_NOT_IMPLEMENTED = {
    ("buffer_strategy", "flush"): "buffer_strategy='flush' (copying a full buffer out while the "
    "kernel runs) is not implemented by Proton; buffers are circular: raise buffer_size to keep "
    "every event",
    ("optimizations", "sched_stores"): "optimization 'sched_stores' (triton.profiler's store "
    "scheduling pass) is not implemented by Proton's PTX rewrite",
    ("optimizations", "sched_barriers"): "optimization 'sched_barriers' (triton.profiler's "
    "barrier scheduling pass) is not implemented by Proton's PTX rewrite",
}
MAX_BUFFER_SIZE = 1 << 24  # bytes per recording unit (2M events)
MAX_UNITS = 32  # a CTA has at most 32 warps, so at most 32 recording units


def _config_error(message: str):
    from .errors import ConfigError

    return ConfigError(f"[PROTON] {message}")


def _choice(value) -> str:
    # Triton's enums (and ours) print as their name; plain strings are used as they are.
    return str(getattr(value, "value", value)).lower()


@dataclass(frozen=True)
class InstrumentationMode(BaseMode):
    """Intra-kernel instrumentation (backend="instrumentation"); triton.profiler's fields."""

    metric_type: str = "cycle"
    sampling_strategy: str = "none"
    sampling_options: str = ""
    granularity: str = "warp"
    buffer_strategy: str = "circular"
    buffer_type: str = "shared"
    buffer_size: int = 0
    optimizations: object = ()
    trace_layout: str = "full"

    def __post_init__(self):
        for name, allowed in _INSTRUMENTATION_CHOICES.items():
            value = _choice(getattr(self, name))
            if (name, value) in _NOT_IMPLEMENTED:
                raise _config_error(_NOT_IMPLEMENTED[(name, value)])
            if value not in allowed:
                raise _config_error(
                    f"Unknown {name}: {getattr(self, name)!r}. Allowed values: {', '.join(allowed)}"
                )
            object.__setattr__(self, name, value)
        opts = self.optimizations
        if isinstance(opts, str):
            opts = [o.strip() for o in opts.split(",") if o.strip()]
        opts = tuple(_choice(o) for o in opts)
        for o in opts:
            if ("optimizations", o) in _NOT_IMPLEMENTED:
                raise _config_error(_NOT_IMPLEMENTED[("optimizations", o)])
            if o not in OPTIMIZATIONS:
                raise _config_error(
                    f"Unknown optimization: {o!r}. Allowed values: {', '.join(OPTIMIZATIONS)}"
                )
        object.__setattr__(self, "optimizations", opts)
        if (
            not isinstance(self.buffer_size, int)
            or isinstance(self.buffer_size, bool)
            or not 0 <= self.buffer_size <= MAX_BUFFER_SIZE
        ):
            raise _config_error(
                f"buffer_size must be a number of bytes from 0 (the default) to "
                f"{MAX_BUFFER_SIZE}, got {self.buffer_size!r}"
            )
        units = self.selected_units()
        if self.sampling_strategy == "selective" and not units:
            raise _config_error("sampling_strategy='selective' needs sampling_options, e.g. '0,4'")

    def selected_units(self) -> tuple:
        text = str(self.sampling_options or "").strip()
        if not text:
            return ()
        try:
            units = tuple(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            units = (-1,)
        if not all(0 <= u < MAX_UNITS for u in units):
            raise _config_error(
                f"sampling_options must list warp (or unit) ids from 0 to {MAX_UNITS - 1} "
                f"like '0,4', got {text!r}"
            )
        return units

    def __str__(self) -> str:
        if self == type(self)():
            return self.name  # the defaults: "default" or "mma", as in earlier releases
        return (
            f"{self.name}:metric_type={self.metric_type}:sampling_strategy={self.sampling_strategy}"
            f":sampling_options={self.sampling_options.replace(',', ';')}"
            f":granularity={self.granularity}:buffer_strategy={self.buffer_strategy}"
            f":buffer_type={self.buffer_type}:buffer_size={self.buffer_size}"
            f":optimizations={';'.join(self.optimizations)}"
            f":trace_layout={self.trace_layout}"
        )


@dataclass(frozen=True)
class Default(InstrumentationMode):
    """Intra-kernel instrumentation with default settings."""

    name: str = field(default="default", init=False)


@dataclass(frozen=True)
class MMA(InstrumentationMode):
    """triton.profiler's "mma" instrumentation mode (same fields as Default). In Triton it runs
    the same compiler passes as Default, and so it does here: put `proton.language` scopes
    around the MMA regions to time them."""

    name: str = field(default="mma", init=False)


def to_string(mode) -> str:
    """None, a string or a mode object -> the string the core parses."""
    if mode is None:
        return ""
    if isinstance(mode, (str, BaseMode)):
        return str(mode)
    raise TypeError(
        f"[PROTON] mode must be a str or a proton.mode object, got {type(mode).__name__}"
    )
