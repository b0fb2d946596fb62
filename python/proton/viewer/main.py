"""`proton-viewer`: print a profile as a tree in the terminal, list its metrics, compare or
merge profiles, export them to other viewers.

    proton-viewer -m time/s,tflop16/s run.hatchet
    proton-viewer -m time/ms --diff-profile before.hatchet after.hatchet
    proton-viewer -m time/ms --merge max rank0.hatchet rank1.hatchet
    proton-viewer --export speedscope -o run.speedscope.json run.hatchet
    proton-viewer --lines matmul_kernel -m num_samples,stalled_wait/% run.hatchet
    proton-viewer --html report.html run.hatchet

Any problem with the input is one `[PROTON] ...` line on stderr and exit status 1.
"""

import argparse
import os
import sys

from .. import __version__
from . import fast_report, files, frames
from .derive import DERIVED_HELP, FLOP_WIDTHS, Column, base_name, default_metrics, derive, match_raw
from .errors import ViewerError
from .model import Profile, align, hide_launch_metadata, is_missing, load, select
from .render import render

FORMATS = ["full", "file_function_line", "function_line", "file_function"]
MERGES = ["sum", "mean", "min", "max"]
EXPORTS = {"folded": ".folded", "speedscope": ".speedscope.json", "pprof": ".pb.gz"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="proton-viewer",
        description="Show Proton (and Triton proton) tree profiles: .hatchet, .hatchet_msgpack.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=DERIVED_HELP,
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="profiles, directories of them, or quoted globs; the part files of one run "
        "(NAME[.rankR].part_P.EXT, periodic flushing) are added up, then several runs or "
        "ranks (NAME.rankR.EXT) are merged with --merge",
    )
    p.add_argument("-l", "--list", action="store_true", help="list the metrics of the profile")
    p.add_argument(
        "-m",
        "--metrics",
        help="comma-separated raw or derived metrics to show (default: time/s, or the "
        "first metric); names ignore case and units",
    )
    p.add_argument("-i", "--include", help="keep only paths through frames matching REGEX")
    p.add_argument("-e", "--exclude", help="drop frames matching REGEX and their subtrees")
    p.add_argument(
        "-t", "--threshold", type=float, help="hide frames whose first metric is below this"
    )
    p.add_argument("-d", "--depth", type=int, default=100, help="levels shown (ROOT is level 0)")
    p.add_argument("-f", "--format", choices=FORMATS, default="full", help="frame name format")
    p.add_argument(
        "--full-names",
        action="store_true",
        help="show kernel names whole (by default a C++ signature is shown without its "
        "template and parameter lists; -i/-e, --lines and exports always use the full name)",
    )
    p.add_argument(
        "--frames", choices=frames.MODES, default=frames.DEFAULT_MODE, help=frames.MODES_HELP
    )
    p.add_argument(
        "--print-sorted",
        "--print_sorted",
        action="store_true",
        help="also list the frames sorted by the first metric",
    )
    p.add_argument(
        "--diff-profile",
        "-diff",
        metavar="BASE",
        help="show FILE - BASE for each metric (as in Triton's viewer)",
    )
    p.add_argument(
        "--merge",
        choices=MERGES,
        default="sum",
        help="how several FILEs combine per node (default sum); an imbalance column "
        "(max / mean of the first metric) is added",
    )
    p.add_argument(
        "--lines",
        metavar="KERNEL_REGEX",
        help="instead of the tree, list the source lines of the kernel frames whose name "
        "matches (PC sampling, mode='pcsampling'): one row per file:line@function, summed "
        "over every matching frame, sorted by num_samples, with its share of the kernels' "
        "samples; -m defaults to num_samples and <metric>/%% is a share of those kernels",
    )
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.add_argument(
        "--export", choices=sorted(EXPORTS), help="write the profile for another viewer instead"
    )
    p.add_argument("-o", "--output", help="export file (default: FILE's name + extension)")
    p.add_argument(
        "--html",
        metavar="PATH",
        help="write a self-contained HTML report (flame graph, top frames, roofline, warp "
        "timelines of chrome traces, ranks, --diff-profile) to PATH instead; FILEs may also be "
        "chrome traces; -m, -i, -e, -t, -d, --merge and --frames apply (docs/html-report.md)",
    )
    p.add_argument("--version", action="version", version=f"proton-viewer {__version__}")
    return p


