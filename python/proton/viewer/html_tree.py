"""The HTML report's data for one tree view: the frames kept, compact per-node arrays of
their metrics, and what the roofline and the per-scope cycles chart need.

    strings = StringTable()
    view = encode_view(profiles, ["time/s"], strings, base=None, max_frames=100_000)

A view is a dict of plain lists (written as JSON by html_report.py): nodes in pre-order,
each described by its depth, an index into the shared string table and a kind; every
metric is one array over the kept nodes. Nothing is stored per node as an object.

What is computed here, with the text view's own code (model.align, main.build_view,
render.visible_nodes, derive.recipe), so that both views agree:
- `columns`: the -m metrics, exactly as the text view computes them (merged over ranks with
  --merge, or minus BASE with --diff-profile), rounded to 7 significant digits;
- `raw`: each raw metric's inclusive value (its own value for exclusive metrics), summed
  over the files given (and, with a base, the base's values as `before`);
- `width`: which array the flame graph's widths come from: the raw metric behind the first
  -m metric when it is a sum (time/s -> time (ns)), else time, else the first sum.

Frames hidden by -t/-d, and beyond `max_frames` the frames with the smallest width, are
left out; their values still count in their ancestors' inclusive values, and each kept
node says how many frames below it were left out (`pruned`).
"""

from __future__ import annotations

import heapq
import math

from .derive import FLOP_WIDTHS, _peak_bandwidth, _peak_flops8, match_raw, recipe
from .errors import ViewerError
from .model import align
from .render import visible_nodes

# Kinds of node, for colours: a scope or other frame, a GPU kernel, a Python frame
# (file:line@function), a folded run of library frames.
KIND_SCOPE, KIND_KERNEL, KIND_PYTHON, KIND_LIBRARY = 0, 1, 2, 3
ROOFLINE_MAX_POINTS = 2000
TABLE_ROWS = 400
INTRA_MAX_KERNELS = 24
_CYCLE_METRICS = ("normalized_cycles", "cycles")


class StringTable:
    """Interned strings: each distinct string is written once, nodes carry its index."""

    def __init__(self) -> None:
        self.strings = []
        self._index = {}

    def id(self, text: str) -> int:
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.strings)
            self.strings.append(text)
        return index

    def ids(self, texts) -> list:
        get, index = self._index.get, self.id
        return [get(t) if t in self._index else index(t) for t in texts]


def compact(value):
    """A metric value as written into the report: ints as they are, floats to 7
    significant digits, None for missing values and non-finite floats."""
    if value is None or value.__class__ is bool:
        return None
    if value.__class__ is int:
        return value
    if value.__class__ is float:
        if not math.isfinite(value):
            return None
        return float(f"{value:.7g}")
    return None


def compact_list(values, keep) -> list:
    return [compact(values[i]) for i in keep]


class _Series:
    """Per-node sums over some of the aligned files of a raw metric, on the union tree."""

    def __init__(self, group, maps, size) -> None:
        self.group, self.maps, self.size = group, maps, size

    def values(self, metric, files, exclusive_set, own=False) -> list:
        if len(self.group) == 1:
            p = self.group[0]
            if own or metric in exclusive_set:
                return p.exclusive(metric) if metric in p.metric_names else [0] * self.size
            return p.inclusive(metric) if metric in p.metric_names else [0] * self.size
        out = [0] * self.size
        for f in files:
            p, m = self.group[f], self.maps[f]
            if metric not in p.metric_names:
                continue
            mine = p.exclusive(metric) if own or metric in exclusive_set else p.inclusive(metric)
            for i, v in enumerate(mine):
                if v:
                    out[m[i]] += v
        return out

    def own(self, metric, files, exclusive_set) -> list:
        """Each node's own values as written (None where absent) for one file, summed over
        the files otherwise."""
        if len(self.group) == 1:
            p = self.group[0]
            return p.column(metric) if metric in p.metric_names else [None] * self.size
        return self.values(metric, files, exclusive_set, own=True)

    def per_file(self, metric, f, exclusive_set) -> list:
        out = [0] * self.size
        p, m = self.group[f], self.maps[f]
        if metric in p.metric_names:
            mine = p.exclusive(metric) if metric in exclusive_set else p.inclusive(metric)
            for i, v in enumerate(mine):
                out[m[i]] = v
        return out


def _combine(columns, how):
    if how == "sum":
        return [sum(v) for v in zip(*columns)]
    if how == "mean":
        return [sum(v) / len(v) for v in zip(*columns)]
    return [(min if how == "min" else max)(v) for v in zip(*columns)]


