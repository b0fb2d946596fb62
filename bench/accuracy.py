"""Accuracy on a GPU (docs/benchmarks.md, "Accuracy"), reported; tests/gpu asserts the same things.

    python3 bench/accuracy.py [--iters 3] [--json accuracy.json]
    python3 bench/accuracy.py --intra [--json intra_accuracy.json]

Kernel tracing: one program (overhead.py's workloads: Triton vector adds and torch adds, an
MLP forward and backward, a Triton matmul, cuBLAS's bf16 matmul) runs twice, each in its own
process: under Proton (kernel tracing) and under torch.profiler (CUDA activity). Per kernel
name: the launch counts of both tools (they must be equal), the total GPU time of both and
their relative difference, and the same over all kernels.

Intra-kernel (--intra), issue 12's accuracy points:
- a scope around N dependent multiply-adds, N = 64 ... 1024: normalized cycles, the linear
  fit's R^2 and slope (cycles per operation);
- with optimizations="time_shift", an empty scope's cycles;
- intra_kernel.py's matmul (scopes "load" and "mma" in its pipelined K loop): each warp's
  kernel-scope time (cycles at the SM clock) against the kernel's CUPTI duration;
- one timeline of the same matmul on 1024 x 1024 operands: lanes, SMs, slices (and how many
  lie inside the kernel's CUPTI slice), the file's size.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# One iteration of the program: how often each workload of overhead.py runs in it.
PROGRAM = (("tiny", 200), ("mlp", 3), ("trimm", 3), ("matmul", 2))


# ---- kernel tracing: Proton against torch.profiler ----------------------------------------


def kernels_from_hatchet(root):
    """{kernel name: {"count", "ns"}} summed over a hatchet tree's kernel nodes (those with a
    launch count), wherever they sit in the calling context."""
    out = {}
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.get("children", []))
        metrics = node.get("metrics", {})
        if metrics.get("count", 0) > 0 and "time (ns)" in metrics:
            k = out.setdefault(node["frame"]["name"], {"count": 0, "ns": 0})
            k["count"] += metrics["count"]
            k["ns"] += metrics["time (ns)"]
    return out


def kernels_from_chrome_trace(trace):
    """{kernel name: {"count", "ns"}} from a torch.profiler (Kineto) trace's kernel slices."""
    out = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            k = out.setdefault(e["name"], {"count": 0, "ns": 0})
            k["count"] += 1
            k["ns"] += round(float(e["dur"]) * 1000)
    return out


def compare(ours, theirs):
    """Per kernel name and overall: both tools' counts and times, and ours / theirs - 1."""
    rows = []
    for name in sorted(set(ours) | set(theirs), key=lambda n: -theirs.get(n, {}).get("ns", 0)):
        a, b = ours.get(name, {"count": 0, "ns": 0}), theirs.get(name, {"count": 0, "ns": 0})
        rows.append(
            {
                "name": name,
                "count": a["count"],
                "count_torch": b["count"],
                "ns": a["ns"],
                "ns_torch": b["ns"],
                "rel": a["ns"] / b["ns"] - 1 if b["ns"] else None,
            }
        )
    total, total_torch = sum(r["ns"] for r in rows), sum(r["ns_torch"] for r in rows)
    return {
        "kernels": rows,
        "counts_equal": all(r["count"] == r["count_torch"] for r in rows),
        "ns": total,
        "ns_torch": total_torch,
        "rel": total / total_torch - 1 if total_torch else None,
    }


def _kernel_worker(tool, iters, out_path):
    import torch
    from overhead import build_workloads

    workloads = build_workloads()

    def program():
        for _ in range(iters):
            for name, times in PROGRAM:
                for _ in range(times):
                    workloads[name]()
        torch.cuda.synchronize()

    program()  # warm-up: compiles, cuBLAS's choices, the caching allocator
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "accuracy")
        if tool == "proton":
            import proton

            proton.start(path)
            program()
            proton.finalize()
            with open(path + ".hatchet") as f:
                kernels = kernels_from_hatchet(json.load(f)[0])
        else:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                program()
            prof.export_chrome_trace(path + ".json")
            with open(path + ".json") as f:
                kernels = kernels_from_chrome_trace(json.load(f))
    with open(out_path, "w") as f:
        json.dump(kernels, f)