def prepare(path, include=None, exclude=None) -> Profile:
    """Loads a profile and applies the frame selections that change what is counted."""
    return select(hide_launch_metadata(load(path)), include, exclude)


def _load_run(paths, include=None, exclude=None) -> Profile:
    """One file, or the part files of one run added up (each phase's metrics sum)."""
    parts = [prepare(p, include, exclude) for p in paths]
    return parts[0] if len(parts) == 1 else align(parts)[0]


def _combine(values, how):
    present = [v for v in values if not is_missing(v)]
    if not present:
        return None
    if how == "sum":
        return sum(present)
    if how == "mean":
        return sum(present) / len(present)
    return min(present) if how == "min" else max(present)


def _spread(column, mapping, size):
    """The column on the union tree; a node a file does not have counts as 0 there when
    the metric is a sum (time, count, ...), and as no value otherwise (rates)."""
    values = column.values
    out = [0 if column.additive_source else None] * size
    for i, u in enumerate(mapping):
        out[u] = values[i]
    return out


def _imbalance(values):
    present = [v if not is_missing(v) else 0 for v in values]
    mean = sum(present) / len(present)
    return max(present) / mean if mean else None


def build_view(profiles, specs, merge="sum", base=None):
    """(tree, columns) to render: one profile as is, or several aligned node by node and
    combined with `merge`, then minus `base` when given. Each file's metrics are derived
    from that file alone, then combined."""
    if len(profiles) == 1 and base is None:
        return profiles[0], [derive(profiles[0], s) for s in specs]
    group = profiles + ([base] if base is not None else [])
    union, maps = align(group)
    n = len(union)
    derived = [[derive(p, s) for s in specs] for p in group]
    per_file = [[_spread(c, m, n) for c in cols] for cols, m in zip(derived, maps)]
    titles = [c.title for c in derived[0]]
    columns = []
    count = len(profiles)
    for k, title in enumerate(titles):
        files = [per_file[f][k] for f in range(count)]
        values = files[0] if count == 1 else [_combine(v, merge) for v in zip(*files)]
        if base is not None:
            values = [_subtract(a, b) for a, b in zip(values, per_file[-1][k])]
        label = title if count == 1 else f"{title} ({merge})"
        columns.append(Column(label if base is None else f"{label} diff", values))
    if count > 1 and titles:
        first = [per_file[f][0] for f in range(count)]
        columns.append(Column("imbalance", [_imbalance(v) for v in zip(*first)]))
    return union, columns


def _subtract(a, b):
    if is_missing(a) and is_missing(b):
        return None
    return (0 if is_missing(a) else a) - (0 if is_missing(b) else b)


def list_metrics(profile: Profile) -> str:
    exclusive = profile.exclusive_metrics
    lines = ["Available inclusive metrics:"]
    lines += [f"- {base_name(m).lower()}" for m in profile.metric_names if m not in exclusive]
    lines.append("Available exclusive metrics:")
    lines += [f"- {base_name(m).lower()}" for m in profile.metric_names if m in exclusive]
    lines.append("Available derived metrics:")
    has = {w: match_raw(profile, w) is not None for w in ("time", "cpu_time", "count", "bytes")}
    for kind in ("time", "cpu_time"):
        if has[kind]:
            lines.append(f"- {kind}/s, {kind}/ms, {kind}/us, {kind}/ns")
            if has["count"]:
                lines.append(f"- avg_{kind}/s, avg_{kind}/ms, avg_{kind}/us, avg_{kind}/ns")
    if has["time"]:
        for width in ("",) + FLOP_WIDTHS:
            if match_raw(profile, f"flops{width}"):
                lines.append(f"- flop{width}/s, gflop{width}/s, tflop{width}/s")
        if has["bytes"]:
            lines.append("- byte/s, gbyte/s, tbyte/s")
        if profile.devices:
            lines.append("- util")
    if profile.metric_names:
        lines.append("- <metric>/% for any metric above")
    return "\n".join(lines) + "\n"


