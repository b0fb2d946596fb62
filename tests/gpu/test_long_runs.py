"""Long runs and many threads on the GPU: bounded memory with periodic flushing, exact counts."""

import ctypes
import glob
import json
import os
import subprocess
import sys
import threading

import proton
import pytest
from gpu_tree import kernels_under
from proton_test_utils import PYTHON_DIR, find, load_hatchet

torch = pytest.importorskip("torch")

# 10 million by default, as the issue asks; smaller for a quick run.
TOTAL_KERNELS = int(os.environ.get("PROTON_LONG_RUN_KERNELS", "10000000"))
PER_PHASE = 10_000


def _kernel_count(path):
    root = load_hatchet(path)[0]
    return sum(count for _, count in kernels_under(root))


LONG_RUN = """
import os, sys, torch, proton
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
phases, per_phase = int(sys.argv[1]), int(sys.argv[2])
x = torch.zeros(16, device="cuda")
torch.cuda.synchronize()
session = proton.start("long", backend="cupti", mode="periodic_flushing")
warmup = max(1, phases // 10)
for phase in range(phases):
    with proton.scope("step"):
        for _ in range(per_phase):
            x.add_(1)
    proton.data.advance_phase(session)
    if phase + 1 == warmup:
        torch.cuda.synchronize()
        after_warmup = rss_mb()
torch.cuda.synchronize()
print(f"growth {rss_mb() - after_warmup:.1f}")
proton.finalize()
"""


def test_ten_million_kernels_with_periodic_flushing_keep_memory_bounded(tmp_path):
    # Its own process, as a long job is: CUPTI clients of earlier tests in this process
    # (torch.profiler's among them) change what CUPTI keeps in memory.
    phases = TOTAL_KERNELS // PER_PHASE
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(
        [sys.executable, "-c", LONG_RUN, str(phases), str(PER_PHASE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    growth = float(result.stdout.split("growth ")[1].split()[0])
    parts = sorted(glob.glob("long.part_*.hatchet"))
    # One file per phase, plus the empty phase after the last advance.
    assert len(parts) == phases + 1
    assert sum(_kernel_count(p) for p in parts) == phases * PER_PHASE
    stats = load_hatchet(parts[-1])[0]["proton_metadata"]["stats"]
    assert stats["kernels_never_completed"] == 0
    assert stats["activity_records_dropped"] == 0
    print(f"resident memory growth after warm-up: {growth:.1f} MB over {phases} phases")
    assert growth < 50, f"resident memory grew by {growth:.1f} MB"


def _resident_by_owner():
    """Resident kB by owner, from /proc/self/smaps: Proton's activity buffers (anonymous maps
    of exactly one buffer, 4 MB), the driver's (device files), malloc's heap, other
    anonymous maps and files."""
    owners, owner = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":") and len(parts) >= 5:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                path = parts[5] if len(parts) > 5 else ""
                if path.startswith("/dev/"):
                    owner = "driver (device files)"
                elif path == "[heap]":
                    owner = "malloc heap"
                elif not path:
                    owner = "activity buffers" if hi - lo == 4 << 20 else "other anonymous"
                else:
                    owner = "files"
            elif parts[0] == "Rss:":
                owners[owner] = owners.get(owner, 0) + int(parts[1])
    return owners


def _heap_mb():
    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    m = libc.mallinfo2()
    return (m.uordblks + m.hblkhd) / 2**20


def _growth_over_launches(x, launches, session=None):
    """MB of resident memory by owner, and of malloc's heap, gained over `launches` kernels."""
    torch.cuda.synchronize()
    before, heap = _resident_by_owner(), _heap_mb()
    for i in range(launches // PER_PHASE):
        for _ in range(PER_PHASE):
            x.add_(1)
        if session is not None:
            proton.data.advance_phase(session)
    torch.cuda.synchronize()
    after = _resident_by_owner()
    owners = {k: (after.get(k, 0) - before.get(k, 0)) / 1024 for k in set(before) | set(after)}
    return owners, _heap_mb() - heap


def test_memory_a_long_run_gains_after_a_graph_capture_is_cuptis_not_protons():
    # Issue 14, item 7: in the GPU test process, a 10M-kernel run grew malloc's heap by 274 MB.
    # The cause: once CUPTI has seen a CUDA graph captured, every later kernel launch leaves
    # about 30 bytes on the heap, whether a Proton session runs or not (a graph captured with
    # no CUPTI attached does not do it). What Proton owns (its activity buffers, the launch
    # table) stays flat; its session adds nothing to the heap's growth.
    x = torch.zeros(16, device="cuda")
    y = torch.zeros(16, device="cuda")
    stream = torch.cuda.Stream()
    proton.start("captured", backend="cupti")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        y.add_(1)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            y.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    proton.finalize()
    launches = min(TOTAL_KERNELS, 1_000_000)
    _growth_over_launches(x, launches // 10)  # warm-up
    _, without = _growth_over_launches(x, launches)
    session = proton.start("long_after_graph", backend="cupti", mode="periodic_flushing")
    owners, with_proton = _growth_over_launches(x, launches, session)
    proton.finalize()
    print(
        f"heap growth over {launches} launches after a graph capture: {without:.1f} MB "
        f"without Proton, {with_proton:.1f} MB with it; by owner with it: "
        + ", ".join(f"{k} {v:+.1f}" for k, v in sorted(owners.items()))
    )
    assert owners.get("activity buffers", 0) < 8
    assert with_proton - without < 8, (without, with_proton)
    parts = sorted(glob.glob("long_after_graph.part_*.hatchet"))
    assert sum(_kernel_count(p) for p in parts) == launches


def test_eight_threads_of_ten_thousand_launches_count_exactly():
    bufs = [torch.zeros(16, device="cuda") for _ in range(8)]
    torch.cuda.synchronize()
    proton.start("threads8", backend="cupti")

    def work(i):
        with proton.scope(f"thread{i}"):
            for _ in range(10_000):
                bufs[i].add_(1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = load_hatchet("threads8.hatchet")[0]
    for i in range(8):
        assert [c for _, c in kernels_under(find(root, f"thread{i}"))] == [10_000]
    assert sum(c for _, c in kernels_under(root)) == 80_000
    assert [b[0].item() for b in bufs] == [10_000.0] * 8
    json.dumps(root)  # plain data
