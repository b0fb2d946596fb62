"""triton.profiler.viewer's functions, for scripts written against Triton's viewer: the same
names, arguments and results, on llnl-hatchet GraphFrames (imported when first used).

    from proton import viewer
    gf, metrics = viewer.parse(["time/ms", "tflop16/s"], "run.hatchet")
    print(gf.tree(metric_column=metrics))

Without llnl-hatchet installed, calling any of them raises ImportError naming the package.
Proton's own viewer (load/derive/render) needs neither hatchet nor pandas.
"""

import copy
import json
import os

from ..state import COMPUTE_METADATA_SCOPE_NAME
from .derive import _peak_bandwidth, _peak_flops8

FLOPS_WIDTHS = (8, 16, 32, 64)
_TIME_UNITS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_RATE_SCALES = {"": 1, "g": 1e9, "t": 1e12}
# Derived rate -> (raw metric it divides by time, scale): byte/s, gflop16/s, ...
_RATES = {f"{p}byte/s": ("bytes", s) for p, s in _RATE_SCALES.items()}
for _width in ("",) + tuple(str(w) for w in FLOPS_WIDTHS):
    _RATES.update({f"{p}flop{_width}/s": (f"flops{_width}", s) for p, s in _RATE_SCALES.items()})


def _hatchet():
    try:
        import hatchet
    except ImportError as e:
        raise ImportError(
            "[PROTON] this proton.viewer function (triton.profiler.viewer's API) needs the "
            f"llnl-hatchet package: pip install llnl-hatchet ({e})"
        ) from None
    return hatchet


def _pandas():
    _hatchet()  # hatchet brings pandas; name the package the user must install
    import pandas

    return pandas


def _prune(node):
    """node without launch-metadata subtrees and without frames that have neither metrics
    nor children; a frame whose children were all pruned goes too. None: pruned."""
    if "frame" not in node:
        return node  # the device table
    if node["frame"].get("name") == COMPUTE_METADATA_SCOPE_NAME:
        return None
    children = node.get("children", [])
    if not node.get("metrics") and not children:
        return None
    kept = [c for c in (_prune(child) for child in children) if c is not None]
    if children and not kept:
        return None
    node["children"] = kept
    return node


def _load_database(file):
    """The [root, devices] document of an open file, a path (JSON, or Proton's
    .hatchet_msgpack), or in-memory data: what proton.data.get returns (the document as
    Python objects) or proton.data.get_msgpack (its MessagePack bytes)."""
    if isinstance(file, (list, tuple)):
        if not file or not isinstance(file[0], dict) or "frame" not in file[0]:
            raise ValueError(
                "[PROTON] in-memory profile data must be [root, devices, ...] as "
                "proton.data.get returns for tree data"
            )
        return copy.deepcopy(list(file[:2]))  # _prune edits nodes; the caller's stay as given
    if isinstance(file, (bytes, bytearray, memoryview)):
        from .msgpack import unpackb

        return _load_database(unpackb(bytes(file)))
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as f:
            data = f.read()
        if os.fspath(file).endswith(".hatchet_msgpack"):
            from .msgpack import unpackb

            return unpackb(data)
        return json.loads(data)
    return json.load(file)


def get_raw_metrics(file):
    """(GraphFrame, inclusive metric names, exclusive metric names, device table) of a
    profile given as an open file, a path, or in-memory data (proton.data.get(session) or
    proton.data.get_msgpack(session))."""
    ht = _hatchet()
    database = [n for n in (_prune(node) for node in _load_database(file)) if n is not None]
    device_info = database.pop(1) if len(database) > 1 else {}
    gf = ht.GraphFrame.from_literal(database)
    inclusive_metrics = gf.show_metric_columns()
    exclusive_metrics = [c for c in gf.dataframe.columns if c not in inclusive_metrics]
    return gf, inclusive_metrics, exclusive_metrics, device_info


def read(filename):
    """get_raw_metrics of a path, with the inclusive columns computed."""
    gf, inclusive_metrics, exclusive_metrics, device_info = get_raw_metrics(filename)
    if not inclusive_metrics + exclusive_metrics:
        raise AssertionError("No metrics found in the input file")
    gf.update_inclusive_columns()
    return gf, inclusive_metrics, exclusive_metrics, device_info


