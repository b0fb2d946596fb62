"""Metrics shown by the viewer: raw ones and those derived from them, as in Triton's viewer.

    column = derive(profile, "tflop16/s")     # Column(title, values per node)

| metric | value per node |
|---|---|
| a raw name (`time`, `time (ns)`, `count`, any user metric; case and unit ignored) | inclusive sum (exclusive metrics: own value) |
| `time/s|ms|us|ns`, `cpu_time/*` | inclusive time in that unit |
| `avg_time/*` | inclusive time / inclusive `count` of the nodes with a time (launches) |
| `avg_cpu_time/*` | inclusive time / inclusive `count` |
| `flop/s`, `flop8|16|32|64/s`, `gflop*/s`, `tflop*/s` | inclusive `flops<w>` / inclusive time (s) / 1, 1e9, 1e12 |
| `byte/s`, `gbyte/s`, `tbyte/s` | inclusive `bytes` / inclusive time (s) / 1, 1e9, 1e12 |
| `<metric>/%` | inclusive value / ROOT's value * 100 (exclusive metrics: / their sum) |
| `util` | kernels only: max(sum_w flops<w> / peak_w, bytes / peak bandwidth) / time |

Peaks come from device_peaks.json next to this file, keyed by the profile's device table.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ViewerError

if TYPE_CHECKING:
    from .model import Profile

TIME_EXPONENT = {"s": 0, "ms": -3, "us": -6, "ns": -9}
RATE_PREFIX = {"": 1, "g": 10**9, "t": 10**12}
FLOP_WIDTHS = (8, 16, 32, 64)

_TIME = re.compile(r"(avg_)?(cpu_)?time/(s|ms|us|ns)")
_FLOPS = re.compile(r"([gt]?)flop(8|16|32|64)?/s")
_BYTES = re.compile(r"([gt]?)byte/s")
_PERCENT = re.compile(r"(.+)/%")

DERIVED_HELP = """\
derived metrics (when their sources are in the profile):
  time/s, time/ms, time/us, time/ns          time
  avg_time/s, avg_time/ms, ...               time / count
  cpu_time/s, ..., avg_cpu_time/s, ...       cpu_time (cpu_timed_scope), per count
  flop[8|16|32|64]/s, gflop*/s, tflop*/s     flops<width> / time
  byte/s, gbyte/s, tbyte/s                   bytes / time
  <metric>/%                                 share of ROOT's value (inclusive metrics)
  util                                       max(flops<w> / peak_w, bytes / peak bandwidth) / time