def _export(args, profiles, specs) -> str:
    from . import exports  # only exports need it

    path = args.output or os.path.splitext(args.files[0])[0] + EXPORTS[args.export]
    tree = profiles[0] if len(profiles) == 1 else align(profiles)[0]
    metric = None
    if specs:
        metric = derive(tree, specs[0]).additive_source
    metric = metric or match_raw(tree, "time") or (tree.metric_names or [None])[0]
    if metric is None:
        raise ViewerError(f"{args.files[0]} has no metric to weigh the export by")
    if args.export == "folded":
        data = exports.folded(tree, tree.exclusive(metric)).encode()
    elif args.export == "speedscope":
        entries = [(p.source, p, p.exclusive(metric)) for p in profiles]
        document = exports.speedscope(entries, exports.speedscope_unit(metric), args.files[0])
        data = exports.to_json(document).encode()
    else:
        properties = set((tree.metadata.get("metric_aggregation") or {}).get("property") or ())
        metrics = [m for m in tree.metric_names if m not in properties]
        metrics.sort(key=lambda m: m != metric)
        start = tree.metadata.get("start_time_unix_ns") or 0
        columns = [(m, tree.exclusive(m)) for m in metrics]
        data = exports.pprof(tree, columns, start if isinstance(start, int) else 0, "proton")
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise ViewerError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def _use_color(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return (
        sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def run(argv=None) -> int:
    args = _parser().parse_args(argv)
    specs = [s.strip() for s in args.metrics.split(",") if s.strip()] if args.metrics else None
    args.files = files.expand(args.files)
    if args.html:
        from .html_report import write_from_args

        write_from_args(args, specs)
        return 0
    groups = files.runs(args.files)
    one_tree = len(args.files) == 1 and not (
        args.list or args.export or args.diff_profile or args.lines
    )
    if one_tree and fast_report.enabled() and fast_report.show(args, specs, _use_color(args.color)):
        return 0
    profiles = [_load_run(group, args.include, args.exclude) for group in groups]
    if args.list:
        for p in profiles:
            if len(profiles) > 1:
                sys.stdout.write(f"{p.source}:\n")
            sys.stdout.write(list_metrics(p))
        return 0
    if args.lines is not None:
        from .lines import render_lines

        sys.stdout.write(render_lines(profiles, args.lines, specs, args.format))
        sys.stdout.flush()
        return 0
    if specs is None:
        specs = default_metrics(profiles[0])
    if args.export:
        path = _export(args, profiles, specs)
        print(f"[PROTON] {args.export} export written to {path}", file=sys.stderr)
        return 0
    base = prepare(args.diff_profile, args.include, args.exclude) if args.diff_profile else None
    profiles = [frames.fold(p, args.frames) for p in profiles]
    base = frames.fold(base, args.frames) if base is not None else None
    tree, columns = build_view(profiles, specs, args.merge, base)
    stats = tree.stats if base is None else {}
    text = render(
        tree,
        columns,
        threshold=args.threshold,
        depth=args.depth,
        name_format=args.format,
        color=_use_color(args.color),
        print_sorted=args.print_sorted,
        stats=stats,
        full_names=args.full_names,
    )
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def main(argv=None) -> None:
    try:
        code = run(argv)
    except ViewerError as e:
        print(str(e), file=sys.stderr)
        code = 1
    except MemoryError:
        print("[PROTON] out of memory while showing the profile", file=sys.stderr)
        code = 1
    except BrokenPipeError:  # `proton-viewer ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