def _width_metric(profile, specs) -> str | None:
    """The raw, summed metric the flame graph's widths come from."""
    if specs:
        try:
            source = recipe(profile, specs[0]).additive_source
        except ViewerError:
            source = None
        if source:
            return source
    time = match_raw(profile, "time")
    if time and time not in profile.exclusive_metrics:
        return time
    for name in profile.metric_names:
        if name not in profile.exclusive_metrics:
            return name
    return None


def _nested(values, profile, metric, exclusive) -> list:
    """Widths for the flame graph: a summed metric's inclusive values as they are; for a
    metric readers do not sum (cpu_time, cycles: each node's own measurement, which already
    contains its children's), the node's own value where it has one, else its children's
    sum. Negative and missing values are 0."""
    values = [v if v.__class__ in (int, float) and v > 0 else 0 for v in values]
    if metric not in exclusive:
        return values
    out = list(values)
    children = [0] * len(out)
    parents = profile.parents
    for i in range(len(out) - 1, 0, -1):
        if not out[i]:
            out[i] = children[i]
        children[parents[i]] += out[i]
    if not out[0]:
        out[0] = children[0]
    return out


def _kinds(names, kernel_mask) -> list:
    out = []
    for name, kernel in zip(names, kernel_mask):
        if kernel:
            out.append(KIND_KERNEL)
        elif name.endswith(")") and " (+" in name and "@" in name:
            out.append(KIND_LIBRARY)
        elif "@" in name and ":" in name:
            out.append(KIND_PYTHON)
        else:
            out.append(KIND_SCOPE)
    return out


def kept_nodes(union, width, first, threshold, depth, max_frames):
    """(kept node indices in pre-order, notes): visible_nodes' answer for -t/-d, then at
    most max_frames nodes, the widest ones (closed under parents)."""
    notes = []
    shown = visible_nodes(union, first, threshold, depth)
    n = len(union)
    hidden = n - sum(shown)
    if hidden:
        why = []
        if threshold is not None:
            why.append(f"-t {threshold:g}")
        if depth is not None:
            why.append(f"-d {depth}")
        notes.append(f"{hidden:,} frames hidden by {' and '.join(why)}, as in the text view.")
    count = n - hidden
    if count > max_frames:
        values = sorted((width[i] for i in range(1, n) if shown[i]), reverse=True)
        cutoff = values[max_frames - 2] if max_frames >= 2 else float("inf")
        parents = union.parents
        keep = bytearray(n)
        keep[0] = 1
        for i in range(1, n):
            if shown[i] and width[i] >= cutoff and keep[parents[i]]:
                keep[i] = 1
        # Ties at the cutoff can overshoot the budget: drop the last of them.
        over = sum(keep) - max_frames
        for i in range(n - 1, 0, -1):
            if over <= 0:
                break
            if keep[i] and width[i] == cutoff and (i + 1 >= n or parents[i + 1] != i):
                keep[i] = 0
                over -= 1
        pruned = count - sum(keep)
        total = width[0] or 0
        share = f" ({cutoff / total * 100:.2g}% of the total)" if total else ""
        notes.append(
            f"{pruned:,} of {count:,} frames pruned to keep the report small: those "
            f"narrower than {cutoff:.6g}{share}, with their subtrees. Their values still "
            "count in their ancestors, which show them as self time."
        )
        shown = keep
    return [i for i in range(n) if shown[i]], notes


def _pruned_counts(union, keep_mask) -> list:
    """For each node, how many of its descendants are left out where it is the nearest
    kept ancestor (pairs [node, count] flattened, nodes in the union's numbering)."""
    ends, parents = union.ends, union.parents
    counts = {}
    i, n = 1, len(union)
    while i < n:
        if keep_mask[i]:
            i += 1
            continue
        p = parents[i]
        counts[p] = counts.get(p, 0) + ends[i] - i
        i = ends[i]
    return counts


