"""Intra-kernel instrumentation cost (docs/benchmarks.md, "Intra-kernel instrumentation").

    python3 bench/intra_kernel.py [--rounds 3] [--kernels vadd,softmax] [--json out.json]

Per kernel (vector add, softmax, a matmul with scopes in its K loop, an attention-like
kernel over one head, and the same over 32 heads, `attention_mh`), in one process per
configuration:
- kernel cost: CUDA events around N launches, uninstrumented (no session) before and after,
  instrumented in between; ratio = instrumented / min(before, after);
- end-to-end cost: wall time of 1000 launches (50 for the matmul) plus one synchronise, same
  protocol.
Configurations: `proton` (backend="instrumentation", tree: a CTA's warps leave their sums in
shared memory and one record per CTA is stored), `proton_clock32` (the same with 32-bit
clock deltas, optimizations="clock32"), `proton_global` (tree with
buffer_type="global": one record per warp), `proton_trace` (data="trace"),
`cupti` (Proton's kernel tracing alone, the floor the instrumentation sits on) and
`triton` (Triton's own instrumentation after enable_semantic("triton"), when it runs).
Prints a table with the median over rounds and the geometric mean over the first four
kernels (the set of docs/benchmarks.md), with the 95% bootstrap interval of the median of the
rounds' geometric means (docs/benchmarks.md, "Resolving 1%"); the JSON has each kernel's too.
"""

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

from overhead import bootstrap_ci

KERNELS = ("vadd", "softmax", "matmul", "attention", "attention_mh")
SET = KERNELS[:4]  # the geometric mean is over these; attention_mh: the same kernel, 32 heads
CONFIGS = ("proton", "proton_clock32", "proton_global", "proton_trace", "cupti", "triton")


