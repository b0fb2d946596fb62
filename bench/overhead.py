"""Profiling overhead on a GPU, side by side with Triton's profiler and torch.profiler.

Protocol (docs/benchmarks.md, "Overhead"): each configuration runs in its own process; inside it,
each timing is the fastest of 5 repetitions (10 when profiled); `scoped` runs the tool's own
scopes in both the unprofiled (profiler not started) and the profiled run;
each workload is warmed up and timed unprofiled, then profiled (after a second warm-up), then
unprofiled again; ratio = profiled / min(unprofiled before, after). Each workload
repeats this in --cycles short cycles in its process (unprofiled, profiled, unprofiled,
profiled, ...; the machine's speed drifts by up to 20% over seconds), each profiled phase
compared with the unprofiled phases on either side; the process's ratio is the median over its
cycles. Rounds interleave the
configurations (A B C A B C ...); the table reports the median ratio, the spread and a 95%
bootstrap confidence interval of the median (over rounds). GPU-bound workloads (matmul, trimm)
are also timed with CUDA events around the timed loop, next to wall time (`ev_median`).

    python3 bench/overhead.py --rounds 3 --json overhead.json
    # add rounds (matmul only) until every config's interval is within +-1% of its median:
    python3 bench/overhead.py --rounds 5 --target-ci 0.01 --max-rounds 60
    # the same configurations on each CUPTI major, side by side:
    python3 bench/overhead.py --configs cupti_floor,proton_shadow --workloads matmul \
        --cupti-lib 12=$(python3 -c "import triton,os;print(os.path.dirname(triton.__file__))")/backends/nvidia/lib/cupti \
        --cupti-lib 13=/usr/local/cuda/lib64/libcupti.so.13
    python3 bench/overhead.py --pcsampling --rounds 3   # instruction sampling vs triton.profiler
    python3 bench/overhead.py --training --rounds 3     # training loops, contexts vs torch.profiler

Training loops (`--training`, issue 41): `train_mlp`, an eager MLP training step (8 x (Linear
1024->1024 + GELU), batch 64, forward, backward, SGD), and `train_transformer`, a
torch.compile'd nn.TransformerEncoder (6 layers, d_model 512, bf16, batch 16 x 256) trained
with fused AdamW (tests/gpu/torch_models.py), under context="python", "torch",
"python,torch" and "python,native", next to torch.profiler with CPU and CUDA activity and
with_stack=True, with_modules=True (`torch_profiler_stack`) and CUDA activity alone, and
`torch_floor`: kernel tracing plus PyTorch's RecordFunction and the module-call events (module
hooks before CPython 3.12) calling functions that return at once (what context="torch" costs
before Proton handles a frame). Each process also profiles 1000 steps in one session and
reports the profile's size (`bytes_1000`; torch.profiler's is measured on 100 steps and
scaled, its traces of 1000 steps take minutes to write).

Instruction sampling (`--pcsampling`): Proton's mode="pcsampling" (interval --pc-interval
GPU cycles) and triton.profiler's backend="cupti", mode="pcsampling", each with kernel timing,
next to Proton's plain kernel timing, on `matmul` (cuBLAS) and `trimm`, a Triton matmul.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = ["tiny", "mlp", "matmul", "scoped", "hooked"]  # default; "trimm" on request
CONFIGS = ["cupti_floor", "proton_shadow", "proton_python", "triton_profiler", "torch_profiler"]
PC_WORKLOADS = ["matmul", "trimm"]
PC_CONFIGS = ["proton_shadow", "proton_pcsampling", "triton_pcsampling"]
TRAINING_WORKLOADS = ["train_mlp", "train_transformer"]
TRAINING_CONFIGS = [
    "torch_floor",
    "proton_python",
    "proton_torch",
    "proton_python_torch",
    "proton_python_native",
    "torch_profiler",
    "torch_profiler_stack",
]
# Proton configurations by their context.
CONTEXTS = {
    "proton_shadow": "shadow",
    "proton_pcsampling": "shadow",
    "proton_python": "python",
    "proton_torch": "torch",
    "proton_python_torch": "python,torch",
    "proton_python_native": "python,native",
    "proton_torch_native": "torch,native",
}
SIZE_STEPS = 1000  # training steps of the profile whose size is reported
ITERS = {"tiny": 1000, "mlp": 10, "matmul": 20, "scoped": 1000, "hooked": 1000, "trimm": 20}
ITERS.update({"train_mlp": 20, "train_transformer": 10})
GPU_BOUND = ("matmul", "trimm")  # also timed with CUDA events


# ---- statistics ----------------------------------------------------------------------------


def bootstrap_ci(values, level=0.95, resamples=10000, seed=0):
    """Percentile bootstrap interval (lo, hi) of the median of `values` (resampled with
    replacement); (v, v) for a single value. Deterministic for a given seed."""
    if not values:
        raise ValueError("no values")
    if len(values) == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(resamples))
    tail = (1 - level) / 2
    lo = medians[int(tail * (resamples - 1))]
    hi = medians[int((1 - tail) * (resamples - 1) + 0.5)]
    return lo, hi


def relative_half_width(values, **kw):
    """Half the bootstrap interval's width, relative to the median: 0.01 is +-1%."""
    lo, hi = bootstrap_ci(values, **kw)
    return (hi - lo) / 2 / statistics.median(values)