def encode_view(
    profiles,
    specs,
    strings: StringTable,
    *,
    merge="sum",
    base=None,
    threshold=None,
    depth=None,
    max_frames=100_000,
    label="",
) -> dict:
    """One view of the report (see the module docstring). profiles: one per file (parts of
    a run already added up), already selected and folded."""
    from .main import build_view  # main imports this module lazily; no cycle at import

    group = profiles + ([base] if base is not None else [])
    if len(group) == 1:
        union, maps = profiles[0], [None]
    else:
        union, maps = align(group)
    shown_union, columns = build_view(profiles, specs, merge, base)
    if len(shown_union) != len(union):  # build_view aligns the same group the same way
        raise AssertionError("build_view's tree differs from the report's")
    n = len(union)
    series = _Series(group, maps, n)
    count = len(profiles)
    after = list(range(count))
    metric_names, exclusive = [], set()
    for p in group:
        exclusive |= p.exclusive_metrics
        metric_names += [m for m in p.metric_names if m not in metric_names]

    width_metric = _width_metric(union, specs)

    def widths(files):
        if width_metric is None:  # a profile without metrics: its frames by leaves
            leaves = [0 if union.ends[i] > i + 1 else 1 for i in range(n)]
            for i in range(n - 1, 0, -1):
                leaves[union.parents[i]] += leaves[i]
            return leaves
        if len(files) > 1:
            return _combine(
                [
                    _nested(
                        series.per_file(width_metric, f, exclusive), union, width_metric, exclusive
                    )
                    for f in files
                ],
                merge,
            )
        return _nested(
            series.values(width_metric, files, exclusive), union, width_metric, exclusive
        )

    width = widths(after)
    first = columns[0].values if columns else [None] * n
    keep, notes = kept_nodes(union, width, first, threshold, depth, max_frames)
    keep_mask = bytearray(n)
    for i in keep:
        keep_mask[i] = 1
    remap = {u: k for k, u in enumerate(keep)}
    levels = union.depths()
    device_ids = union.column("device_id")
    view = {
        "label": label,
        "size": len(union),
        "depth": [levels[i] for i in keep],
        "name": strings.ids([union.names[i] for i in keep]),
        "kind": _kinds([union.names[i] for i in keep], [device_ids[i] is not None for i in keep]),
        "notes": notes,
    }
    pruned = _pruned_counts(union, keep_mask)
    view["pruned"] = [x for u in sorted(pruned) for x in (remap[u], pruned[u])]

    raw = []
    for m in metric_names:
        entry = {
            "name": m,
            "exclusive": m in exclusive,
            "values": compact_list(series.values(m, after, exclusive), keep),
        }
        if base is not None:
            entry["before"] = compact_list(series.values(m, [count], exclusive), keep)
        raw.append(entry)
    launches = _launches(union, metric_names, exclusive) if len(group) == 1 else None
    if launches is not None:
        raw.append({"name": "launches", "hidden": True, "values": compact_list(launches, keep)})
    view["raw"] = raw
    view["columns"] = [
        {
            "title": c.title,
            "values": compact_list(c.values, keep),
            # JSON does not tell 4000 from 4000.0; the text view prints them differently.
            "float": any(v.__class__ is float for v in c.values),
        }
        for c in columns
    ]
    if (
        width_metric in metric_names
        and width_metric not in exclusive
        and (count == 1 or merge == "sum")
    ):
        view["width"] = {"metric": width_metric, "raw": metric_names.index(width_metric)}
    else:
        view["width"] = {"metric": width_metric or "leaves", "values": compact_list(width, keep)}
    view["derived"] = _hover_recipes(union)
    before = widths([count]) if base is not None else None
    view["table"] = top_frames(union, width, before, remap, strings)
    if count > 1 and base is None and width_metric:
        view["ranks"] = {
            "labels": [p.source for p in profiles],
            "metric": width_metric,
            "values": [
                compact_list(series.per_file(width_metric, f, exclusive), keep) for f in after
            ],
        }
    if base is not None:
        view["diff"] = {"base": base.source, "before": compact_list(widths([count]), keep)}
    own = {m: series.own(m, after, exclusive) for m in _roofline_metrics(union)}
    view["roofline"] = roofline(union, own, remap)
    view["intra"] = intra_bars(union, series, after, exclusive, remap, width)
    return view


def _launches(profile, metric_names, exclusive):
    """count summed over the nodes that carry a time (avg_time's denominator), when it
    differs from count's plain inclusive sum."""
    time, count = match_raw(profile, "time"), match_raw(profile, "count")
    if not time or not count or count in exclusive:
        return None
    launches = profile.inclusive(count, where=time)
    return None if launches == profile.inclusive(count) else launches


def _hover_recipes(profile) -> list:
    """Derived metrics the hover shows for every node, as derive.recipe describes them."""
    specs = []
    if match_raw(profile, "time") and match_raw(profile, "count"):
        specs.append("avg_time/us")
    if match_raw(profile, "cpu_time") and match_raw(profile, "count"):
        specs.append("avg_cpu_time/us")
    if match_raw(profile, "time"):
        specs += [f"tflop{w}/s" for w in FLOP_WIDTHS if match_raw(profile, f"flops{w}")]
        if match_raw(profile, "flops"):
            specs.append("tflop/s")
        if match_raw(profile, "bytes"):
            specs.append("gbyte/s")
    out = []
    for spec in specs:
        r = recipe(profile, spec)
        out.append(
            {
                "title": r.title,
                "op": r.op,
                "source": r.source,
                "other": r.other,
                "exponent": r.exponent,
                "divisor": r.divisor,
            }
        )
    return out


