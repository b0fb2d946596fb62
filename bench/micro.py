"""Micro-benchmarks of the Python API's hot path and of the Hatchet JSON writer.

    python bench/micro.py [--json out.json]

Reports, in nanoseconds per `with proton.scope("step"): pass` (an empty loop's cost
subtracted), the scope cost with profiling off and on; the cost per launch of the
hook="triton" launch hooks (enter and exit around a launch-metadata evaluation, whose own cost
is subtracted; needs Triton, launches nothing); and the seconds taken by finalize() to write
a tree of about 1,000,000 nodes as Hatchet JSON. Timings are reported, never asserted.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import proton

N = 1_000_000
ROUNDS = 5


def best_ns_per_iter(fn, n=N, rounds=ROUNDS):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def empty_loop(n):
    for _ in range(n):
        pass


def scope_loop(n):
    scope = proton.scope
    for _ in range(n):
        with scope("step"):
            pass


class LaunchMetadata:
    """What Triton hands its launch hooks: a lazy dict whose get() calls launch_metadata."""

    def __init__(self, fn, args):
        self.data = {"name": "vadd_kernel", "function": None, "stream": 0}
        self.fn, self.args = fn, args

    def get(self):
        self.data.update(self.fn(None, None, self.args))
        return self.data


def vadd_metadata(grid, kernel, args):
    n = args["n"]
    return {"name": f"vadd_{n}", "flops32": n, "bytes": 12 * n}


def hook_loop(n):
    """Triton's side of a launch with hook="triton": the hooks it finds installed, called with
    a fresh lazy dict (no kernel is launched)."""
    from triton import knobs

    enter, exit_ = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    for _ in range(n):
        m = LaunchMetadata(vadd_metadata, {"n": 4096})
        enter(m)
        exit_(m)


def lazy_loop(n):
    for _ in range(n):
        LaunchMetadata(vadd_metadata, {"n": 4096}).get()


def build_tree(fanout=100):
    """fanout**3 leaves under fanout**2 + fanout inner nodes: 1,010,101 nodes with ROOT."""
    names = [f"n{i}" for i in range(fanout)]
    scope = proton.scope
    metrics = {"count_metric": 1, "flops16": 2.0e9, "bytes": 4096}
    for a in names:
        with scope(a):
            for b in names:
                with scope(b):
                    for c in names:
                        with scope(c, metrics):
                            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # no GPU here is expected
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = best_ns_per_iter(empty_loop)
        results["scope_off_ns"] = best_ns_per_iter(scope_loop) - base
        proton.start(os.path.join(tmp, "micro"))
        results["scope_on_ns"] = best_ns_per_iter(scope_loop) - base
        proton.finalize()

        try:
            import triton  # noqa: F401

            proton.start(os.path.join(tmp, "hooked"), hook="triton")
            lazy = best_ns_per_iter(lazy_loop, n=N // 10)
            results["triton_hook_ns"] = best_ns_per_iter(hook_loop, n=N // 10) - lazy
            proton.finalize()
        except ImportError:
            pass

        proton.start(os.path.join(tmp, "big"))
        t0 = time.perf_counter()
        build_tree()
        results["build_1m_tree_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        proton.finalize()
        results["finalize_1m_nodes_hatchet_s"] = time.perf_counter() - t0
        path = os.path.join(tmp, "big.hatchet")
        results["hatchet_1m_nodes_bytes"] = os.path.getsize(path)
        with open(path) as f:
            results["nodes_written"] = f.read().count('"frame"')

    print(f"{'measurement':<34}{'value':>16}")
    for key, value in results.items():
        print(f"{key:<34}{value:>16.3f}" if isinstance(value, float) else f"{key:<34}{value:>16}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
