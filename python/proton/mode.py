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


@dataclass(frozen=True)
class Default(BaseMode):
    """Intra-kernel instrumentation with default settings."""

    name: str = field(default="default", init=False)


@dataclass(frozen=True)
class MMA(BaseMode):
    """Intra-kernel instrumentation of MMA regions."""

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