def top_frames(union, width, before, remap, strings, limit=TABLE_ROWS) -> dict:
    """The width metric summed per frame name over the whole tree (pruned frames too):
    frames, self (a node's width less its children's) and total (a name counted at its
    outermost frame only, so recursion does not count twice); with a base, the base's
    total. The `limit` names with the largest self and the `limit` with the largest total.
    `node`: the name's widest kept frame (-1 when every one is pruned)."""
    n, parents, names, levels = len(union), union.parents, union.names, union.depths()
    own = list(width)
    for i in range(1, n):
        own[parents[i]] -= width[i]
    groups = {}
    for i in range(1, n):
        nodes = groups.get(names[i])
        if nodes is None:
            groups[names[i]] = [i]
        else:
            nodes.append(i)
    ends = union.ends
    rows = []
    for name, nodes in groups.items():
        # Pre-order: a frame inside an earlier frame of the same name lies before its end.
        outer, inside_until = [], -1
        for i in nodes:
            if i >= inside_until:
                outer.append(i)
                inside_until = ends[i]
        kept = [i for i in nodes if i in remap]
        widest = remap[max(kept, key=width.__getitem__)] if kept else -1
        rows.append(
            (
                name,
                len(nodes),
                sum(own[i] for i in nodes if own[i] > 0),
                sum(width[i] for i in outer),
                sum(before[i] or 0 for i in outer) if before is not None else 0,
                widest,
            )
        )
    chosen = set(heapq.nlargest(limit, range(len(rows)), key=lambda k: rows[k][2]))
    chosen |= set(heapq.nlargest(limit, range(len(rows)), key=lambda k: rows[k][3]))
    if before is not None:
        chosen |= set(
            heapq.nlargest(limit, range(len(rows)), key=lambda k: abs(rows[k][3] - rows[k][4]))
        )
    rows = sorted((rows[k] for k in chosen), key=lambda r: -r[2])
    out = {
        "names": len(groups),
        "name": strings.ids([r[0] for r in rows]),
        "frames": [r[1] for r in rows],
        "self": [compact(r[2]) for r in rows],
        "total": [compact(r[3]) for r in rows],
        "node": [r[5] for r in rows],
    }
    if before is not None:
        out["base"] = [compact(r[4]) for r in rows]
    return out


def _has_ancestor_named(i, name, names, parents) -> bool:
    p = parents[i]
    while p > 0:
        if names[p] == name:
            return True
        p = parents[p]
    return False


# ---------------------------------------------------------------------- roofline
def _roofline_metrics(profile) -> list:
    names = [match_raw(profile, f"flops{w}") for w in FLOP_WIDTHS]
    names += [match_raw(profile, "flops"), match_raw(profile, "bytes"), match_raw(profile, "time")]
    return [m for m in names if m]


def _device_roofs(profile, device_type, device_id):
    """{label, bandwidth, roofs: [{width, peak}], note} for one device of the profile."""
    from .derive import _device_entry  # the `util` metric's own lookup

    out = {"type": device_type, "id": device_id, "roofs": [], "bandwidth": None, "note": ""}
    try:
        device_type, device = _device_entry(profile, device_type, device_id)
    except ViewerError as e:
        out["note"] = str(e).replace("util: ", "")
        return out
    arch = device.get("arch", "?")
    out["label"] = f"{device_type} {device_id} (arch {arch}, {device.get('num_sms', '?')} SMs)"
    try:
        out["bandwidth"] = _peak_bandwidth(device_type, device_id, device)
    except ViewerError as e:
        out["note"] = str(e).replace("util: ", "")
    try:
        flops8 = _peak_flops8(device_type, device_id, device)
        out["roofs"] = [{"width": w, "peak": flops8 / (w / 8)} for w in FLOP_WIDTHS]
    except ViewerError as e:
        out["note"] = (out["note"] + " " + str(e).replace("util: ", "")).strip()
    return out


