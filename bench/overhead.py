"""Profiling overhead on a GPU, side by side with Triton's profiler and torch.profiler.

Protocol (../shared/BENCHMARKS.md): each configuration runs in its own process; inside it,
each timing is the fastest of 5 repetitions; `scoped` runs the tool's own scopes in both
the unprofiled (profiler not started) and the profiled run;
each workload is warmed up and timed unprofiled, then profiled (after a second warm-up), then
unprofiled again; ratio = profiled / min(unprofiled before, after). Rounds interleave the
configurations (A B C A B C ...); the table reports the median ratio and the spread.

    python3 bench/overhead.py --rounds 3 --json overhead.json
    python3 bench/overhead.py --pcsampling --rounds 3   # instruction sampling vs triton.profiler

Instruction sampling (`--pcsampling`): Proton's mode="pcsampling" (interval --pc-interval
GPU cycles) and triton.profiler's backend="cupti", mode="pcsampling", each with kernel timing,
next to Proton's plain kernel timing, on `matmul` (cuBLAS) and `trimm`, a Triton matmul.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = ["tiny", "mlp", "matmul", "scoped", "hooked"]  # default; "trimm" on request
CONFIGS = ["cupti_floor", "proton_shadow", "proton_python", "triton_profiler", "torch_profiler"]
PC_WORKLOADS = ["matmul", "trimm"]
PC_CONFIGS = ["proton_shadow", "proton_pcsampling", "triton_pcsampling"]
ITERS = {"tiny": 1000, "mlp": 50, "matmul": 20, "scoped": 1000, "hooked": 1000, "trimm": 20}


# ---- worker: one configuration, every workload ------------------------------------------


def build_workloads():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

    def metadata(grid, kernel, args):
        n = args["n"]
        return {"name": f"vadd_{n}", "flops32": n, "bytes": 12 * n}

    vadd_meta_kernel = triton.jit(launch_metadata=metadata)(vadd_kernel.fn)

    a, b, c = (torch.randn(4096, device="cuda") for _ in range(3))

    def tiny():
        vadd_kernel[(4,)](a, b, c, 4096, BLOCK=1024)
        torch.add(a, b, out=c)

    def hooked():
        vadd_meta_kernel[(4,)](a, b, c, 4096, BLOCK=1024)
        torch.add(a, b, out=c)

    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    inp = torch.randn(64, 1024, device="cuda")

    def mlp():
        model(inp).sum().backward()

    m = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def matmul():
        m @ m

    @triton.jit
    def trimm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
            y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))

    t = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    tout = torch.empty_like(t)

    def trimm():
        grid = (4096 // 128, 4096 // 128)
        trimm_kernel[grid](t, t, tout, 4096, 4096, 4096, BM=128, BN=128, BK=64, num_warps=8)

    return {"tiny": tiny, "mlp": mlp, "matmul": matmul, "hooked": hooked, "trimm": trimm}


def timed(fn, iters, scope=None, reps=5):
    """The fastest of reps runs of iters iterations: the least disturbed by the machine."""
    return min(timed_once(fn, iters, scope) for _ in range(reps))


def timed_once(fn, iters, scope=None):
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if scope is None:
        for _ in range(iters):
            fn()
    else:
        for _ in range(iters):
            with scope("outer"), scope("middle"), scope("inner"):
                fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def make_profiler(config, workload, path):
    """(start, stop) callables for the configuration, or None when it cannot run."""
    hook = "triton" if workload == "hooked" else None
    if config == "cupti_floor":
        # CUPTI kernel tracing alone: Proton's backend without its launch callbacks.
        os.environ["PROTON_CUPTI_NO_LAUNCH_CALLBACKS"] = "1"
        config = "proton_shadow"
    if config in ("proton_shadow", "proton_python", "proton_pcsampling"):
        import proton

        context = "python" if config == "proton_python" else "shadow"
        mode = None
        if config == "proton_pcsampling":
            interval = int(os.environ.get("PROTON_BENCH_PC_INTERVAL", "1000"))
            mode = proton.mode.PCSampling(interval=interval)

        def start():
            proton.start(path, context=context, hook=hook, backend="cupti", mode=mode)

        return start, proton.finalize, proton.scope
    if config == "triton_pcsampling":
        import triton.profiler as tp

        def start():
            tp.start(path, backend="cupti", mode="pcsampling")

        return start, tp.finalize, tp.scope
    if config == "triton_profiler":
        import triton.profiler as tp

        def start():
            tp.start(path, hook=hook, backend="cupti")

        return start, tp.finalize, tp.scope
    if config == "torch_profiler":
        import torch

        holder = {}

        def start():
            holder["p"] = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            holder["p"].__enter__()

        def stop():
            holder["p"].__exit__(None, None, None)
            holder["p"].export_chrome_trace(path + ".json")

        return start, stop, torch.profiler.record_function
    raise ValueError(config)


def worker(config, names):
    import torch

    workloads = build_workloads()
    # Every kernel loaded before the first profiler starts: with CUPTI 13 on an H100, a module
    # first loaded after one PC sampling session ended gets no PCs in the next one.
    for name in names:
        workloads["tiny" if name == "scoped" else name]()
    torch.cuda.synchronize()
    results = {}
    tmp = tempfile.mkdtemp(prefix="proton_bench_")
    for name in names:
        fn = workloads["tiny" if name == "scoped" else name]
        iters = ITERS[name]
        path = os.path.join(tmp, f"{config}_{name}")
        try:
            start, stop, scope = make_profiler(config, name, path)
        except Exception as e:  # noqa: BLE001 - the tool is not installed
            results[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        use_scope = scope if name == "scoped" else None
        timed(fn, iters // 4 + 1, use_scope, reps=1)
        before = timed(fn, iters, use_scope)
        try:
            start()
        except Exception as e:  # noqa: BLE001 - reported in the table
            results[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        timed(fn, iters // 4 + 1, use_scope, reps=1)
        profiled = timed(fn, iters, use_scope)
        t0 = time.perf_counter()
        stop()
        finalize_s = time.perf_counter() - t0
        after = timed(fn, iters, use_scope)
        size = sum(
            os.path.getsize(os.path.join(tmp, f))
            for f in os.listdir(tmp)
            if f.startswith(f"{config}_{name}")
        )
        results[name] = {
            "ratio": profiled / min(before, after),
            "unprofiled_s": min(before, after),
            "profiled_s": profiled,
            "finalize_s": finalize_s,
            "profile_bytes": size,
        }
    print("RESULT " + json.dumps(results))


# ---- driver --------------------------------------------------------------------------------


def run_config(config, names):
    r = subprocess.run(
        [sys.executable, __file__, "--worker", config, "--workloads", ",".join(names)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (r.stderr or r.stdout)[-400:]
    return {w: {"error": f"worker failed (exit {r.returncode}): {tail}"} for w in names}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=None, help="comma-separated; default: all (see CONFIGS)")
    ap.add_argument("--workloads", default=None, help="comma-separated; default: all")
    ap.add_argument("--pcsampling", action="store_true", help="instruction sampling comparison")
    ap.add_argument("--pc-interval", type=int, default=1000, help="Proton's sampling interval")
    ap.add_argument("--json", default="overhead.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ["PROTON_BENCH_PC_INTERVAL"] = str(args.pc_interval)
    default_configs, default_workloads = (
        (PC_CONFIGS, PC_WORKLOADS) if args.pcsampling else (CONFIGS, WORKLOADS)
    )
    names = args.workloads.split(",") if args.workloads else default_workloads
    if args.worker:
        worker(args.worker, names)
        return
    configs = args.configs.split(",") if args.configs else default_configs
    rounds = []
    for r in range(args.rounds):
        for config in configs:
            print(f"round {r + 1}/{args.rounds}: {config}", file=sys.stderr, flush=True)
            rounds.append({"round": r, "config": config, "results": run_config(config, names)})
    table = {}
    for config in configs:
        for w in names:
            runs = [x["results"].get(w, {}) for x in rounds if x["config"] == config]
            ratios = [x["ratio"] for x in runs if "ratio" in x]
            errors = [x["error"] for x in runs if "error" in x]
            table[f"{config}/{w}"] = {
                "median": statistics.median(ratios) if ratios else None,
                "min": min(ratios) if ratios else None,
                "max": max(ratios) if ratios else None,
                "finalize_s": statistics.median([x["finalize_s"] for x in runs if "ratio" in x])
                if ratios
                else None,
                "profile_bytes": max([x["profile_bytes"] for x in runs if "ratio" in x])
                if ratios
                else None,
                "error": errors[0] if errors and not ratios else None,
            }
    print(
        f"{'config/workload':32} {'median':>7} {'min':>7} {'max':>7} {'finalize':>9} {'bytes':>9}"
    )
    for key, v in table.items():
        if v["median"] is None:
            print(f"{key:32} n/a: {v['error'][:150]}")
        else:
            print(
                f"{key:32} {v['median']:7.3f} {v['min']:7.3f} {v['max']:7.3f} "
                f"{v['finalize_s']:8.3f}s {v['profile_bytes']:9d}"
            )
    with open(args.json, "w") as f:
        json.dump({"rounds": rounds, "table": table}, f, indent=1)


if __name__ == "__main__":
    main()