"""

_PEAKS_PATH = os.path.join(os.path.dirname(__file__), "device_peaks.json")
_peaks_cache = None


@dataclass
class Column:
    """One shown metric: its title and one value per node (None: no value)."""

    title: str
    values: list
    # The raw metric summed into this column, when it is additive (exports weigh by it).
    additive_source: str | None = None


def device_peaks() -> dict:
    global _peaks_cache
    if _peaks_cache is None:
        with open(_PEAKS_PATH) as f:
            _peaks_cache = json.load(f)
    return _peaks_cache


def base_name(raw: str) -> str:
    """`time (ns)` -> `time`."""
    return raw.split("(")[0].strip()


def match_raw(profile: Profile, wanted: str) -> str | None:
    """The raw metric named `wanted`, ignoring case and a unit in parentheses."""
    wanted = wanted.strip().lower()
    for raw in profile.metric_names:
        if wanted in (raw.lower(), base_name(raw).lower()):
            return raw
    return None


def default_metrics(profile) -> list:
    """What `-m` means when not given: time/s, else cpu_time/s, else the first metric."""
    for wanted, shown in (("time", "time/s"), ("cpu_time", "cpu_time/s")):
        if match_raw(profile, wanted):
            return [shown]
    return profile.metric_names[:1]


def available(profile: Profile) -> str:
    names = ", ".join(base_name(m).lower() for m in profile.metric_names) or "none"
    return f"available metrics in {profile.source}: {names} (proton-viewer -l lists them)"


def _require(profile: Profile, wanted: str, spec: str) -> str:
    raw = match_raw(profile, wanted)
    if raw is None:
        if spec == wanted:
            raise ViewerError(f"unknown metric {spec!r}; {available(profile)}")
        raise ViewerError(f"{spec} needs the metric {wanted!r}; {available(profile)}")
    return raw


def _time_metric(profile: Profile, kind: str, spec: str):
    """(raw name, decimal exponent of its unit) of `time` or `cpu_time`."""
    raw = _require(profile, kind, spec)
    unit = raw[len(base_name(raw)) :].strip(" ()").lower()
    if unit not in TIME_EXPONENT:
        raise ViewerError(f"{spec}: cannot tell the unit of {raw!r} (expected s, ms, us or ns)")
    return raw, TIME_EXPONENT[unit]


def _seconds(profile: Profile, spec: str, kind: str = "time") -> list:
    raw, exponent = _time_metric(profile, kind, spec)
    return evaluate(profile, Recipe(spec, "scaled", raw, exponent=exponent)).values


@dataclass(frozen=True)
class Recipe:
    """How one `-m` column is computed from raw metrics, worked out from the metric names
    alone (no per-node work); the C++ model computes the column (evaluate).

    op: inclusive (source's inclusive sums), own (source's own values: exclusive metrics),
    scaled (inclusive source x 10^exponent), average (scaled / inclusive other), rate
    (inclusive source / (inclusive other x 10^exponent) / divisor), percent (inclusive
    source x 100 / ROOT's, or / the sum for exclusive metrics), util (Python only).
    """

    title: str
    op: str
    source: str | None = None
    other: str | None = None
    exponent: int = 0
    divisor: int = 1
    additive_source: str | None = None


def recipe(profile, spec: str) -> Recipe:
    """The recipe of one `-m` entry; a ViewerError names what is missing. `profile` needs
    only metric_names, exclusive_metrics and source."""
    key = spec.strip().lower()
    if key == "util":
        return Recipe("util", "util")
    m = _TIME.fullmatch(key)
    if m:
        avg, cpu, unit = m.groups()
        raw, exponent = _time_metric(profile, "cpu_time" if cpu else "time", spec)
        shift = exponent - TIME_EXPONENT[unit]
        if avg:
            count = _require(profile, "count", spec)
            # GPU time per launch: the counts of the nodes that carry a time, so that counts
            # of other things below a kernel (its intra-kernel scopes' runs) are not launches.
            op = "average" if cpu else "timed_average"
            return Recipe(spec, op, raw, count, shift)
        return Recipe(spec, "scaled", raw, exponent=shift, additive_source=raw)
    m = _FLOPS.fullmatch(key) or _BYTES.fullmatch(key)
    if m:
        source = "bytes" if "byte" in key else f"flops{m.group(2) or ''}"
        amount = _require(profile, source, spec)
        time, exponent = _time_metric(profile, "time", spec)
        return Recipe(spec, "rate", amount, time, exponent, RATE_PREFIX[m.group(1)])
    m = _PERCENT.fullmatch(key)
    if m:
        return Recipe(spec, "percent", _require(profile, m.group(1), spec))
    if "/" in key:
        raise ViewerError(f"unknown derived metric {spec!r}.\n{DERIVED_HELP.rstrip()}")
    raw = _require(profile, key, spec)
    if raw in profile.exclusive_metrics:  # shown where present, never summed
        return Recipe(raw, "own", raw)
    return Recipe(raw, "inclusive", raw, additive_source=raw)


def evaluate(profile: Profile, r: Recipe) -> Column:
    """The recipe's column on the profile, one value per node: computed by the viewer's C++
    model (csrc/viewer/tree_view.h, ColumnEvaluator), `util` here."""
    if r.op == "util":
        values = utilization(profile)
    else:
        encoded = (r.op, r.source, r.other, r.exponent, r.divisor)
        values = profile.tree.evaluate(encoded, sorted(profile.exclusive_metrics))
    return Column(r.title, values, r.additive_source)


def derive(profile: Profile, spec: str) -> Column:
    """The column for one `-m` entry; a ViewerError names what is missing."""
    return evaluate(profile, recipe(profile, spec))


# ---------------------------------------------------------------------- util
def _peak_flops8(device_type: str, device_id: str, device: dict) -> float:
    table = device_peaks().get(device_type)
    arch = str(device.get("arch", ""))
    if table is None or arch not in table:
        known = ", ".join(k for k in (table or {}) if not k.startswith("_")) or "none"
        raise ViewerError(
            f"util: no peak FLOP/s for {device_type} architecture {arch!r} (device "
            f"{device_id}); known {device_type} architectures: {known}. Add it to {_PEAKS_PATH}"
        )
    entry = table[arch]
    try:
        if "flops8_per_sm_per_clock" in entry:
            return entry["flops8_per_sm_per_clock"] * device["num_sms"] * device["clock_rate"] * 1e3
        peak = entry["flops8"]
        if "reference_num_sms" in entry:
            peak *= device["num_sms"] / entry["reference_num_sms"]
        if "reference_clock_rate_khz" in entry:
            peak *= device["clock_rate"] / entry["reference_clock_rate_khz"]
        return peak
    except KeyError as e:
        raise ViewerError(
            f"util: device {device_id} ({device_type}) has no {e.args[0]} in the profile"
        ) from None


def _peak_bandwidth(device_type: str, device_id: str, device: dict) -> float:
    entry = (device_peaks().get(device_type) or {}).get(str(device.get("arch", ""))) or {}
    if "bytes_per_second" in entry:
        return entry["bytes_per_second"]
    try:
        return 2 * device["bus_width"] / 8 * device["memory_clock_rate"] * 1e3
    except KeyError as e:
        raise ViewerError(
            f"util: device {device_id} ({device_type}) has no {e.args[0]} in the profile"
        ) from None


def _device_entry(profile: Profile, device_type, device_id):
    types = profile.devices
    if device_type is None and len(types) == 1:
        device_type = next(iter(types))
    device = (types.get(device_type) or {}).get(str(device_id))
    if not isinstance(device, dict):
        raise ViewerError(
            f"util: device {device_id} ({device_type}) is not in the device table of "
            f"{profile.source}"
        )
    return device_type, device


def utilization(profile: Profile) -> list:
    """Triton's `util`: on nodes that ran on a device (have device_id), the larger of the
    compute-bound and memory-bound minimum times over the measured (inclusive) time."""
    seconds = _seconds(profile, "util")
    flops = []
    for width in FLOP_WIDTHS:
        raw = match_raw(profile, f"flops{width}")
        if raw is not None:
            flops.append((width / 8, profile.column(raw)))
    nbytes = profile.column("bytes")
    ids, types = profile.column("device_id"), profile.column("device_type")
    devices = {}  # (type, id) -> [type, device entry, flops8 peak (lazy), bandwidth]
    out = [None] * len(profile)
    for i, device_id in enumerate(ids):
        if device_id is None or not seconds[i]:
            continue
        key = (types[i], str(device_id))
        peaks = devices.get(key)
        if peaks is None:
            device_type, device = _device_entry(profile, *key)
            bandwidth = _peak_bandwidth(device_type, key[1], device)
            peaks = devices[key] = [device_type, device, None, bandwidth]
        compute = 0.0
        if any(col[i] for _, col in flops):
            if peaks[2] is None:
                peaks[2] = _peak_flops8(peaks[0], key[1], peaks[1])
            compute = sum((col[i] or 0) * scale for scale, col in flops) / peaks[2]
        memory = (nbytes[i] or 0) / peaks[3]
        out[i] = max(compute, memory) / seconds[i]
    return out
