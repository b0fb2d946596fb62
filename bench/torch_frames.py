"""What context="torch" costs per PyTorch operator and per module call, on the CPU.

    python bench/torch_frames.py [--rounds 3] [--configs none torch ...] [--json out.json]

Each configuration runs in its own process: no profiler (`none`), `context="shadow"`,
`torch_floor` (PyTorch's RecordFunction calling Proton's observer with functions that return
at once, and the module-call events or hooks calling functions that return at once; see
bench/overhead.py) and Proton's `torch` and `python,torch`. In each, the best of 10 timings of
20,000 calls of an operator from Python (`torch.add(a, b, out=c)` on 4 floats) and of a module
that runs no operator (`nn.Identity`), in nanoseconds per call; the median over rounds is
reported. Needs PyTorch and a C compiler (for the floor's no-op table); no GPU. Timings are
reported, never asserted. PROTON_TORCH_MODULE_EVENTS=hooks measures the module-hook route.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = ["none", "shadow", "torch_floor", "torch", "python,torch"]
CALLS = 20_000


def _best_ns(fn, calls=CALLS, repeats=10):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(calls)
        best = min(best, (time.perf_counter() - t0) / calls * 1e9)
    return best


def worker(config):
    import torch

    torch.set_num_threads(1)
    a, b, c = torch.randn(4), torch.randn(4), torch.empty(4)
    module = torch.nn.Identity()

    def ops(n):
        for _ in range(n):
            torch.add(a, b, out=c)

    def calls(n):
        for _ in range(n):
            module(a)

    stop = None
    if config == "torch_floor":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import overhead

        start, stop, _ = overhead.torch_floor_profiler(
            os.path.join(os.environ.get("TMPDIR", "/tmp"), "proton_torch_frames_floor"),
            backend=None,
        )
        start()
    elif config != "none":
        import proton

        proton.start(
            os.path.join(os.environ.get("TMPDIR", "/tmp"), "proton_torch_frames"), context=config
        )
        stop = proton.finalize
    ops(1000)
    calls(1000)
    result = {"op_ns": _best_ns(ops), "module_call_ns": _best_ns(calls)}
    if stop:
        stop()
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS)
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    configs = args.configs
    runs = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs:  # interleaved: A B C A B C ...
            print(f"round {r + 1}/{args.rounds}: {c}", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", c],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                continue
            runs[c].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    table = {}
    print(f"{'configuration':16s} {'op (ns)':>9s} {'module call (ns)':>17s}  rounds")
    for c, results in runs.items():
        if not results:
            print(f"{c:16s} {'failed':>9s}")
            continue
        op = statistics.median(r["op_ns"] for r in results)
        call = statistics.median(r["module_call_ns"] for r in results)
        table[c] = {"op_ns": op, "module_call_ns": call, "rounds": results}
        print(f"{c:16s} {op:9.0f} {call:17.0f}  {len(results)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