def _device_rows(df, device_index):
    if "device_id" not in df.columns:  # no kernel frames
        return _pandas().Series(False, index=df.index)
    return df["device_id"] == device_index


def get_min_time_flops(df, device_info):
    """Per frame, the seconds its flops<w> metrics take at the device's peak (a DataFrame
    with one column, min_time)."""
    pd = _pandas()
    out = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    for device_type, devices in device_info.items():
        for device_index, device in devices.items():
            rows = _device_rows(df, device_index)
            for width in FLOPS_WIDTHS:
                column = f"flops{width}"
                if column not in df.columns:
                    continue
                peak = _peak_flops8(device_type, device_index, device) / (width / 8)
                out.loc[rows, "min_time"] += df.loc[rows, column].fillna(0) / peak
    return out


def get_min_time_bytes(df, device_info):
    """Per frame, the seconds its bytes take at the device's peak memory bandwidth."""
    pd = _pandas()
    out = pd.DataFrame(0.0, index=df.index, columns=["min_time"])
    for device_type, devices in device_info.items():
        for device_index, device in devices.items():
            rows = _device_rows(df, device_index)
            if "bytes" in df.columns:
                bandwidth = _peak_bandwidth(device_type, device_index, device)
                out.loc[rows, "min_time"] += df.loc[rows, "bytes"] / bandwidth
    return out


def _match(metric, inclusive_metrics, exclusive_metrics):
    """The column of a raw metric named with or without its unit, in any case; an inclusive
    metric's column is its "(inc)" one."""
    wanted = metric.lower()
    for raw in list(inclusive_metrics) + list(exclusive_metrics):
        if wanted in (raw, raw.split("(")[0].strip().lower()):
            return raw + " (inc)" if raw in inclusive_metrics else raw
    raise RuntimeError(
        f"Metric {metric} is not found. Use the --list flag to list available metrics"
    )


def _seconds(df, kind, inclusive_metrics, exclusive_metrics):
    """A time metric's column (kind "time" or "cpu_time") in seconds."""
    column = _match(kind, inclusive_metrics, exclusive_metrics)
    unit = column.split("(")[1].split(")")[0]
    return df[column] * _TIME_UNITS[unit]


def _time_spec(metric):
    """(kind, average, unit) of time/ms, avg_cpu_time/us, ...; None for other metrics."""
    name, _, unit = metric.partition("/")
    average = name.startswith("avg_")
    kind = name[4:] if average else name
    if kind in ("time", "cpu_time") and unit in _TIME_UNITS:
        return kind, average, unit
    return None


def derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info):
    """Adds the columns of `metrics` (raw or derived, as proton-viewer -m takes them) to
    gf.dataframe and to gf.inc_metrics/exc_metrics; returns their column names."""
    df = gf.dataframe
    names = []
    for metric in metrics:
        time_spec = _time_spec(metric)
        if metric == "util":
            flops = get_min_time_flops(df, device_info)["min_time"]
            memory = get_min_time_bytes(df, device_info)["min_time"]
            seconds = _seconds(df, "time", inclusive_metrics, exclusive_metrics)
            df["util"] = flops.combine(memory, max) / seconds
            if "device_id" in df.columns:
                df.loc[df["device_id"].isna(), "util"] = float("nan")
            names.append("util")
        elif metric in _RATES:
            raw, scale = _RATES[metric]
            column = _match(raw, inclusive_metrics, exclusive_metrics)
            seconds = _seconds(df, "time", inclusive_metrics, exclusive_metrics)
            df[f"{metric} (inc)"] = df[column] / seconds / scale
            names.append(f"{metric} (inc)")
        elif time_spec is not None:
            kind, average, unit = time_spec
            value = _seconds(df, kind, inclusive_metrics, exclusive_metrics)
            if average:
                value = value / df["count (inc)"]
            df[f"{metric} (inc)"] = value / _TIME_UNITS[unit]
            names.append(f"{metric} (inc)")
        elif "/" in metric:
            name, unit = metric.split("/", 1)
            if unit != "%":
                raise ValueError(f"Unsupported unit {unit}")
            column = _match(name, inclusive_metrics, exclusive_metrics)
            inclusive = "(inc)" in column
            total = df[column].iloc[0] if inclusive else df[column].sum()
            label = f"{metric} (inc)" if inclusive else metric
            df[label] = df[column] / total * 100.0
            names.append(label)
        else:
            names.append(_match(metric, inclusive_metrics, exclusive_metrics))
    for name in names:
        (gf.inc_metrics if name.endswith("(inc)") else gf.exc_metrics).append(name)
    return names


