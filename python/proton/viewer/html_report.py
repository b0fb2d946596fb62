"""`proton-viewer --html report.html FILE...`: one self-contained HTML file to look at a
profile in any browser, offline: a flame graph (icicle) with zoom and search, the top
frames, a roofline, intra-kernel views (warp timelines, cycles per scope), per-rank
imbalance and differential flame graphs. docs/html-report.md describes what it shows.

    write_html("report.html", [viewer.load("run.hatchet")], ["time/ms"])

The page's script and styles are the files under html/ (written for it, no third-party
code), inlined when the report is written; the data goes in one JSON block of compact
arrays (html_tree.py, html_trace.py). The page fetches nothing: a Content-Security-Policy
forbids every request.
"""

from __future__ import annotations

import datetime
import html
import json
import os
import sys

from .. import __version__
from . import frames as frame_modes
from .derive import default_metrics
from .errors import ViewerError
from .html_trace import encode_gantt, is_trace, kernel_profile, read_events
from .html_tree import StringTable, encode_view
from .model import select

MAX_FRAMES = 100_000
ASSETS = os.path.join(os.path.dirname(__file__), "html")
JS_FILES = ("core.js", "flame.js", "table.js", "roofline.js", "intra.js", "ranks.js", "main.js")
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"


def _asset(name: str) -> str:
    with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
        return f.read()


def build_data(
    profiles,
    specs=None,
    *,
    merge="sum",
    base=None,
    threshold=None,
    depth=None,
    frames="folded",
    events=(),
    max_frames=MAX_FRAMES,
    title=None,
    sources=None,
) -> dict:
    """The report's data (what the page's JSON block holds). profiles: one per file or run,
    selected (-i/-e) but not folded; events: chrome traces' event lists for the warp view."""
    if not profiles:
        raise ViewerError("the HTML report needs at least one tree profile or trace")
    specs = specs if specs is not None else default_metrics(profiles[0])
    strings = StringTable()
    shown = [frame_modes.fold(p, frames) for p in profiles]
    shown_base = frame_modes.fold(base, frames) if base is not None else None
    options = {"merge": merge, "base": base, "threshold": threshold, "depth": depth}
    labels = {"folded": "library frames folded", "short": "short paths", "all": "every frame"}
    views = [
        encode_view(
            shown,
            specs,
            strings,
            max_frames=max_frames,
            label=labels[frames],
            **_with(options, base=shown_base),
        )
    ]
    if frames != "all" and (
        any(a is not b for a, b in zip(shown, profiles)) or shown_base is not base
    ):
        views.append(
            encode_view(
                profiles, specs, strings, max_frames=max_frames, label=labels["all"], **options
            )
        )
    gantt = None
    for trace_events in events:
        part = encode_gantt(trace_events, strings)
        if part is None:
            continue
        if gantt is None:
            gantt = part
        else:
            gantt["launches"] += part["launches"]
            gantt["notes"] += part["notes"]
    sources = sources or [p.source for p in profiles]
    metadata = profiles[0].metadata
    return {
        "meta": {
            "title": title or "Proton report: " + ", ".join(os.path.basename(s) for s in sources),
            "sources": sources,
            "base": base.source if base is not None else None,
            "merge": merge if len(profiles) > 1 else None,
            "metrics": specs,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "version": __version__,
            "profile_command": metadata.get("command_line") if isinstance(metadata, dict) else None,
            "stats": {k: v for k, v in profiles[0].stats.items() if v} if base is None else {},
        },
        "strings": strings.strings,
        "views": views,
        "gantt": gantt,
    }


def _with(options: dict, **changes) -> dict:
    return dict(options, **changes)


def render_document(data: dict) -> str:
    """The whole HTML page for the data."""
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # Inside <script>, "</script>" or "<!--" would end or change the block: no "<" at all.
    payload = payload.replace("<", "\\u003c")
    script = "\n".join(_asset(name) for name in JS_FILES)
    page = _asset("report.html")
    for marker, text in (
        ("/*@CSS@*/", _asset("report.css")),
        ("@CSP@", CSP),
        ("@TITLE@", html.escape(data["meta"]["title"])),
        ("@DATA@", payload),
        ("/*@JS@*/", script),
    ):
        page = page.replace(marker, text, 1)
    return page


def write_html(path, profiles, specs=None, **options) -> int:
    """Writes the report for `profiles` (see build_data for the options) to path; returns
    its size in bytes."""
    document = render_document(build_data(profiles, specs, **options)).encode("utf-8")
    try:
        with open(path, "wb") as f:
            f.write(document)
    except OSError as e:
        raise ViewerError(f"cannot write {path}: {e.strerror or e}") from None
    return len(document)


def write_from_args(args, specs) -> int:
    """proton-viewer --html: the FILE arguments (tree profiles, the part files of a run,
    chrome traces) into args.html. Returns the report's size in bytes."""
    from . import files
    from .main import _load_run, prepare

    traces = [p for p in args.files if is_trace(p)]
    trees = [p for p in args.files if p not in traces]
    profiles = [_load_run(group, args.include, args.exclude) for group in files.runs(trees)]
    events = [read_events(p) for p in traces]
    if not profiles:
        for path, trace_events in zip(traces, events):
            profile = kernel_profile(trace_events, path)
            if profile is not None:
                profiles.append(select(profile, args.include, args.exclude))
    if not profiles:
        raise ViewerError(f"{', '.join(args.files)}: no kernel or warp slice to show")
    base = prepare(args.diff_profile, args.include, args.exclude) if args.diff_profile else None
    size = write_html(
        args.html,
        profiles,
        specs,
        merge=args.merge,
        base=base,
        threshold=args.threshold,
        depth=args.depth,
        frames=getattr(args, "frames", "folded"),
        events=events,
        sources=trees + traces,
    )
    print(f"[PROTON] HTML report written to {args.html} ({size / 1e6:.1f} MB)", file=sys.stderr)
    return size