def _in_process(args):
    """Runs this script with args in a fresh process and returns what it wrote as JSON."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        subprocess.run([sys.executable, __file__, *args, "--out", out], check=True)
        with open(out) as f:
            return json.load(f)
    finally:
        os.unlink(out)


def print_kernels(result, limit=20):
    print(f"{'kernel':60s} {'count':>7s} {'torch':>7s} {'ms':>9s} {'torch ms':>9s} {'diff':>7s}")
    for r in result["kernels"][:limit]:
        rel = f"{r['rel']:+.2%}" if r["rel"] is not None else "n/a"
        print(
            f"{r['name'][:60]:60s} {r['count']:7d} {r['count_torch']:7d} "
            f"{r['ns'] / 1e6:9.3f} {r['ns_torch'] / 1e6:9.3f} {rel:>7s}"
        )
    if len(result["kernels"]) > limit:
        print(f"... {len(result['kernels']) - limit} more kernels")
    print(
        f"all {len(result['kernels'])} kernels: {result['ns'] / 1e6:.3f} ms against "
        f"{result['ns_torch'] / 1e6:.3f} ms ({result['rel']:+.2%}); counts equal: "
        f"{result['counts_equal']}"
    )


# ---- intra-kernel -------------------------------------------------------------------------


def linear_fit(xs, ys):
    """(slope, R^2) of the least-squares line through (xs, ys)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / sxx, (sxy * sxy / (sxx * syy) if syy else 1.0)


def find_node(node, name):
    """The first node named `name` in a hatchet tree, depth first."""
    if node["frame"]["name"] == name:
        return node
    for child in node.get("children", []):
        found = find_node(child, name)
        if found is not None:
            return found
    return None


def _profiled(path, fn, **start):
    """Runs fn once inside an instrumentation session writing `path`.<ext>."""
    import proton
    import torch

    proton.start(path, backend="instrumentation", **start)
    fn()
    torch.cuda.synchronize()
    proton.finalize()


def _linearity(tmp, pl):
    """Cycles of a scope around N dependent multiply-adds, and of an empty scope (time_shift)."""
    import proton
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def dependent_chain(out, N: tl.constexpr):
        acc = tl.program_id(0).to(tl.float32) + 2.0
        pl.enter_scope("chain")
        for _ in tl.static_range(N):  # each step waits for the one before it
            acc = acc * 0.5 + 1.0
        pl.exit_scope("chain")
        pl.enter_scope("empty")
        pl.exit_scope("empty")
        tl.store(out, acc)

    out = torch.empty(1, device="cuda")
    mode = proton.mode.Default(optimizations="time_shift")
    sizes, cycles, empty = [64, 128, 256, 512, 1024], [], []
    for n in sizes:
        path = os.path.join(tmp, f"chain{n}")
        _profiled(path, lambda n=n: dependent_chain[(1,)](out, N=n, num_warps=1), mode=mode)
        with open(path + ".hatchet") as f:
            kernel = find_node(json.load(f)[0], "dependent_chain")
        cycles.append(find_node(kernel, "chain")["metrics"]["normalized_cycles"])
        empty.append(find_node(kernel, "empty")["metrics"]["normalized_cycles"])
    slope, r2 = linear_fit(sizes, cycles)
    return {"sizes": sizes, "cycles": cycles, "slope": slope, "r2": r2, "empty": empty}


