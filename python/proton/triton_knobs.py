"""Triton's `triton.knobs.proton` settings, honoured at start() as Proton's own variables are.

    import triton
    triton.knobs.proton.enable_nvtx = False    # as PROTON_ENABLE_NVTX=0
    proton.start("run")

| knob (triton.knobs.proton.) | Triton's variable               | Proton's equivalent           |
|-----------------------------|---------------------------------|-------------------------------|
| disable                     | TRITON_PROTON_DISABLE           | PROTON_DISABLE                |
| enable_nvtx                 | TRITON_ENABLE_NVTX              | PROTON_ENABLE_NVTX            |
| cupti_lib_dir (cupti_dir)   | TRITON_CUPTI_LIB_PATH           | PROTON_CUPTI_LIB_PATH         |
| cupti_lib_blackwell_dir     | TRITON_CUPTI_LIB_BLACKWELL_PATH | a directory searched for CUPTI|
| profile_buffer_size, profile_metric_buffer_size, enable_hw_trace: no equivalent; a warning  |

A knob counts when the program set it (`triton.knobs.proton.x = ...`) or its Triton variable
is set; a knob left at Triton's default changes nothing. A PROTON_* variable that is set wins
over the knob. When the program has not imported Triton, the Triton variables are read
directly (with Triton's parsing), so nothing here imports Triton; without Triton installed,
nothing here applies.
"""

import contextlib
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Knob:
    names: Tuple[str, ...]  # attribute names in triton.knobs.proton, newest first
    triton_env: str
    kind: str  # "bool", "str" or "int": how Triton parses its variable
    proton_env: Optional[str]  # None: no Proton variable (handled by `read`)


KNOBS = (
    Knob(("disable",), "TRITON_PROTON_DISABLE", "bool", "PROTON_DISABLE"),
    Knob(("enable_nvtx",), "TRITON_ENABLE_NVTX", "bool", "PROTON_ENABLE_NVTX"),
    Knob(("cupti_lib_dir", "cupti_dir"), "TRITON_CUPTI_LIB_PATH", "str", "PROTON_CUPTI_LIB_PATH"),
    Knob(("cupti_lib_blackwell_dir",), "TRITON_CUPTI_LIB_BLACKWELL_PATH", "str", None),
    Knob(("profile_buffer_size",), "TRITON_PROFILE_BUFFER_SIZE", "int", None),
    Knob(("profile_metric_buffer_size",), "TRITON_PROFILE_METRIC_BUFFER_SIZE", "int", None),
    Knob(("enable_hw_trace",), "TRITON_ENABLE_HW_TRACE", "bool", None),
)

# Knobs Proton has no setting for: what a user who sets one should know.
_UNSUPPORTED = {
    "TRITON_PROFILE_BUFFER_SIZE": "Proton sizes its CUPTI activity buffers itself",
    "TRITON_PROFILE_METRIC_BUFFER_SIZE": "Proton sizes its device metric buffer itself",
    "TRITON_ENABLE_HW_TRACE": "Proton has no hardware trace mode",
}
_warned = set()


@dataclass
class Settings:
    """What the knobs ask of one start()."""

    disable: bool = False
    env: Dict[str, str] = field(default_factory=dict)  # PROTON_* values for the start
    cupti_dirs: List[str] = field(default_factory=list)  # searched before the usual places
    unsupported: List[str] = field(default_factory=list)  # Triton variables with no effect


def triton_bool(text: str) -> bool:
    """Triton's reading of a boolean variable."""
    return text.strip().lower() in ("1", "true", "on")


def _triton_installed() -> bool:
    if "triton" in sys.modules:
        return sys.modules["triton"] is not None
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def _knobs_object():
    """triton.knobs.proton when the program imported Triton's knobs, else None."""
    module = sys.modules.get("triton.knobs")
    return getattr(module, "proton", None) if module is not None else None


def _from_object(obj, knob: Knob):
    """(set, value) of a knob on Triton's knobs object."""
    for name in knob.names:
        descriptor = type(obj).__dict__.get(name)
        if descriptor is None and not hasattr(obj, name):
            continue
        key = getattr(descriptor, "key", knob.triton_env)
        explicit = name in getattr(obj, "__dict__", {}) or os.environ.get(key) is not None
        if not explicit:
            return False, None
        try:
            return True, getattr(obj, name)
        except Exception as e:  # e.g. Triton's RuntimeError on a bad int variable
            raise ValueError(f"[PROTON] triton.knobs.proton.{name}: {e}") from None
    return False, None


def _from_environment(knob: Knob):
    """(set, value) of a knob from its Triton variable, parsed as Triton parses it."""
    text = os.environ.get(knob.triton_env)
    if text is None:
        return False, None
    if knob.kind == "bool":
        return True, triton_bool(text)
    if knob.kind == "int":
        try:
            return True, int(text)
        except ValueError:
            raise ValueError(f"[PROTON] {knob.triton_env}={text!r}: expected an integer") from None
    return True, text


def read() -> Settings:
    """The knobs that apply to a start() now."""
    settings = Settings()
    obj = _knobs_object()
    if obj is None and not _triton_installed():
        return settings
    for knob in KNOBS:
        explicit, value = _from_object(obj, knob) if obj is not None else _from_environment(knob)
        if not explicit or value is None:
            continue
        if knob.proton_env is not None:
            if os.environ.get(knob.proton_env) is not None:
                continue  # Proton's own variable wins
            if knob.kind == "bool":
                text = "1" if value else "0"
            else:
                text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
            if knob.proton_env == "PROTON_DISABLE":
                settings.disable = text == "1"
            elif text:
                settings.env[knob.proton_env] = text
        elif knob.triton_env == "TRITON_CUPTI_LIB_BLACKWELL_PATH":
            if value:
                settings.cupti_dirs.append(os.fspath(value))
        elif knob.kind != "bool" or value:
            settings.unsupported.append(knob.triton_env)
    return settings


def warn_unsupported(settings: Settings, stacklevel: int) -> None:
    """One RuntimeWarning per process for each knob Proton cannot honour."""
    for variable in settings.unsupported:
        if variable in _warned:
            continue
        _warned.add(variable)
        knob = next(k for k in KNOBS if k.triton_env == variable)
        warnings.warn(
            f"[PROTON] triton.knobs.proton.{knob.names[0]} ({variable}) is ignored: "
            f"{_UNSUPPORTED[variable]}.",
            RuntimeWarning,
            stacklevel=stacklevel + 1,
        )


@contextlib.contextmanager
def environment(values: Dict[str, str]):
    """The PROTON_* variables the knobs ask for, set while the core starts (it reads them
    then), and restored afterwards so that a later change of a knob is seen."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