def summarize(values):
    """median, min, max and the 95% interval of the median; None when there are no values."""
    if not values:
        return None
    lo, hi = bootstrap_ci(values)
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "ci_lo": lo,
        "ci_hi": hi,
        "ci_rel": relative_half_width(values),
        "n": len(values),
    }


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


# Timed runs per unprofiled phase (the profiled phase gets twice as many). A run takes tens of
# milliseconds; each process measures CYCLES cycles of such phases (a GPU-bound workload
# after the GPU's clock settled).
REPS = 5
CYCLES = int(os.environ.get("PROTON_BENCH_CYCLES", "8"))


def cycle_ratios(profiled, unprofiled):
    """Ratio of each profiled phase k to the faster of the unprofiled phases around it
    (unprofiled[k] before it, unprofiled[k + 1] after it)."""
    if len(unprofiled) != len(profiled) + 1:
        raise ValueError("one more unprofiled phase than profiled phases expected")
    return [p / min(unprofiled[k], unprofiled[k + 1]) for k, p in enumerate(profiled)]


def timed(fn, iters, scope=None, reps=5, events=False):
    """The fastest of reps runs of iters iterations: the least disturbed by the machine.
    (wall seconds, CUDA-event seconds or None): the event time is the GPU's time from the
    first kernel to the last, taken on the run with the least wall time."""
    return min(timed_once(fn, iters, scope, events) for _ in range(reps))


def timed_once(fn, iters, scope=None, events=False):
    import torch

    torch.cuda.synchronize()
    if events:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    if events:
        begin.record()
    if scope is None:
        for _ in range(iters):
            fn()
    else:
        for _ in range(iters):
            with scope("outer"), scope("middle"), scope("inner"):
                fn()
    if events:
        end.record()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    return wall, (begin.elapsed_time(end) / 1e3 if events else None)


def settle(fn, iters, min_s=5.0, max_s=30.0, tolerance=0.01):
    """Warm-up of a GPU-bound workload: the GPU's clock falls as it reaches its power and
    thermal limits, so a short warm-up leaves the unprofiled phase before the profiler faster
    than the phases after it. Runs the workload for at least min_s, then until three
    consecutive timings agree within tolerance (at most max_s)."""
    t0 = time.perf_counter()
    recent = []
    while time.perf_counter() - t0 < max_s:
        recent = (recent + [timed_once(fn, iters)[0]])[-3:]
        if time.perf_counter() - t0 >= min_s and len(recent) == 3:
            if max(recent) <= min(recent) * (1 + tolerance):
                return