def _matmul(matmul_kernel, K):
    """intra_kernel.py's matmul launch on K x K operands."""
    import torch

    a = torch.randn(K, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, K, device="cuda", dtype=torch.float16)
    c = torch.empty(K, K, device="cuda")

    def launch():
        matmul_kernel[(K // 128, K // 128)](
            a, b, c, K=K, BM=128, BN=128, BK=64, num_warps=8, num_stages=3
        )

    launch()  # compiled before the session: the session recompiles it instrumented
    return launch


def _fit(tmp, launch):
    """A warp's kernel-scope time against the kernel's CUPTI duration."""
    path = os.path.join(tmp, "fit")
    _profiled(path, launch)
    with open(path + ".hatchet") as f:
        root, devices = json.load(f)
    kernel = find_node(root, "matmul")
    khz = devices["CUDA"]["0"]["clock_rate"]
    return {
        "per_warp_ns": kernel["metrics"]["normalized_cycles"] / (khz / 1e6),
        "kernel_ns": kernel["metrics"]["time (ns)"],
        "scopes": {
            s: find_node(kernel, s)["metrics"]["normalized_cycles"] for s in ("load", "mma")
        },
    }


def _timeline(tmp, launch):
    """What one launch's timeline holds: lanes, slices, SMs, whether the kernel's slice
    contains its warps' slices, and the file's size."""
    path = os.path.join(tmp, "timeline")
    _profiled(path, launch, data="trace")
    with open(path + ".chrome_trace") as f:
        events = json.load(f)["traceEvents"]
    warp = [e for e in events if str(e.get("tid", "")).startswith("warp ")]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    k = kernels[0]
    inside = sum(1 for e in warp if k["ts"] <= e["ts"] and e["ts"] + e["dur"] <= k["ts"] + k["dur"])
    # How far the farthest warp slice reaches past either end of the kernel's slice (us).
    outside = max(
        [0.0]
        + [k["ts"] - e["ts"] for e in warp]
        + [e["ts"] + e["dur"] - k["ts"] - k["dur"] for e in warp]
    )
    return {
        "bytes": os.path.getsize(path + ".chrome_trace"),
        "events": len(events),
        "warp_slices": len(warp),
        "lanes": len({(e["pid"], e["tid"]) for e in warp}),
        "sms": len({e["args"]["sm"] for e in warp}),
        "kernel_slices": len(kernels),
        "inside_kernel": inside,
        "max_outside_us": outside,
        "kernel_us": k["dur"],
    }


def _intra_worker(out_path):
    import proton.language as pl
    from intra_kernel import define_kernels

    matmul_kernel = define_kernels(pl)["matmul"]  # scopes "load" and "mma" in its K loop
    tmp = tempfile.mkdtemp()
    result = {
        "linearity": _linearity(tmp, pl),
        "fit": _fit(tmp, _matmul(matmul_kernel, 4096)),
        "timeline": _timeline(tmp, _matmul(matmul_kernel, 1024)),
    }
    with open(out_path, "w") as f:
        json.dump(result, f)


def print_intra(r):
    lin = r["linearity"]
    print("scope around N dependent multiply-adds (normalized cycles):")
    for n, c in zip(lin["sizes"], lin["cycles"]):
        print(f"  N={n:5d}: {c:10.1f}")
    print(f"  linear fit: {lin['slope']:.2f} cycles per operation, R^2 = {lin['r2']:.6f}")
    print(f"empty scope with time_shift: {lin['empty']} cycles")
    fit = r["fit"]
    print(
        f"matmul: a warp's kernel scope {fit['per_warp_ns'] / 1e3:.2f} us at the SM "
        f"clock, the kernel {fit['kernel_ns'] / 1e3:.2f} us by CUPTI "
        f"({fit['per_warp_ns'] / fit['kernel_ns']:.1%}); scopes per warp: "
        + ", ".join(f"{k} {v:.0f} cycles" for k, v in fit["scopes"].items())
    )
    t = r["timeline"]
    print(
        f"timeline of a 1024^3 matmul: {t['lanes']} warp lanes on {t['sms']} SMs, "
        f"{t['warp_slices']} warp slices ({t['inside_kernel']} inside the kernel's "
        f"{t['kernel_us']:.1f} us slice, the farthest {t['max_outside_us'] * 1e3:.0f} ns out), "
        f"{t['kernel_slices']} kernel slice(s), {t['events']} events, {t['bytes']} bytes"
    )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--iters", type=int, default=3, help="iterations of the program")
    ap.add_argument("--intra", action="store_true", help="intra-kernel accuracy instead")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--worker", choices=["proton", "torch", "intra"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "intra":
        return _intra_worker(args.out)
    if args.worker:
        return _kernel_worker(args.worker, args.iters, args.out)
    if args.intra:
        result = _in_process(["--worker", "intra"])
        print_intra(result)
    else:
        iters = ["--iters", str(args.iters)]
        ours = _in_process(["--worker", "proton", *iters])
        theirs = _in_process(["--worker", "torch", *iters])
        result = compare(ours, theirs)
        print_kernels(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