def _formatted(name, format):
    if format == "file_function_line":
        return name.split("/")[-1]
    if format == "function_line":
        return name.split(":")[-1]
    if format == "file_function":
        return f"{name.split('/')[-1].split(':')[0]}@{name.split('@')[-1].split(':')[0]}"
    return name


def format_frames(gf, format):
    """Rewrites gf's frame names in a -f format (file_function_line, function_line,
    file_function; anything else leaves them); returns gf."""
    if format in ("file_function_line", "function_line", "file_function"):
        gf.dataframe["name"] = gf.dataframe["name"].apply(lambda n: _formatted(n, format))
    return gf


def filter_frames(gf, include=None, exclude=None, threshold=None, metric=None):
    """gf keeping the paths through frames whose name matches `include`, without the
    frames matching `exclude` and their subtrees, and without frames whose `metric` is
    below `threshold` (each a squashed hatchet filter)."""
    _hatchet()
    from hatchet.query import NegationQuery

    if include:
        through = f'MATCH ("*")->(".", p)->("*")\nWHERE p."name" =~ "{include}"'
        gf = gf.filter(through, squash=True)
    if exclude:
        below = f'MATCH (".", p)->("*")\nWHERE p."name" =~ "{exclude}"'
        gf = gf.filter(NegationQuery(below), squash=True)
    if threshold:
        gf = gf.filter(["*", {metric: f">= {threshold}"}], squash=True)
    return gf


def parse(metrics, filename, include=None, exclude=None, threshold=None):
    """(GraphFrame, metric column names) of a profile with `metrics` derived and the frame
    filters applied (the threshold to the first metric)."""
    gf, inclusive_metrics, exclusive_metrics, device_info = read(filename)
    names = derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info)
    return filter_frames(gf, include, exclude, threshold, names[0]), names


def apply_diff_profile(gf, derived_metrics, diff_file, metrics, include, exclude, threshold):
    """gf minus the profile in diff_file, on the derived metric columns."""
    other, _ = parse(metrics, diff_file, include, exclude, threshold)
    inc = [m for m in derived_metrics if m.endswith("(inc)")]
    exc = [m for m in derived_metrics if not m.endswith("(inc)")]
    for frame in (gf, other):
        frame.inc_metrics, frame.exc_metrics = list(inc), list(exc)
    return _subtract(gf, other, derived_metrics)


def _subtract(gf, other, metrics):
    """gf - other on the union of their graphs, as GraphFrame.sub, without hatchet's Cython
    row insertion (under newer pandas and numpy it writes into read-only arrays and raises
    ValueError). A node only in gf keeps its values; a node only in other gets minus its
    values, as Proton's own viewer (GraphFrame.sub leaves NaN there)."""
    pd = _pandas()
    a, b = gf.copy(), other.copy()
    node_map = {}
    union = a.graph.union(b.graph, node_map)
    frames = []
    for f in (a, b):
        index = list(f.dataframe.index.names)
        df = f.dataframe.reset_index()
        df["node"] = [node_map[id(n)] for n in df["node"]]
        frames.append(df.set_index(index))
    mine, theirs = frames
    missing = theirs.loc[theirs.index.difference(mine.index)].copy()
    for column in missing.columns:  # as GraphFrame.sub: numbers 0, the rest (names) kept
        if pd.api.types.is_numeric_dtype(missing[column]):
            missing[column] = 0
    if len(missing):
        mine = pd.concat([mine, missing])
    for metric in metrics:
        if metric in mine.columns and metric in theirs.columns:
            mine[metric] = mine[metric] - theirs[metric].reindex(mine.index).fillna(0)
    a.dataframe, a.graph = mine, union
    return a


__all__ = [
    "apply_diff_profile",
    "derive_metrics",
    "filter_frames",
    "format_frames",
    "get_min_time_bytes",
    "get_min_time_flops",
    "get_raw_metrics",
    "parse",
    "read",
]
