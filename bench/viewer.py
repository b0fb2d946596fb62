"""Viewer and writer benchmark (docs/benchmarks.md, "Viewer and writer"); runs anywhere.

    python bench/viewer.py [--sizes 10000,100000,1000000] [--json out.json] [--keep DIR]
                           [--reuse] [--triton-python PYTHON]

Builds synthetic tree profiles of about 10k, 100k and 1M nodes with Proton itself (nested
scopes 12-20 levels deep, kernel leaves carrying `time (ns)`, `count`, `flops16`, `bytes`,
`device_id`), and reports:
- finalize(): seconds to write each format (hatchet, hatchet_msgpack) and the file size;
- `proton-viewer -m time/s,tflop16/s FILE`, each in a fresh process: wall seconds of the
  whole command; then, in another fresh process running the same code, seconds for import,
  load (read + parse into columns) and the rest (select, derive, render, write), and that
  process's peak resident memory;
- the same with Triton's `proton-viewer` when `triton` and `llnl-hatchet` import (in this
  interpreter, or in the one given with --triton-python, e.g. a venv holding triton);
- for the JSON file, `proton-viewer --html` (docs/html-report.md): seconds to write the
  report, its size and the command's peak memory, then, when Chromium is installed, the
  seconds headless Chromium takes to open it until the page is drawn (median of --repeat
  loads, each in a new tab: wall time of the navigation, and the page's own
  performance.now() when its script has drawn everything).
Timings are reported, never asserted.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import proton

METRICS = "time/s,tflop16/s"
KERNELS = [f"kernel_{k}" for k in range(64)]

# Nested `with` blocks below build the tree the benchmark measures.
# ruff: noqa: SIM117

# Runs in a fresh interpreter the command's own code (proton.viewer.main.run, stdout sent
# to /dev/null) and splits its time: import, load (the file read into columns: the C++
# reader when it can, else Python's) and the rest (select, derive, render and write).
_VIEWER_PROBE = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from proton.viewer import fast, main as viewer_main, readers
t1 = time.perf_counter()
path, specs = sys.argv[1], sys.argv[2]
spent = {"load": 0.0}

def timed(function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent["load"] += time.perf_counter() - start
    return wrapper

fast.read = timed(fast.read)
readers.read_tree = timed(readers.read_tree)
sys.stdout.flush()
saved = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
t2 = time.perf_counter()
code = viewer_main.run(["-m", specs, path])
sys.stdout.flush()
t3 = time.perf_counter()
os.dup2(saved, 1)
print(json.dumps({"import_s": t1 - t0, "load_s": spent["load"],
                  "render_s": t3 - t2 - spent["load"], "code": code,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# The same for proton-viewer --html: seconds in run() (load, derive, encode, write) and
# peak memory.
_HTML_PROBE = r"""
import json, resource, sys, time
from proton.viewer import main as viewer_main
t0 = time.perf_counter()
code = viewer_main.run(["--html", sys.argv[2], "-m", sys.argv[3], sys.argv[1]])
print(json.dumps({"write_s": time.perf_counter() - t0, "code": code,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def fanout_for(target: int, branch_levels: int, chain: int) -> int:
    """The smallest fanout whose tree has at least `target` nodes."""
    f = 2
    while count_nodes(f, branch_levels, chain) < target:
        f += 1
    return f


def count_nodes(f: int, branch_levels: int, chain: int) -> int:
    total, width = 1, 1
    for level in range(branch_levels):
        width *= f
        total += width * (1 if level == branch_levels - 1 else 1 + chain)
    return total


def build_profile(target: int):
    """Scopes nested branch_levels * (chain + 1) deep; leaves are kernels with metrics."""
    branch_levels, chain = 5, 3  # depth 16 (+ ROOT)
    f = fanout_for(target, branch_levels, chain)
    scope = proton.scope
    counter = [0]

    def grow(level):
        for i in range(f):
            if level == branch_levels - 1:
                counter[0] += 1
                n = counter[0]
                t = 1000 + (n * 7919) % 1_000_000
                metrics = {
                    "time (ns)": t,
                    "count": 1 + n % 16,
                    "flops16": t * 400_000,
                    "bytes": t * 2_000,
                    "device_id": "0",
                    "device_type": "CUDA",
                }
                with scope(KERNELS[(n + i) % len(KERNELS)] + f"_{i}", metrics):
                    pass
                continue
            with scope(f"layer{level}_{i}"):
                with scope("forward"):
                    with scope("module_call"):
                        with scope("op"):
                            grow(level + 1)

    grow(0)
    return count_nodes(f, branch_levels, chain)


def write_files(directory: str, target: int) -> dict:
    out = {}
    for fmt in ("hatchet", "hatchet_msgpack"):
        name = os.path.join(directory, f"bench_{target}")
        session = proton.start(name)
        t0 = time.perf_counter()
        nodes = build_profile(target)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        proton.finalize(session, fmt)
        path = f"{name}.{fmt}"
        out[fmt] = {
            "path": path,
            "nodes": nodes,
            "build_s": build_s,
            "finalize_s": time.perf_counter() - t0,
            "bytes": os.path.getsize(path),
        }
    return out


def reuse_files(directory: str, target: int):
    """write_files' answer for profiles a previous --keep run left, or None."""
    out = {}
    for fmt in ("hatchet", "hatchet_msgpack"):
        path = os.path.join(directory, f"bench_{target}.{fmt}")
        if not os.path.exists(path):
            return None
        out[fmt] = {
            "path": path,
            "nodes": count_nodes(fanout_for(target, 5, 3), 5, 3),
            "build_s": None,
            "finalize_s": None,
            "bytes": os.path.getsize(path),
        }
    return out


def python_path_env() -> dict:
    here = os.path.dirname(os.path.dirname(os.path.abspath(proton.__file__)))
    return dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def time_proton_viewer(path: str, repeat: int) -> dict:
    env = python_path_env()
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "proton.viewer.main", "-m", METRICS, path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            check=False,
        )
        walls.append(time.perf_counter() - t0)
        if result.returncode != 0:
            return {"error": result.stderr.strip()}
    wall = median(walls)
    probe = subprocess.run(
        [sys.executable, "-c", _VIEWER_PROBE, path, METRICS],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    lines = subprocess.run(
        [sys.executable, "-m", "proton.viewer.main", "-m", METRICS, path],
        capture_output=True,
        env=env,
        check=True,
    ).stdout.count(b"\n")
    return {"wall_s": wall, "wall_min_s": min(walls), "lines": lines, **json.loads(probe.stdout)}


def time_html_report(path: str, repeat: int) -> dict:
    """proton-viewer --html on path: write time, size, peak memory; load time in Chromium."""
    out = path + ".html"
    t0 = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", _HTML_PROBE, path, out, METRICS],
        capture_output=True,
        text=True,
        env=python_path_env(),
        check=False,
    )
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1:]}
    row = {"wall_s": time.perf_counter() - t0, **json.loads(result.stdout)}
    row["bytes"] = os.path.getsize(out)
    from proton.viewer.html_browser import Browser, find_chromium

    if find_chromium() is None:
        row["load"] = "skipped: no Chromium (apt-get install chromium)"
        return row
    walls, ready = [], []
    with Browser() as browser:
        for _ in range(repeat):
            page = browser.open("file://" + os.path.abspath(out))
            walls.append(page.wall_s)
            ready.append(page.evaluate("window.protonReport.ready") / 1000)
            page.close()
    row.update(load_wall_s=median(walls), load_ready_s=median(ready), load_max_s=max(walls))
    return row


