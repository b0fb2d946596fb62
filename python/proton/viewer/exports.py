"""Exports of a profile to the formats other viewers read. One function per format; each
takes the tree and per-node exclusive ("self") values and returns the file's contents.

    folded(profile, weights)                         # flamegraph.pl, inferno, speedscope
    speedscope([("run", profile, weights)], "nanoseconds")   # https://www.speedscope.app
    pprof(profile, [("time (ns)", values), ("count", counts)])   # `pprof`, Perfetto UI

Frames of the python context (`/path/file.py:12@func`) keep their file and line where the
format has room for them. ROOT is implicit in every format and not written as a frame.
"""

import gzip
import json
import re

from .model import Profile

_PYTHON_FRAME = re.compile(r"(?P<file>.*):(?P<line>\d+)@(?P<func>.*)", re.DOTALL)
SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
# speedscope's WeightUnit values, keyed by the unit written in a metric's name.
SPEEDSCOPE_UNITS = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}
PPROF_UNITS = dict(SPEEDSCOPE_UNITS)


def metric_unit(metric: str) -> str:
    """`time (ns)` -> `ns`; `bytes` -> `bytes`; anything else -> ``."""
    if metric == "bytes":
        return "bytes"
    m = re.search(r"\(([^()]*)\)\s*$", metric)
    return m.group(1).strip() if m else ""


def _stacks(profile: Profile, weights):
    """(stack of node indices below ROOT, weight) for each node with a nonzero weight."""
    parents = profile.parents
    stack = []  # indices of the current path, ROOT excluded
    depth_of = {0: 0}
    for i in range(1, len(profile)):
        d = depth_of[parents[i]] + 1
        depth_of[i] = d
        del stack[d - 1 :]
        stack.append(i)
        w = weights[i]
        if w:
            yield stack, w


def _clean(name: str) -> str:
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ")


def folded(profile: Profile, weights) -> str:
    """Brendan Gregg's folded stacks: `a;b;c <integer weight>` per line."""
    names = profile.names
    lines = []
    for stack, w in _stacks(profile, weights):
        w = round(w)
        if w:
            lines.append(";".join(_clean(names[i]) for i in stack) + f" {w}")
    return "\n".join(lines) + ("\n" if lines else "")


def _frame_record(name: str) -> dict:
    m = _PYTHON_FRAME.fullmatch(name)
    if m:
        return {"name": m["func"], "file": m["file"], "line": int(m["line"])}
    return {"name": name}


def speedscope(profiles, unit: str, name: str = "proton") -> dict:
    """A speedscope file with one sampled profile per (name, profile, weights) entry."""
    frames, frame_index = [], {}
    out_profiles = []
    for title, profile, weights in profiles:
        names = profile.names
        samples, sample_weights = [], []
        for stack, w in _stacks(profile, weights):
            row = []
            for i in stack:
                k = frame_index.get(names[i])
                if k is None:
                    k = frame_index[names[i]] = len(frames)
                    frames.append(_frame_record(names[i]))
                row.append(k)
            samples.append(row)
            sample_weights.append(w)
        out_profiles.append(
            {
                "type": "sampled",
                "name": title,
                "unit": unit,
                "startValue": 0,
                "endValue": sum(sample_weights),
                "samples": samples,
                "weights": sample_weights,
            }
        )
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": out_profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "proton-viewer",
    }


def speedscope_unit(metric: str) -> str:
    unit = metric_unit(metric)
    return SPEEDSCOPE_UNITS.get(unit, "bytes" if unit == "bytes" else "none")


# ---------------------------------------------------------------------- pprof
# Field numbers of github.com/google/pprof/proto/profile.proto.
_PROFILE_SAMPLE_TYPE, _PROFILE_SAMPLE, _PROFILE_LOCATION, _PROFILE_FUNCTION = 1, 2, 4, 5
_PROFILE_STRING_TABLE, _PROFILE_TIME_NANOS, _PROFILE_COMMENT = 6, 9, 13
_PROFILE_DEFAULT_SAMPLE_TYPE = 14
_VALUE_TYPE_TYPE, _VALUE_TYPE_UNIT = 1, 2
_SAMPLE_LOCATION_ID, _SAMPLE_VALUE = 1, 2
_LOCATION_ID, _LOCATION_LINE = 1, 4
_LINE_FUNCTION_ID, _LINE_LINE = 1, 2
_FUNCTION_ID, _FUNCTION_NAME, _FUNCTION_FILENAME = 1, 2, 4


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 negatives are ten-byte two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value) if value else b""


def _field_bytes(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _field_packed(field: int, values) -> bytes:
    return _field_bytes(field, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    def __init__(self) -> None:
        self.table, self.index = [""], {"": 0}

    def __call__(self, text: str) -> int:
        k = self.index.get(text)
        if k is None:
            k = self.index[text] = len(self.table)
            self.table.append(text)
        return k


def pprof(profile: Profile, metrics, time_nanos: int = 0, comment: str = "") -> bytes:
    """A gzipped pprof profile; `metrics` is a list of (metric name, self value per node).
    Every distinct frame name is one Function and one Location (same id)."""
    strings = _Strings()
    out = bytearray()
    for metric, _ in metrics:
        unit = metric_unit(metric)
        payload = _field_varint(_VALUE_TYPE_TYPE, strings(metric.split("(")[0].strip()))
        payload += _field_varint(_VALUE_TYPE_UNIT, strings(PPROF_UNITS.get(unit, unit or "count")))
        out += _field_bytes(_PROFILE_SAMPLE_TYPE, payload)
    names, location_of = profile.names, {}
    functions = bytearray()
    locations = bytearray()
    columns = [values for _, values in metrics]
    any_weight = [1 if any(col[i] for col in columns) else 0 for i in range(len(profile))]
    for stack, _ in _stacks(profile, any_weight):
        ids = []
        for i in stack:
            loc = location_of.get(names[i])
            if loc is None:
                loc = location_of[names[i]] = len(location_of) + 1
                frame = _frame_record(names[i])
                fn = _field_varint(_FUNCTION_ID, loc)
                fn += _field_varint(_FUNCTION_NAME, strings(frame["name"]))
                fn += _field_varint(_FUNCTION_FILENAME, strings(frame.get("file", "")))
                functions += _field_bytes(_PROFILE_FUNCTION, fn)
                line = _field_varint(_LINE_FUNCTION_ID, loc)
                line += _field_varint(_LINE_LINE, frame.get("line", 0))
                payload = _field_varint(_LOCATION_ID, loc) + _field_bytes(_LOCATION_LINE, line)
                locations += _field_bytes(_PROFILE_LOCATION, payload)
            ids.append(loc)
        leaf = stack[-1]
        sample = _field_packed(_SAMPLE_LOCATION_ID, ids[::-1])  # leaf first
        sample += _field_bytes(
            _SAMPLE_VALUE, b"".join(_varint(round(col[leaf])) for col in columns)
        )
        out += _field_bytes(_PROFILE_SAMPLE, sample)
    out += locations + functions
    comment_id = strings(comment) if comment else 0
    for text in strings.table:
        out += _field_bytes(_PROFILE_STRING_TABLE, text.encode("utf-8"))
    out += _field_varint(_PROFILE_TIME_NANOS, time_nanos)
    if comment_id:
        out += _field_packed(_PROFILE_COMMENT, [comment_id])
    if metrics:
        out += _field_varint(
            _PROFILE_DEFAULT_SAMPLE_TYPE, strings.index[metrics[0][0].split("(")[0].strip()]
        )
    return gzip.compress(bytes(out), mtime=0)


def to_json(document: dict) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
