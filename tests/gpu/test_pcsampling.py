"""Instruction sampling (mode="pcsampling") on a real GPU: samples land on the source line
that costs the time, library kernels get samples, two sampling sessions share one sampler,
the interval sets how often the GPU samples, and kernel timing goes on meanwhile.

Sample counts vary from run to run: the tests assert where samples go and how counts
compare, never fixed numbers.

They run in a fresh process of their own (test_sampling_in_a_fresh_process): on an H200 with
CUDA 13, after earlier tests had started and stopped CUPTI in the same process, sampling
returned samples without PCs (pc_samples_in_non_user_kernels), so that no line got any.
"""

import inspect
import json
import os
import subprocess
import sys

import proton
import pytest
from gpu_tree import dump
from proton_test_utils import find, load_hatchet

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

N = 1 << 18  # elements chased through: 1 MiB of int32, random order

_FRESH = "PROTON_PCSAMPLING_FRESH_PROCESS"
in_fresh_process = pytest.mark.skipif(
    os.environ.get(_FRESH) != "1", reason="runs inside test_sampling_in_a_fresh_process"
)


def test_sampling_in_a_fresh_process():
    if os.environ.get(_FRESH) == "1":
        pytest.skip("this is the fresh process")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", __file__],
        env={**os.environ, _FRESH: "1"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    print(result.stdout[-2000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "7 passed" in result.stdout, result.stdout[-3000:]


def test_sampling_after_twenty_earlier_sessions(tmp_path):
    """Issue 14's sequence: earlier sessions of every kind, then sampling a kernel that is
    compiled and loaded inside the sampling session, in a process of its own."""
    if os.environ.get(_FRESH) == "1":
        pytest.skip("runs from the outer process")
    script = os.path.join(os.path.dirname(__file__), "pcsampling_after_sessions.py")
    result = subprocess.run(
        [sys.executable, script],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    kernels = report["kernels"]
    assert kernels["chase_kernel"][0] == 3, report
    assert kernels["torch"][0] == 3, report
    # Both kernels' samples have PCs: they land on the kernels, hardly any outside them.
    assert kernels["chase_kernel"][1] > 0 and kernels["torch"][1] > 0, report
    assert report["non_user"] < 0.01 * report["total"], report


@triton.jit
def chase_kernel(next_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = offs
    for _ in range(steps):
        i = tl.load(next_ptr + i)  # EXPENSIVE: every load waits for the one before
    tl.store(out_ptr + offs, i)


def expensive_line():
    lines, first = inspect.getsourcelines(chase_kernel.fn)
    return first + next(n for n, line in enumerate(lines) if "EXPENSIVE" in line)


def make_chase(block=128, steps=2000):
    perm = torch.randperm(N, device="cuda").to(torch.int32)
    out = torch.empty(N, dtype=torch.int32, device="cuda")

    def run():
        chase_kernel[(N // block,)](perm, out, steps, BLOCK=block)

    return run


@pytest.fixture
def chase():
    run = make_chase()
    run()  # compiled and loaded before profiling starts
    torch.cuda.synchronize()
    return run


@pytest.fixture(scope="module")
def half_matrix():
    """A matrix whose product loads cuBLAS's kernel before this module's first sampling
    session. Seen on an H100 with CUDA 13: a module first loaded after an earlier sampling
    session ended gets its samples without PCs (pc_samples_in_non_user_kernels)."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    a @ a
    torch.cuda.synchronize()
    return a


@pytest.fixture(autouse=True)
def _cublas_loaded_first(half_matrix):
    yield


def inclusive(node, metric="num_samples"):
    """The metric summed over node and everything below it, as readers compute it."""
    return node["metrics"].get(metric, 0) + sum(inclusive(c, metric) for c in node["children"])


def stats(root):
    return dict(root["proton_metadata"]["stats"])


def hot_line(kernel):
    """The metrics of the kernel's child for the EXPENSIVE line of this file."""
    suffix = f"test_pcsampling.py:{expensive_line()}@chase_kernel"
    hits = [c["metrics"] for c in kernel["children"] if c["frame"]["name"].endswith(suffix)]
    assert len(hits) == 1, f"no child named *{suffix}:\n{dump(kernel)}"
    return hits[0]


# The module of a kernel loaded before sampling starts is found in Triton's cache; one loaded
# while sampling runs comes from CUPTI's module-loaded callback.
@in_fresh_process
@pytest.mark.parametrize("loaded", ["before_start", "while_sampling"])
def test_most_samples_land_on_the_dependent_load_line(loaded):
    if loaded == "before_start":
        run = make_chase(block=128)
        run()
        torch.cuda.synchronize()
    else:
        run = make_chase(block=64)  # a variant this process has not loaded yet
    proton.start(f"chase_{loaded}", mode="pcsampling")
    with proton.scope("chase"):
        for _ in range(10):
            run()
    proton.finalize()
    root = load_hatchet(f"chase_{loaded}.hatchet")[0]
    kernel = find(root, "chase", "chase_kernel")
    assert kernel["metrics"]["count"] == 10  # kernel timing goes on while sampling
    assert kernel["metrics"]["time (ns)"] > 0
    total = inclusive(kernel)
    hot = hot_line(kernel)
    assert hot["num_samples"] > 0.5 * total, dump(kernel)
    assert hot["num_stalled_samples"] > 0.5 * hot["num_samples"], hot
    reasons = {
        k: v for k, v in hot.items() if k.startswith("stalled_") and not k.endswith("_not_issued")
    }
    assert max(reasons, key=reasons.get) == "stalled_long_scoreboard", reasons
    assert "num_samples" in root["metrics"], "the root lists every metric column"
    print(f"{loaded}: {total} samples, {hot['num_samples']} on the hot line; {stats(root)}")


@in_fresh_process
def test_cublas_matmul_gets_samples_on_its_kernel(half_matrix):
    a = half_matrix
    proton.start("matmul", mode="pcsampling")
    with proton.scope("mm"):
        for _ in range(20):
            a @ a
    proton.finalize()
    root = load_hatchet("matmul.hatchet")[0]
    mm = find(root, "mm")
    kernels = [c for c in mm["children"] if c["metrics"].get("count")]
    assert kernels and sum(k["metrics"]["count"] for k in kernels) % 20 == 0, dump(mm)
    slowest = max(kernels, key=lambda k: k["metrics"]["time (ns)"])
    # cuBLAS ships no line information: the samples stay on the kernel and are counted.
    assert slowest["metrics"].get("num_samples", 0) > 0, f"{dump(root)}\n{stats(root)}"
    assert slowest["metrics"]["num_samples"] == inclusive(slowest), dump(mm)
    assert stats(root)["pc_samples_without_line_info"] >= slowest["metrics"]["num_samples"]


@in_fresh_process
def test_two_sampling_sessions_at_once(chase):
    a = proton.start("a", mode="pcsampling")
    b = proton.start("b", mode=proton.mode.PCSampling(interval=1000))
    assert a != b
    with proton.scope("both"):
        for _ in range(5):
            chase()
    proton.deactivate(b)
    with proton.scope("only_a"):
        for _ in range(5):
            chase()
    proton.finalize()
    ra = load_hatchet("a.hatchet")[0]
    rb = load_hatchet("b.hatchet")[0]
    both_a = find(ra, "both", "chase_kernel")
    both_b = find(rb, "both", "chase_kernel")
    assert both_a["metrics"]["count"] == both_b["metrics"]["count"] == 5
    # The same launches in both sessions: the same samples, line by line.
    assert inclusive(both_a) > 0
    lines_a = {c["frame"]["name"]: c["metrics"] for c in both_a["children"]}
    lines_b = {c["frame"]["name"]: c["metrics"] for c in both_b["children"]}
    assert lines_a == lines_b
    only_a = find(ra, "only_a", "chase_kernel")
    assert only_a["metrics"]["count"] == 5
    assert inclusive(only_a) > 0, dump(ra)
    assert "only_a" not in [c["frame"]["name"] for c in rb["children"]], dump(rb)


@in_fresh_process
def test_a_longer_interval_takes_fewer_samples(chase):
    samples = {}
    for interval in (1 << 10, 1 << 14):
        proton.start(f"every_{interval}", mode=proton.mode.PCSampling(interval=interval))
        for _ in range(5):
            chase()
        proton.finalize()
        root = load_hatchet(f"every_{interval}.hatchet")[0]
        kernel = find(root, "chase_kernel")
        assert kernel["metrics"]["count"] == 5
        samples[interval] = inclusive(kernel)
    # 16 times longer between samples; allow for the GPU's own variation.
    assert 0 < 4 * samples[1 << 14] < samples[1 << 10], samples


@in_fresh_process
def test_trace_data_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"mode='pcsampling'.*data='tree'"):
        proton.start("trace_pc", mode="pcsampling", data="trace")


@triton.jit
def copy_loop(x, y, size: tl.constexpr):
    offs = tl.arange(0, size)
    for _ in range(1000):
        tl.store(y + offs, tl.load(x + offs))


@in_fresh_process
def test_short_fill_kernels_under_a_scope_get_samples():
    # triton.profiler's test_pcsampling: torch's one-CTA fill kernels (about 0.7 us, some 1400
    # cycles) under "init" must carry samples. Nothing of theirs is lost: at the default period
    # (1024 cycles) such a kernel has about half a sample due per launch (an H200 gave 1 over
    # the two launches, 16 over 40), each attributed to it; at 32 cycles it gets a dozen.
    mode = proton.mode.PCSampling(interval=32)
    proton.start("short", hook="triton", backend="cupti", mode=mode)
    with proton.scope("init"):
        x = torch.ones((1024,), device="cuda", dtype=torch.float32)
        y = torch.zeros_like(x)
    with proton.scope("test"):
        copy_loop[(1,)](x, y, x.size()[0], num_warps=4)
    proton.finalize()
    root = load_hatchet("short.hatchet")[0]
    (fill,) = find(root, "init")["children"]
    assert "elementwise" in fill["frame"]["name"] and fill["metrics"]["count"] == 2
    assert fill["metrics"]["num_samples"] > 0, dump(root)  # no line info: on the kernel
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("pc_samples_unattributed", 0) == 0, stats