def time_triton_viewer(path: str, python: str, timeout: float) -> dict:
    if path.endswith(".hatchet_msgpack"):
        return {"skipped": "Triton's viewer reads .hatchet JSON only"}
    probe = "import triton.profiler.viewer, hatchet"
    try:
        missing = subprocess.run([python, "-c", probe], capture_output=True, check=False)
    except OSError:
        return {"skipped": f"no interpreter {python}"}
    if missing.returncode:
        return {"skipped": f"triton and llnl-hatchet are not both importable in {python}"}
    probe = (
        "import resource, runpy, sys; sys.argv = ['proton-viewer', '-m', sys.argv[1], sys.argv[2]]\n"
        "try:\n    runpy.run_module('triton.profiler.viewer', run_name='__main__')\n"
        "finally:\n    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "
        "file=sys.stderr)"
    )
    t0 = time.perf_counter()
    try:
        result = subprocess.run(
            [python, "-c", probe, METRICS, path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"not done after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    lines = result.stderr.strip().splitlines()
    if result.returncode != 0:
        return {"error": lines[-2] if len(lines) > 1 else result.stderr.strip()}
    return {"wall_s": wall, "peak_rss_mb": float(lines[-1])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--keep", help="write the profiles here and keep them")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: read the profiles already there"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per file (median shown)")
    parser.add_argument(
        "--triton-python", default=sys.executable, help="interpreter for Triton's viewer"
    )
    parser.add_argument(
        "--triton-timeout",
        type=float,
        default=600,
        help="seconds Triton's viewer may take per file (it needs minutes on 100k nodes)",
    )
    parser.add_argument(
        "--no-html", action="store_true", help="skip the proton-viewer --html measurements"
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # no GPU here is expected
    directory = args.keep or tempfile.mkdtemp(prefix="proton_viewer_bench_")
    os.makedirs(directory, exist_ok=True)
    results = []
    try:
        for target in (int(s) for s in args.sizes.split(",")):
            files = reuse_files(directory, target) if args.reuse else None
            files = files or write_files(directory, target)
            for fmt, info in files.items():
                row = {"target": target, "format": fmt, **info}
                row["proton_viewer"] = time_proton_viewer(info["path"], args.repeat)
                row["triton_viewer"] = time_triton_viewer(
                    info["path"], args.triton_python, args.triton_timeout
                )
                if fmt == "hatchet" and not args.no_html:
                    row["html"] = time_html_report(info["path"], args.repeat)
                results.append(row)
                print_row(row)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def print_row(row):
    pv, tv = row["proton_viewer"], row["triton_viewer"]
    if "error" in pv:
        viewer = f"proton-viewer failed: {pv['error']}"
    else:
        viewer = (
            f"proton-viewer {pv['wall_s']:.2f} s wall (min {pv['wall_min_s']:.2f}; import "
            f"{pv['import_s']:.2f} s, load {pv['load_s']:.2f} s, derive+render "
            f"{pv['render_s']:.2f} s, {pv['lines']} lines), peak {pv['peak_rss_mb']:.0f} MB"
        )
    triton = (
        tv.get("skipped")
        or tv.get("error")
        or (f"{tv['wall_s']:.2f} s wall, peak {tv['peak_rss_mb']:.0f} MB")
    )
    finalize = "reused" if row["finalize_s"] is None else f"finalize {row['finalize_s']:.2f} s"
    print(
        f"{row['nodes']:>9,} nodes {row['format']:<16} {finalize} "
        f"({row['bytes'] / 1e6:.1f} MB) | {viewer} | Triton viewer: {triton}",
        flush=True,
    )
    html = row.get("html")
    if html:
        if "error" in html:
            print(f"{'':>9}   proton-viewer --html failed: {html['error']}", flush=True)
            return
        load = html.get("load") or (
            f"opens in {html['load_wall_s']:.2f} s wall (drawn at {html['load_ready_s']:.2f} s, "
            f"slowest {html['load_max_s']:.2f} s) in headless Chromium"
        )
        print(
            f"{'':>9}   --html: written in {html['write_s']:.2f} s ({html['wall_s']:.2f} s with "
            f"start-up), {html['bytes'] / 1e6:.1f} MB, "
            f"peak {html['peak_rss_mb']:.0f} MB; {load}",
            flush=True,
        )


if __name__ == "__main__":
    main()
