"""Intra-kernel traces for the HTML report: warp slices read from a chrome trace, grouped
per kernel launch into the compact arrays the warp Gantt chart draws.

    events = read_events("run.chrome_trace")
    gantt = encode_gantt(events, strings)        # None when the trace has no warp slices
    profile = kernel_profile(events, "run.chrome_trace")   # kernel times as a tree

Two layouts of warp slices are read:
- Triton's (Proton writes it since the trace_layout change, triton.profiler always did):
  pid "<kernel> Core<sm> CTA<cta>", tid "warp <w>", name = scope, cat = kernel, args with
  sm and cycles;
- Proton's first one: cat "warp", integer pid and tid, the lane named "CTA <c> Warp <w>" by
  a thread_name metadata event, args with sm and cycles; the kernel is the deepest frame of
  the slice's call_stack that is a kernel slice's call_stack, else the lane's outermost
  slice.
Times are read in microseconds (the Trace Event Format's unit) and kept in ns.
"""

from __future__ import annotations

import json
import re

from .errors import ViewerError
from .model import Profile

MAX_SLICES = 600_000
MAX_LAUNCHES_PER_KERNEL = 8
_TRITON_LANE = re.compile(r"(.*) Core(\d+) CTA(\d+)", re.DOTALL)
_WARP_TID = re.compile(r"warp (\d+)")
_OLD_LANE = re.compile(r"CTA (\d+) Warp (\d+)")
_GPU_PID = re.compile(r"GPU (\d+)")
_SLACK_NS = 1000  # warp clocks are converted to the kernel's clock within ~1 us


def is_trace(path) -> bool:
    """Whether a FILE argument is a chrome trace (by name, else by its first bytes)."""
    name = str(path)
    if name.endswith((".chrome_trace", ".trace.json")):
        return True
    if name.endswith((".hatchet", ".hatchet_msgpack")):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return b"traceEvents" in head or head.lstrip()[:2] == b"[{" and b'"ph"' in head


def read_events(path) -> list:
    try:
        with open(path, "rb") as f:
            document = json.load(f)
    except FileNotFoundError:
        raise ViewerError(f"{path}: no such file") from None
    except (OSError, ValueError, UnicodeError) as e:
        raise ViewerError(f"{path} is not a chrome trace ({e})") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise ViewerError(f"{path} is not a chrome trace (no traceEvents list)")
    return [e for e in events if isinstance(e, dict)]


def _ns(value) -> int | None:
    if value.__class__ not in (int, float):
        return None
    return round(value * 1000)


class _Slice:
    __slots__ = ("kernel", "sm", "cta", "warp", "start", "end", "name", "cycles", "stack", "lane")

    def __init__(self, kernel, sm, cta, warp, start, end, name, cycles, stack, lane):
        self.kernel, self.sm, self.cta, self.warp = kernel, sm, cta, warp
        self.start, self.end, self.name, self.cycles = start, end, name, cycles
        self.stack, self.lane = stack, lane


def _int(value, default=0) -> int:
    return value if value.__class__ is int else default


def warp_slices(events) -> list:
    """Every warp slice of the trace, in either layout, with its kernel resolved."""
    lane_names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            name = (e.get("args") or {}).get("name")
            if isinstance(name, str):
                lane_names[(e.get("pid"), e.get("tid"))] = name
    out, unresolved = [], []
    for e in events:
        if e.get("ph") != "X":
            continue
        start, dur = _ns(e.get("ts")), _ns(e.get("dur"))
        if start is None or dur is None:
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        pid, tid = e.get("pid"), e.get("tid")
        stack = args.get("call_stack")
        stack = tuple(stack) if isinstance(stack, list) else None
        name = str(e.get("name", ""))
        cycles = _int(args.get("cycles"))
        lane = _TRITON_LANE.fullmatch(pid) if isinstance(pid, str) else None
        warp = _WARP_TID.fullmatch(tid) if isinstance(tid, str) else None
        if lane and warp:  # Triton's layout: "<kernel> Core<sm> CTA<cta>", "warp <w>"
            kernel, sm = lane.group(1), _int(args.get("sm"), int(lane.group(2)))
            cta, w = int(lane.group(3)), int(warp.group(1))
        elif e.get("cat") == "warp":  # the older layout: "CTA <c> Warp <w>" lanes
            old = _OLD_LANE.fullmatch(lane_names.get((pid, tid), ""))
            if old is None:
                continue
            kernel, sm = None, _int(args.get("sm"))
            cta, w = int(old.group(1)), int(old.group(2))
        else:
            continue
        s = _Slice(kernel, sm, cta, w, start, start + dur, name, cycles, stack, (pid, tid))
        out.append(s)
        if kernel is None:
            unresolved.append(s)
    if unresolved:
        _resolve_kernels(unresolved, events)
    return out


def _resolve_kernels(slices, events) -> None:
    """The kernel of each warp slice of the first layout."""
    stacks = set()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            stack = (e.get("args") or {}).get("call_stack")
            if isinstance(stack, list):
                stacks.add(tuple(stack))
    outer = {}  # lane -> [(start, end, name)] of its outermost slices
    for s in sorted(slices, key=lambda s: (s.start, -s.end)):
        spans = outer.setdefault(s.lane, [])
        if not spans or s.start >= spans[-1][1]:
            spans.append((s.start, s.end, s.name))
    for s in slices:
        if s.stack:
            for k in range(len(s.stack), 0, -1):
                if s.stack[:k] in stacks:
                    s.kernel = s.stack[k - 1]
                    break
        if s.kernel is None:
            for start, end, name in outer.get(s.lane, ()):
                if start <= s.start <= end:
                    s.kernel = name
                    break
        if s.kernel is None:
            s.kernel = s.name


