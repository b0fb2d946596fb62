"""Cost of `proton ./app` on a launch-bound C++ loop, next to `nsys profile` where installed.

Builds bench/native_launch_loop.cu with nvcc, then runs it, each configuration in its own
process, rounds interleaved (A B C A B C ...): plain, `proton ./app` (injection, tree data),
`proton ./app scoped` (a PROTON_SCOPE around every launch), `proton -c native ./app` (native
call stacks as the context), `nsys profile` (CUDA trace only).
Ratio = the loop's wall time / the plain run's in the same round; the table gives the median
and the spread over rounds, and the size of each tool's output file.

    python3 bench/native.py --launches 200000 --rounds 3 [--json native.json]
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from proton import native

HERE = os.path.dirname(os.path.abspath(__file__))


def build(out_dir):
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    exe = os.path.join(out_dir, "native_launch_loop")
    flags = shlex.split(native.cflags()) + shlex.split(native.ldflags(nvcc_style=True))
    source = os.path.join(HERE, "native_launch_loop.cu")
    subprocess.run([nvcc, "-O2", "-arch=native", source, "-o", exe, *flags], check=True)
    return exe


def run(command, cwd):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    line = [x for x in result.stdout.splitlines() if x.startswith("launches=")][-1]
    return float(line.split("seconds=")[1])


def sizes(cwd, suffixes):
    return sum(
        os.path.getsize(os.path.join(cwd, f)) for f in os.listdir(cwd) if f.endswith(suffixes)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="proton_native_bench_")
    exe = build(work)
    n = str(args.launches)
    proton_cmd = [sys.executable, "-m", "proton"]
    configs = {
        "plain": ([exe, n], None),
        "proton": ([*proton_cmd, "-n", "p", exe, n], (".hatchet",)),
        "proton_scoped": ([*proton_cmd, "-n", "s", exe, n, "scoped"], (".hatchet",)),
        "proton_native": ([*proton_cmd, "-c", "native", "-n", "c", exe, n], (".hatchet",)),
    }
    nsys = shutil.which("nsys")
    if nsys:
        configs["nsys"] = (
            [nsys, "profile", "-t", "cuda", "-o", "n", "-f", "true", exe, n],
            (".nsys-rep",),
        )
    ratios = {name: [] for name in configs if name != "plain"}
    seconds = {name: [] for name in configs}
    out_sizes = {}
    for _ in range(args.rounds):
        times = {}
        for name, (command, suffixes) in configs.items():
            cwd = tempfile.mkdtemp(dir=work)
            times[name] = run(command, cwd)
            if suffixes:
                out_sizes[name] = sizes(cwd, suffixes)
        for name, values in ratios.items():
            values.append(times[name] / times["plain"])
        for name, t in times.items():
            seconds[name].append(t)
    print(f"{args.launches} empty-kernel launches, {args.rounds} rounds (ratio to plain)")
    report = {}
    plain_us = statistics.median(seconds["plain"]) / args.launches * 1e6
    print(f"  {'plain':14s} {plain_us:6.2f} us per launch")
    for name, values in ratios.items():
        median = statistics.median(values)
        spread = max(values) - min(values)
        us = statistics.median(seconds[name]) / args.launches * 1e6
        report[name] = {
            "median_ratio": median,
            "spread": spread,
            "us_per_launch": us,
            "file_bytes": out_sizes.get(name),
        }
        print(
            f"  {name:14s} {median:6.2f}x  (spread {spread:.2f})  {us:6.2f} us per launch "
            f"(+{us - plain_us:.2f})  file {out_sizes.get(name)} B"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "launches": args.launches,
                    "rounds": args.rounds,
                    "plain_us_per_launch": plain_us,
                    "results": report,
                },
                f,
            )


if __name__ == "__main__":
    main()