def roofline(profile, own, remap) -> dict | None:
    """Kernel points (own FLOPs over own bytes and time, on nodes that ran on a device)
    and each device's roofs; None when no kernel carries both flops* and bytes. At most
    ROOFLINE_MAX_POINTS kernels, the longest, are kept."""
    time = match_raw(profile, "time")
    nbytes = match_raw(profile, "bytes")
    widths = [(w, match_raw(profile, f"flops{w}")) for w in FLOP_WIDTHS]
    widths = [(w, m) for w, m in widths if m]
    generic = match_raw(profile, "flops")
    if generic:
        widths.append((0, generic))
    if not time or not nbytes or not widths:
        return None
    device_ids, device_types = profile.column("device_id"), profile.column("device_type")
    times, amounts = own[time], own[nbytes]
    flop_columns = [(w, own[m]) for w, m in widths]

    kernels = [i for i, d in enumerate(device_ids) if d is not None]
    seconds_total, candidates = 0, []
    for i in kernels:
        t, b = times[i], amounts[i]
        if (t.__class__ is int or t.__class__ is float) and t > 0:
            seconds_total += t
            if (b.__class__ is int or b.__class__ is float) and b > 0:
                candidates.append(i)
    with_flops = bytearray(len(device_ids))
    for _, column in flop_columns:
        for i in candidates:
            f = column[i]
            if (f.__class__ is int or f.__class__ is float) and f > 0:
                with_flops[i] = 1
    candidates = [i for i in candidates if with_flops[i]]
    if not candidates:
        return None
    chosen = heapq.nlargest(ROOFLINE_MAX_POINTS, candidates, key=times.__getitem__)
    unit = 1e-9 if time.endswith("(ns)") else 1.0  # Proton and Triton write ns
    parents, devices, points = profile.parents, {}, []
    for i in chosen:
        flops = [(column[i] or 0, w) for w, column in flop_columns]
        flops = [(f if f.__class__ in (int, float) and f > 0 else 0, w) for f, w in flops]
        total = sum(f for f, _ in flops)
        key = (device_types[i], str(device_ids[i]))
        node = i
        while node not in remap:  # a pruned kernel: link to its nearest kept ancestor
            node = parents[node]
        seconds = times[i] * unit
        points.append((seconds, i, remap[node], total / amounts[i], total / seconds,
                       max(flops)[1], devices.setdefault(key, len(devices))))  # fmt: skip
    note = ""
    if len(candidates) > len(points):
        note = f"The {len(points):,} longest of {len(candidates):,} kernels are shown."
    return {
        "devices": [_device_roofs(profile, t, d) for t, d in devices],
        "node": [p[2] for p in points],
        "name": [profile.names[p[1]] for p in points],
        "time": [compact(p[0]) for p in points],
        "ai": [compact(p[3]) for p in points],
        "perf": [compact(p[4]) for p in points],
        "width": [p[5] for p in points],
        "device": [p[6] for p in points],
        "total_time": compact(seconds_total * unit),
        "note": note,
    }


# ---------------------------------------------------------------------- cycles per scope
def intra_bars(profile, series, files, exclusive, remap, width) -> dict | None:
    """Per kernel with intra-kernel scopes below it (instrumentation trees): each scope's
    cycles per warp (normalized_cycles; cycles where that is absent) and run count."""
    metric = next((match_raw(profile, m) for m in _CYCLE_METRICS if match_raw(profile, m)), None)
    if metric is None:
        return None
    cycles = series.values(metric, files, exclusive, own=True)
    count_metric = match_raw(profile, "count")
    counts = series.values(count_metric, files, exclusive, own=True) if count_metric else None
    device_ids = profile.column("device_id")
    ends, levels, names = profile.ends, profile.depths(), profile.names
    kernels = []
    for i in range(len(profile)):
        if device_ids[i] is None or ends[i] == i + 1:
            continue
        scopes = []
        for j in range(i + 1, ends[i]):
            if device_ids[j] is None and cycles[j]:
                scopes.append(
                    {
                        "node": remap.get(j, -1),
                        "name": names[j],
                        "level": levels[j] - levels[i] - 1,
                        "cycles": compact(cycles[j]),
                        "count": compact(counts[j]) if counts else None,
                    }
                )
        if scopes or cycles[i]:
            kernels.append(
                {
                    "node": remap.get(i, -1),
                    "name": names[i],
                    "cycles": compact(cycles[i]),
                    "width": compact(width[i]),
                    "scopes": scopes,
                }
            )
    if not kernels:
        return None
    kernels.sort(key=lambda k: -(k["width"] or 0))
    note = ""
    if len(kernels) > INTRA_MAX_KERNELS:
        note = f"The {INTRA_MAX_KERNELS} widest of {len(kernels)} instrumented kernels are shown."
    return {"metric": metric, "kernels": kernels[:INTRA_MAX_KERNELS], "note": note}