def define_kernels(pl):
    """The benchmark's kernels, with scopes from `pl` (proton.language or Triton's own)."""
    import triton
    import triton.language as tl

    @triton.jit
    def vadd(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        with pl.scope("add"):
            v = tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m)
        tl.store(out + offs, v, mask=m)

    @triton.jit
    def softmax(x, out, N: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, N)
        with pl.scope("load"):
            v = tl.load(x + row * N + offs)
        with pl.scope("reduce"):
            e = tl.exp(v - tl.max(v, 0))
            r = e / tl.sum(e, 0)
        tl.store(out + row * N + offs, r)

    @triton.jit
    def matmul(a, b, c, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
        offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
        offs_k = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            with pl.scope("load"):
                x = tl.load(a + offs_m[:, None] * K + (k + offs_k)[None, :])
                y = tl.load(b + (k + offs_k)[:, None] * K + offs_n[None, :])
            pl.enter_scope("mma")
            acc = tl.dot(x, y, acc)
            pl.exit_scope("mma")
        tl.store(c + offs_m[:, None] * K + offs_n[None, :], acc)

    @triton.jit
    def attention(q, k, v, o, S: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        # One head per program_id(1): q, k, v, o are [heads, S, D].
        head = tl.program_id(1).to(tl.int64) * S * D
        q, k, v, o = q + head, k + head, v + head, o + head
        offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
        offs_d = tl.arange(0, D)
        qb = tl.load(q + offs_m[:, None] * D + offs_d[None, :])
        m_i = tl.full((BM,), float("-inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for start in range(0, S, BN):
            offs_n = start + tl.arange(0, BN)
            with pl.scope("qk"):
                kb = tl.load(k + offs_n[:, None] * D + offs_d[None, :])
                s = tl.dot(qb, tl.trans(kb))
            with pl.scope("softmax"):
                m_new = tl.maximum(m_i, tl.max(s, 1))
                p = tl.exp(s - m_new[:, None])
                alpha = tl.exp(m_i - m_new)
                l_i = l_i * alpha + tl.sum(p, 1)
                m_i = m_new
            with pl.scope("pv"):
                vb = tl.load(v + offs_n[:, None] * D + offs_d[None, :])
                acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), vb)
        tl.store(o + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])

    return {"vadd": vadd, "softmax": softmax, "matmul": matmul, "attention": attention}


def spin_cycles_per_s():
    """torch.cuda._sleep spins for a number of SM cycles: its rate, calibrated with CUDA events."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    torch.cuda.synchronize()
    return 20_000_000 / (start.elapsed_time(end) / 1e3)


def queued_kernel_ms(fn, count, spin_rate=None):
    """GPU time (ms) per launch of `count` back-to-back launches of fn. With spin_rate, they are
    queued behind a GPU spin long enough for the host to enqueue them all, so host launch cost
    (and any profiler work on the launch path) does not show here."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    enqueue_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    if spin_rate:
        torch.cuda._sleep(int((3 * enqueue_s + 2e-3) * spin_rate))
    start.record()
    for _ in range(count):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / count


def _worker(config: str, out_path: str) -> None:
    import torch

    if config == "triton":
        import triton.profiler as tp
        import triton.profiler.language as pl

        pl.enable_semantic("triton")
        prof = tp
    else:
        import proton as prof
        import proton.language as pl

    kernels = define_kernels(pl)
    vadd, softmax, matmul, attention = (
        kernels[k] for k in ("vadd", "softmax", "matmul", "attention")
    )

    dev = "cuda"
    n = 1 << 20
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    o = torch.empty_like(x)
    rows = torch.randn(4096, 1024, device=dev)
    rows_out = torch.empty_like(rows)
    K = 4096
    a = torch.randn(K, K, device=dev, dtype=torch.float16)
    b = torch.randn(K, K, device=dev, dtype=torch.float16)
    c = torch.empty(K, K, device=dev, dtype=torch.float32)
    S, D = 4096, 64
    H = 32  # attention_mh: batch x heads
    q, kk, vv = (torch.randn(H, S, D, device=dev, dtype=torch.float16) for _ in range(3))
    oo = torch.empty(H, S, D, device=dev, dtype=torch.float32)
    launches = {
        "vadd": lambda: vadd[(n // 1024,)](x, y, o, n, BLOCK=1024, num_warps=4),
        "softmax": lambda: softmax[(4096,)](rows, rows_out, N=1024, num_warps=4),
        "matmul": lambda: matmul[(K // 128, K // 128)](
            a, b, c, K=K, BM=128, BN=128, BK=64, num_warps=8, num_stages=3
        ),
        "attention": lambda: attention[(S // 64, 1)](
            q, kk, vv, oo, S=S, D=D, BM=64, BN=64, num_warps=4
        ),
        "attention_mh": lambda: attention[(S // 64, H)](
            q, kk, vv, oo, S=S, D=D, BM=64, BN=64, num_warps=4
        ),
    }
    reps = {"vadd": 200, "softmax": 100, "matmul": 10, "attention": 50, "attention_mh": 10}

    spin_rate = spin_cycles_per_s()
    # Triton's instrumentation reads its buffers back after every launch (the host waits for
    # each kernel), so nothing can be queued behind a spin; its parser also rejects the clock
    # gap a spin leaves. Its kernel times are plain CUDA-event times of the launch loop.
    spin = config != "triton"

    def kernel_ms(fn, count):
        return queued_kernel_ms(fn, count, spin_rate if spin else None)

    def wall_s(fn, count=1000):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def measure(name, fn):
        before_k, before_w = kernel_ms(fn, reps[name]), wall_s(fn, 1000 if name != "matmul" else 50)
        if config == "cupti":
            prof.start(f"b_{config}_{name}")
        elif config == "proton_trace":
            prof.start(f"b_{config}_{name}", backend="instrumentation", data="trace")
        elif config == "proton_clock32":  # 32-bit clock deltas (optimizations="clock32")
            mode = prof.mode.Default(optimizations="clock32")
            prof.start(f"b_{config}_{name}", backend="instrumentation", mode=mode)
        elif config == "proton_global":  # one record per warp, no sums in shared memory
            mode = prof.mode.Default(buffer_type="global")
            prof.start(f"b_{config}_{name}", backend="instrumentation", mode=mode)
        else:
            prof.start(f"b_{config}_{name}", backend="instrumentation")
        inst_k, inst_w = kernel_ms(fn, reps[name]), wall_s(fn, 1000 if name != "matmul" else 50)
        t0 = time.perf_counter()
        prof.finalize()
        fin = time.perf_counter() - t0
        after_k, after_w = kernel_ms(fn, reps[name]), wall_s(fn, 1000 if name != "matmul" else 50)
        size = sum(
            os.path.getsize(f) for f in os.listdir(".") if f.startswith(f"b_{config}_{name}.")
        )
        return {
            "kernel_ratio": inst_k / min(before_k, after_k),
            "wall_ratio": inst_w / min(before_w, after_w),
            "kernel_ms": min(before_k, after_k),
            "finalize_s": fin,
            "profile_bytes": size,
        }

    results = {}
    wanted = os.environ.get("PROTON_BENCH_KERNELS", ",".join(KERNELS)).split(",")
    for name, fn in launches.items():
        if name not in wanted:
            continue
        try:
            results[name] = measure(name, fn)
        except Exception as e:  # noqa: BLE001 - one kernel failing (Triton's parser) leaves the others
            print(f"[{config}] {name} failed: {e}", file=sys.stderr)
            with contextlib.suppress(Exception):
                prof.finalize()
    with open(out_path, "w") as f:
        json.dump(results, f)


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize_rounds(rounds):
    """{config: [round, ...]} (a round: {kernel: {kernel_ratio, wall_ratio, ...}}) -> per
    config, each kernel's median ratios with their range and 95% bootstrap interval of the
    median (overhead.py's), and the geometric mean over the set: the median of each round's
    own geometric mean (rounds that ran the whole set) with its interval, and that of the
    kernels' medians."""
    table = {}
    for config, runs_of_config in rounds.items():
        if not runs_of_config:
            continue
        row = {}
        for k in KERNELS:
            runs = [r[k] for r in runs_of_config if k in r]
            if not runs:
                row[k] = {"kernel_ratio": float("nan"), "wall_ratio": float("nan")}
                continue
            kernel = [r["kernel_ratio"] for r in runs]
            row[k] = {
                "kernel_ratio": statistics.median(kernel),
                "wall_ratio": statistics.median(r["wall_ratio"] for r in runs),
                "kernel_ratio_range": [min(kernel), max(kernel)],
                "kernel_ratio_ci": list(bootstrap_ci(kernel)),
                "profile_bytes": runs[-1]["profile_bytes"],
                "finalize_s": runs[-1]["finalize_s"],
            }
        per_round = [
            _geomean([r[k]["kernel_ratio"] for k in SET])
            for r in runs_of_config
            if all(k in r for k in SET)
        ]
        of_medians = _geomean([row[k]["kernel_ratio"] for k in SET])
        table[config] = {
            "kernels": row,
            # The figure printed, with its interval: the median of the rounds' means.
            "kernel_geomean": statistics.median(per_round) if per_round else of_medians,
            "kernel_geomean_ci": list(bootstrap_ci(per_round)) if per_round else [math.nan] * 2,
            "kernel_geomean_rounds": per_round,
            "kernel_geomean_of_medians": of_medians,
        }
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--kernels", default=",".join(KERNELS), help="a subset of " + ",".join(KERNELS))
    ap.add_argument("--json", default="")
    ap.add_argument("--worker", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.worker:
        return _worker(args.worker, args.out)
    configs = args.configs.split(",")
    unknown = set(args.kernels.split(",")) - set(KERNELS)
    if unknown:
        ap.error(f"unknown kernels {sorted(unknown)}; choose from {','.join(KERNELS)}")
    os.environ["PROTON_BENCH_KERNELS"] = args.kernels
    rounds = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs:
            print(f"round {r + 1}/{args.rounds}: {c}", file=sys.stderr, flush=True)
            out = f"/tmp/intra_{c}_{r}.json"
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", c, "--out", out],
                capture_output=True,
                text=True,
                timeout=900,
                cwd="/tmp",
            )
            if proc.returncode != 0:
                print(f"[{c} round {r}] failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            # A kernel that failed inside a worker that went on (Triton's parser): say why.
            for line in proc.stderr.splitlines():
                if line.startswith(f"[{c}] ") and " failed: " in line:
                    print(f"round {r + 1}: {line}", file=sys.stderr)
            rounds[c].append(json.load(open(out)))
    table = summarize_rounds(rounds)
    print(f"{'config':14s} " + " ".join(f"{k:>20s}" for k in KERNELS) + "   geomean(kernel, 4)")
    for c in configs:
        if c not in table:
            print(f"{c:14s} (did not run)")
            continue
        row, gm = table[c]["kernels"], table[c]["kernel_geomean"]
        cells = " ".join(
            f"{row[k]['kernel_ratio']:8.3f}/{row[k]['wall_ratio']:8.3f}  " for k in KERNELS
        )
        lo, hi = table[c]["kernel_geomean_ci"]
        missing = [k for k in SET if math.isnan(row[k]["kernel_ratio"])]
        partial = f" (without {','.join(missing)})" if missing else ""
        print(f"{c:14s} {cells}   {gm:.3f} [{lo:.3f}, {hi:.3f}]{partial}")
    print("cells: kernel-time ratio / wall-time ratio of a loop of launches (median of rounds);")
    print("geomean: median over rounds of each round's geometric mean, [95% bootstrap interval]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