def _kernel_slices(events) -> dict:
    """kernel name -> sorted [(start ns, end ns)] of its kernel slices (launches)."""
    out = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            start, dur = _ns(e.get("ts")), _ns(e.get("dur"))
            if start is not None and dur is not None:
                out.setdefault(str(e.get("name", "")), []).append((start, start + dur))
    for spans in out.values():
        spans.sort()
    return out


def _launch_of(spans, start) -> int:
    for k, (a, b) in enumerate(spans):
        if a - _SLACK_NS <= start <= b + _SLACK_NS:
            return k
    return -1


def encode_gantt(events, strings, max_slices=MAX_SLICES) -> dict | None:
    """Per kernel launch: its warps (rows sorted by SM, CTA, warp) and their slices (by row,
    then start), each with its scope (a string id), nesting depth and cycles."""
    slices = warp_slices(events)
    if not slices:
        return None
    launches = _kernel_slices(events)
    groups = {}
    for s in slices:
        spans = launches.get(s.kernel)
        k = _launch_of(spans, s.start) if spans else 0
        groups.setdefault((s.kernel, k), []).append(s)
    notes = []
    per_kernel = {}
    budget = max_slices
    out = []
    for (kernel, k), members in sorted(groups.items(), key=lambda g: (g[0][0], g[0][1])):
        seen = per_kernel.setdefault(kernel, 0)
        if seen >= MAX_LAUNCHES_PER_KERNEL:
            continue
        if len(members) > budget:
            notes.append(f"{kernel}: a launch of {len(members):,} warp slices is left out.")
            continue
        per_kernel[kernel] = seen + 1
        budget -= len(members)
        out.append(_encode_launch(kernel, k, members, strings))
    for kernel in per_kernel:
        total = sum(1 for g in groups if g[0] == kernel)
        if total > MAX_LAUNCHES_PER_KERNEL:
            notes.append(f"{kernel}: {MAX_LAUNCHES_PER_KERNEL} of its {total} launches are shown.")
    return {"launches": out, "notes": notes}


def _encode_launch(kernel, k, members, strings) -> dict:
    lanes = sorted({(s.sm, s.cta, s.warp) for s in members})
    row_of = {lane: r for r, lane in enumerate(lanes)}
    members.sort(key=lambda s: (row_of[(s.sm, s.cta, s.warp)], s.start, -s.end))
    t0 = min(s.start for s in members)
    t1 = max(s.end for s in members)
    offsets = [0] * (len(lanes) + 1)
    starts, durs, scopes, depths, cycles = [], [], [], [], []
    stack, row = [], -1
    for s in members:
        r = row_of[(s.sm, s.cta, s.warp)]
        if r != row:
            stack, row = [], r
        while stack and s.start >= stack[-1]:
            stack.pop()
        depths.append(len(stack))
        stack.append(s.end)
        offsets[r + 1] += 1
        starts.append(s.start - t0)
        durs.append(s.end - s.start)
        scopes.append(strings.id(s.name))
        cycles.append(s.cycles)
    for r in range(len(lanes)):
        offsets[r + 1] += offsets[r]
    return {
        "kernel": kernel,
        "launch": k,
        "t0": t0,
        "span": t1 - t0,
        "sm": [lane[0] for lane in lanes],
        "cta": [lane[1] for lane in lanes],
        "warp": [lane[2] for lane in lanes],
        "offsets": offsets,
        "start": starts,
        "dur": durs,
        "scope": scopes,
        "depth": depths,
        "cycles": cycles,
    }


def kernel_profile(events, source) -> Profile | None:
    """A tree of the trace's kernel slices by call stack (time (ns) and count summed; the
    device from the lane "GPU <d>"), or, for a trace of warp slices only, each launch's span
    of its warps; None when the trace has neither."""
    entries = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        dur = _ns(e.get("dur"))
        stack = (e.get("args") or {}).get("call_stack")
        if dur is None:
            continue
        name = str(e.get("name", ""))
        path = [str(x) for x in stack[1:]] if isinstance(stack, list) and stack else [name]
        device = _GPU_PID.fullmatch(str(e.get("pid", "")))
        entries.append((path, dur, device.group(1) if device else "0"))
    if not entries:
        spans = {}
        for s in warp_slices(events):
            key = (s.stack[1:] if s.stack else (s.kernel,), s.kernel)
            a, b = spans.get(key, (s.start, s.end))
            spans[key] = (min(a, s.start), max(b, s.end))
        entries = [(list(path), b - a, "0") for (path, _), (a, b) in spans.items()]
    if not entries:
        return None
    kids = [{}]
    names, rows = ["ROOT"], [{}]
    for path, dur, device in entries:
        node = 0
        for name in path:
            child = kids[node].get(name)
            if child is None:
                child = kids[node][name] = len(names)
                names.append(name)
                rows.append({})
                kids.append({})
            node = child
        row = rows[node]
        row["time (ns)"] = row.get("time (ns)", 0) + dur
        row["count"] = row.get("count", 0) + 1
        row["device_id"], row["device_type"] = device, "CUDA"
    order, parents = [], []
    stack = [(0, -1)]
    while stack:
        node, parent = stack.pop()
        parents.append(parent)
        me = len(order)
        order.append(node)
        for child in reversed(list(kids[node].values())):
            stack.append((child, me))
    rows[0] = {"time (ns)": 0, "count": 0}
    return Profile([names[i] for i in order], parents, [rows[i] for i in order], source=source)