def loaded_cupti():
    """The libcupti files mapped into this process (which CUPTI the tool used)."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if "libcupti.so" in line})
    except OSError:
        return []


_NOOP_TABLE_SOURCE = """
#include <stdint.h>
void proton_bench_enter_op(const char *n, int k, int64_t s, uint64_t t, uint64_t f) {
  (void)n; (void)k; (void)s; (void)t; (void)f;
}
void proton_bench_exit_op(void) {}
"""


def torch_floor_profiler(path, backend="cupti"):
    """What context="torch" costs before Proton does anything with a frame: kernel tracing
    (context="shadow"), PyTorch's RecordFunction calling Proton's operator observer, whose
    table points at functions that return at once, and the module-call events (or, before
    CPython 3.12, global module hooks) calling functions that return at once. proton_torch
    minus this is the cost of Proton's own framework frames. backend=None: the default backend
    (CPU scopes only on a machine without a GPU)."""
    import ctypes

    import proton
    import torch
    import torch.nn.modules.module as modules
    from proton.frameworks import pytorch as adapter

    build = tempfile.mkdtemp(prefix="proton_floor_")
    source = os.path.join(build, "noop.c")
    with open(source, "w") as f:
        f.write(_NOOP_TABLE_SOURCE)
    lib_path = os.path.join(build, "noop.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", source, "-o", lib_path], check=True)
    noop = ctypes.CDLL(lib_path)

    class Table(ctypes.Structure):
        _fields_ = [
            ("version", ctypes.c_uint32),
            ("size", ctypes.c_uint32),
            ("enter_op", ctypes.c_void_p),
            ("exit_op", ctypes.c_void_p),
        ]

    table = Table(
        1,
        ctypes.sizeof(Table),
        ctypes.cast(noop.proton_bench_enter_op, ctypes.c_void_p).value,
        ctypes.cast(noop.proton_bench_exit_op, ctypes.c_void_p).value,
    )
    observer = ctypes.CDLL(adapter._observer_library(torch))
    observer.proton_torch_observer_install.argtypes = [ctypes.c_void_p]
    handles = []
    events = adapter._ModuleEvents(noop=True)  # the route context="torch" takes

    def start():
        proton.start(path, context="shadow", backend=backend)
        if observer.proton_torch_observer_install(ctypes.addressof(table)) != 0:
            raise RuntimeError("the observer refused the no-op table")
        if events.start(modules):
            return
        handles.append(modules.register_module_forward_pre_hook(lambda m, a: None))
        handles.append(modules.register_module_forward_hook(lambda m, a, o: None, always_call=True))

    def stop():
        observer.proton_torch_observer_remove()
        events.stop()
        for h in handles:
            h.remove()
        handles.clear()
        proton.finalize()

    stop.keep = (noop, table)  # alive while the observer may call through the table
    return start, stop, proton.scope


def make_profiler(config, workload, path):
    """(start, stop) callables for the configuration, or None when it cannot run."""
    hook = "triton" if workload == "hooked" else None
    if config == "cupti_floor":
        # CUPTI kernel tracing alone: Proton's backend without its launch callbacks.
        os.environ["PROTON_CUPTI_NO_LAUNCH_CALLBACKS"] = "1"
        config = "proton_shadow"
    elif config == "cupti_empty_callbacks":
        # The floor plus CUPTI calling launch callbacks that return at once.
        os.environ["PROTON_CUPTI_LAUNCH_CALLBACKS"] = "empty"
        config = "proton_shadow"
    if config == "torch_floor":
        return torch_floor_profiler(path)
    if config in CONTEXTS:
        import proton

        context = CONTEXTS[config]
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
    if config == "torch_profiler_stack":
        import torch

        holder = {}
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]

        def start():
            holder["p"] = torch.profiler.profile(
                activities=activities, with_stack=True, with_modules=True
            )
            holder["p"].__enter__()

        def stop():
            holder["p"].__exit__(None, None, None)
            holder["p"].export_chrome_trace(path + ".json")

        return start, stop, torch.profiler.record_function
    raise ValueError(config)


def build_training_workloads(names):
    """train_mlp and train_transformer (tests/gpu/torch_models.py), those asked for only."""
    sys.path.insert(
        0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu")
    )
    from torch_models import make_compiled_transformer, make_mlp

    makers = {"train_mlp": make_mlp, "train_transformer": make_compiled_transformer}
    return {name: makers[name]() for name in names if name in makers}


def profile_size(config, name, fn, path):
    """Bytes of one profile of SIZE_STEPS training steps (torch.profiler: of 100, scaled)."""
    import torch

    steps = SIZE_STEPS if config in CONTEXTS else 100
    start, stop, _ = make_profiler(config, name, path)
    start()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    stop()
    folder, stem = os.path.split(path)
    size = sum(
        os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith(stem)
    )
    return size * SIZE_STEPS // steps


def worker(config, names):
    import torch

    workloads = build_workloads()
    workloads.update(build_training_workloads(names))
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
        ev = name in GPU_BOUND
        # Every workload repeats the protocol in short cycles (unprofiled, profiled,
        # unprofiled, profiled, ...): the machine's speed drifts by 20% over seconds, and a
        # GPU-bound one's clock with its temperature, so each profiled phase is compared with
        # the unprofiled phases right before and after it.
        if ev:
            settle(fn, iters)
        else:
            timed(fn, iters // 4 + 1, use_scope, reps=1)
        unprofiled = [timed(fn, iters, use_scope, reps=REPS, events=ev)]
        profiled, finalize_times = [], []
        error = None
        for _ in range(CYCLES):
            try:
                start()
            except Exception as e:  # noqa: BLE001 - reported in the table
                error = f"{type(e).__name__}: {str(e)[:200]}"
                break
            timed(fn, iters // 4 + 1, use_scope, reps=1)
            # As many timed runs as the two unprofiled phases together: a minimum over more
            # runs is lower by chance alone, which would bias the ratio upward by about 1% at
            # matmul.
            profiled.append(timed(fn, iters, use_scope, reps=2 * REPS, events=ev))
            cupti = loaded_cupti()
            t0 = time.perf_counter()
            stop()
            finalize_times.append(time.perf_counter() - t0)
            unprofiled.append(timed(fn, iters, use_scope, reps=REPS, events=ev))
        if not profiled:
            results[name] = {"error": error}
            continue

        def ratios(i):
            return cycle_ratios([p[i] for p in profiled], [u[i] for u in unprofiled])

        size = sum(
            os.path.getsize(os.path.join(tmp, f))
            for f in os.listdir(tmp)
            if f.startswith(f"{config}_{name}")
        )
        before, after = unprofiled[0][0], unprofiled[-1][0]
        results[name] = {
            "ratio": statistics.median(ratios(0)),
            "cycle_ratios": ratios(0),
            "unprofiled_s": min(x[0] for x in unprofiled),
            "before_s": before,
            "after_s": after,
            "profiled_s": statistics.median(p[0] for p in profiled),
            "finalize_s": statistics.median(finalize_times),
            "profile_bytes": size,
            "cupti": cupti,
        }
        if name in TRAINING_WORKLOADS:
            try:
                results[name]["bytes_1000"] = profile_size(
                    config, name, fn, os.path.join(tmp, f"size_{config}_{name}")
                )
            except Exception as e:  # noqa: BLE001 - reported, the ratio stands
                results[name]["bytes_1000_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if ev:
            results[name]["ev_ratio"] = statistics.median(ratios(1))
            results[name]["ev_unprofiled_s"] = min(x[1] for x in unprofiled)
            results[name]["ev_profiled_s"] = statistics.median(p[1] for p in profiled)
    print("RESULT " + json.dumps(results))


# ---- driver --------------------------------------------------------------------------------


def split_config(config, cupti_libs):
    """ "proton_shadow[12]" -> ("proton_shadow", environment with PROTON_CUPTI_LIB_PATH set to
    the --cupti-lib labelled 12); a name without a label runs with this environment."""
    env = dict(os.environ)
    if config.endswith("]") and "[" in config:
        config, label = config[:-1].split("[", 1)
        env["PROTON_CUPTI_LIB_PATH"] = cupti_libs[label]
    return config, env


def run_config(config, names, cupti_libs=None):
    base, env = split_config(config, cupti_libs or {})
    r = subprocess.run(
        [sys.executable, __file__, "--worker", base, "--workloads", ",".join(names)],
        capture_output=True,
        text=True,
        timeout=1800 if set(names) & set(TRAINING_WORKLOADS) else 600,
        check=False,
        env=env,
    )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (r.stderr or r.stdout)[-400:]
    return {w: {"error": f"worker failed (exit {r.returncode}): {tail}"} for w in names}


def build_table(rounds, configs, names):
    table = {}
    for config in configs:
        for w in names:
            runs = [x["results"].get(w, {}) for x in rounds if x["config"] == config]
            ok = [x for x in runs if "ratio" in x]
            errors = [x["error"] for x in runs if "error" in x]
            table[f"{config}/{w}"] = {
                "wall": summarize([x["ratio"] for x in ok]),
                "events": summarize([x["ev_ratio"] for x in ok if "ev_ratio" in x]),
                "finalize_s": statistics.median([x["finalize_s"] for x in ok]) if ok else None,
                "profile_bytes": max([x["profile_bytes"] for x in ok]) if ok else None,
                "bytes_1000": max([x["bytes_1000"] for x in ok if "bytes_1000" in x], default=None),
                "cupti": sorted({p for x in ok for p in x.get("cupti", [])}),
                "error": errors[0] if errors and not ok else None,
            }
    return table


def widest_interval(table, names):
    """The largest relative half-width among the named workloads' wall and event intervals."""
    widths = [
        v[kind]["ci_rel"]
        for key, v in table.items()
        if key.split("/")[1] in names
        for kind in ("wall", "events")
        if v[kind] is not None
    ]
    return max(widths) if widths else None


def print_table(table):
    print(
        f"{'config/workload':34} {'median':>7} {'95% CI':>15} {'+-%':>6} {'min':>7} {'max':>7} "
        f"{'n':>3} {'ev_median':>9} {'ev 95% CI':>15} {'finalize':>9} {'bytes':>9}"
    )
    for key, v in table.items():
        w, e = v["wall"], v["events"]
        if w is None:
            print(f"{key:34} n/a: {(v.get('error') or 'not run (--stop-after)')[:150]}")
            continue
        line = (
            f"{key:34} {w['median']:7.3f} [{w['ci_lo']:6.3f},{w['ci_hi']:6.3f}] "
            f"{100 * w['ci_rel']:6.2f} {w['min']:7.3f} {w['max']:7.3f} {w['n']:3d} "
        )
        line += f"{e['median']:9.3f} [{e['ci_lo']:6.3f},{e['ci_hi']:6.3f}] " if e else f"{'':26}"
        line += f"{v['finalize_s']:8.3f}s {v['profile_bytes']:9d}"
        print(line)
    for key, v in table.items():
        if v.get("bytes_1000") is not None:
            print(f"  {key}: profile of {SIZE_STEPS} steps: {v['bytes_1000'] / 1e6:.2f} MB")
    for key, v in table.items():
        if v["cupti"]:
            print(f"  {key}: CUPTI {', '.join(v['cupti'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=None, help="comma-separated; default: all (see CONFIGS)")
    ap.add_argument("--workloads", default=None, help="comma-separated; default: all")
    ap.add_argument("--pcsampling", action="store_true", help="instruction sampling comparison")
    ap.add_argument("--training", action="store_true", help="training loops under each context")
    ap.add_argument("--pc-interval", type=int, default=1000, help="Proton's sampling interval")
    ap.add_argument("--json", default="overhead.json")
    ap.add_argument(
        "--target-ci",
        type=float,
        default=None,
        help="after --rounds, add rounds of the --ci-workloads until every 95%% interval of\n"
        "their median ratios is within +-target (0.01 = 1%%), or --max-rounds",
    )
    ap.add_argument("--ci-workloads", default="matmul", help="comma-separated (--target-ci)")
    ap.add_argument("--max-rounds", type=int, default=40, help="round limit for --target-ci")
    ap.add_argument(
        "--cupti-lib",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also run each Proton config as CONFIG[LABEL] with PROTON_CUPTI_LIB_PATH=PATH",
    )
    ap.add_argument(
        "--cycles",
        type=int,
        default=CYCLES,
        help="unprofiled/profiled cycles per process and workload",
    )
    ap.add_argument("--resume", metavar="JSON", help="continue the rounds of an earlier --json")
    ap.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="MINUTES",
        help="start no new process after this long (the table covers what finished)",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ["PROTON_BENCH_PC_INTERVAL"] = str(args.pc_interval)
    os.environ["PROTON_BENCH_CYCLES"] = str(args.cycles)
    default_configs, default_workloads = (
        (PC_CONFIGS, PC_WORKLOADS)
        if args.pcsampling
        else (TRAINING_CONFIGS, TRAINING_WORKLOADS)
        if args.training
        else (CONFIGS, WORKLOADS)
    )
    names = args.workloads.split(",") if args.workloads else default_workloads
    if args.worker:
        worker(args.worker, names)
        return
    configs = args.configs.split(",") if args.configs else default_configs
    cupti_libs = dict(x.split("=", 1) for x in args.cupti_lib)
    if cupti_libs:
        configs = [
            f"{c}[{label}]" if c.startswith(("proton", "cupti_")) else c
            for c in configs
            for label in (cupti_libs if c.startswith(("proton", "cupti_")) else [None])
        ]
    # --resume: the rounds of an earlier run (same configs) count as this run's first ones, so
    # that a run longer than one sitting can be taken in parts.
    rounds = load_rounds(args.resume) if args.resume else []
    first = 1 + max((x["round"] for x in rounds), default=-1)
    deadline = time.monotonic() + 60 * args.stop_after if args.stop_after else None

    def run_round(r, label, workloads):
        """One process per config; False when --stop-after cut the round short."""
        for config in configs:
            if deadline is not None and time.monotonic() > deadline:
                print(f"--stop-after: stopped before {label}: {config}", file=sys.stderr)
                return False
            print(f"{label}: {config}", file=sys.stderr, flush=True)
            rounds.append(
                {"round": r, "config": config, "results": run_config(config, workloads, cupti_libs)}
            )
            save(args.json, rounds, None)  # a run cut short keeps the rounds it finished
        return True

    in_time = True
    for r in range(first, first + args.rounds):
        in_time = run_round(r, f"round {r + 1}/{first + args.rounds}", names)
        if not in_time:
            break
    table = build_table(rounds, configs, names)
    ci_names = [w for w in args.ci_workloads.split(",") if w in names]
    reached = None
    if args.target_ci is not None and ci_names:
        r = first + args.rounds
        while (
            in_time
            and (widest_interval(table, ci_names) or 0) > args.target_ci
            and r < args.max_rounds
        ):
            in_time = run_round(r, f"round {r + 1} ({','.join(ci_names)})", ci_names)
            r += 1
            table = build_table(rounds, configs, names)
        width = widest_interval(table, ci_names)
        reached = width is not None and width <= args.target_ci
        print(
            f"{'reached' if reached else 'NOT reached'}: widest 95% interval on "
            f"{','.join(ci_names)} is +-{100 * (width or 0):.2f}% after {r} rounds "
            f"(target +-{100 * args.target_ci:.2f}%)"
        )
    print_table(table)
    save(args.json, rounds, table, reached)


def load_rounds(path):
    with open(path) as f:
        return json.load(f)["rounds"]


def save(path, rounds, table, reached=None):
    with open(path, "w") as f:
        json.dump({"rounds": rounds, "table": table, "ci_target_reached": reached}, f, indent=1)


if __name__ == "__main__":
    main()
