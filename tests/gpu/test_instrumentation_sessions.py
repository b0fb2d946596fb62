"""backend="instrumentation" through the rest of the session API: deactivate and activate,
in-memory data and phases, the decorator, sessions one after another with other modes, and
the command line. Counts are exact: one per warp that ran a scope, per recorded launch."""

import os
import subprocess
import sys

import proton
import proton.language as pl
import pytest
from gpu_tree import dump
from proton_test_utils import PYTHON_DIR, find, load_hatchet

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def counted_kernel(out, N: tl.constexpr):
    v = tl.program_id(0).to(tl.float32)
    with pl.scope("work"):
        for _ in tl.static_range(N):
            v = v * 1.5 + 1.0
    tl.store(out + tl.program_id(0), v)


CTAS, WARPS = 4, 4  # 16 warps per launch


def launch(out, times=1):
    for _ in range(times):
        counted_kernel[(CTAS,)](out, N=4, num_warps=WARPS)
    torch.cuda.synchronize()


def work_counts(root):
    kernel = find(root, "counted_kernel")
    return kernel["metrics"]["count"], find(kernel, "work")["metrics"]["count"]


def test_launches_while_deactivated_are_left_out():
    out = torch.empty(CTAS, device="cuda")
    proton.start("paused", backend="instrumentation")
    launch(out, 2)
    proton.deactivate()
    launch(out, 3)  # the instrumented binary runs, and nothing of it is filed
    proton.activate()
    launch(out, 4)
    proton.finalize()
    root = load_hatchet("paused.hatchet")[0]
    assert work_counts(root) == (6, 6 * CTAS * WARPS), dump(root)


def test_in_memory_data_and_phases_carry_the_cycles():
    out = torch.empty(CTAS, device="cuda")
    session = proton.start("phased", backend="instrumentation")
    launch(out, 2)
    proton.data.advance_phase(session)
    launch(out, 3)
    proton.deactivate(session, flushing=True)
    first, second = proton.data.get(session, 0)[0], proton.data.get(session, 1)[0]
    assert work_counts(first) == (2, 2 * CTAS * WARPS), dump(first)
    assert work_counts(second) == (3, 3 * CTAS * WARPS), dump(second)
    assert find(second, "counted_kernel", "work")["metrics"]["cycles"] > 0
    assert proton.data.is_phase_complete(session, 0)
    proton.finalize(session)


def test_the_decorator_records_what_runs_inside_it():
    out = torch.empty(CTAS, device="cuda")

    @proton.profile(name="decorated", backend="instrumentation")
    def step():
        launch(out, 5)

    step()
    proton.finalize()
    root = load_hatchet("decorated.hatchet")[0]
    assert work_counts(root) == (5, 5 * CTAS * WARPS), dump(root)


def test_sessions_one_after_another_each_get_their_own_mode():
    out = torch.empty(CTAS, device="cuda")
    proton.start("first_tree", backend="instrumentation")
    launch(out, 2)
    proton.finalize()
    proton.start(
        "one_unit",
        backend="instrumentation",
        mode=proton.mode.Default(sampling_strategy="selective", sampling_options="1"),
    )
    launch(out, 3)
    proton.finalize()
    proton.start("then_trace", backend="instrumentation", data="trace")
    launch(out, 1)
    proton.finalize()
    proton.start("tree_again", backend="instrumentation")
    launch(out, 4)
    proton.finalize()
    assert work_counts(load_hatchet("first_tree.hatchet")[0]) == (2, 2 * 16)
    assert work_counts(load_hatchet("one_unit.hatchet")[0]) == (3, 3 * CTAS)  # warp 1 only
    trace = load_hatchet("then_trace.chrome_trace")["traceEvents"]
    slices = [e for e in trace if e.get("ph") == "X" and e.get("name") == "work"]
    assert len(slices) == CTAS * WARPS, len(slices)
    assert work_counts(load_hatchet("tree_again.hatchet")[0]) == (4, 4 * 16)


PROGRAM = """
import torch, triton, triton.language as tl
import proton.language as pl

@triton.jit
def cli_kernel(out, N: tl.constexpr):
    v = tl.program_id(0).to(tl.float32)
    with pl.scope("body"):
        for _ in tl.static_range(N):
            v = v * 1.5 + 1.0
    tl.store(out + tl.program_id(0), v)

out = torch.empty(8, device="cuda")
for _ in range(3):
    cli_kernel[(8,)](out, N=4, num_warps=2)
torch.cuda.synchronize()
raise SystemExit(7)  # the program's own exit code, kept
"""


def run_program(folder, program, *before, env=None):
    """Runs `program` (written to a file: Triton reads its kernels' source) in a fresh process,
    as `python <before...> -n cli prog.py` when `before` is given."""
    (folder / "prog.py").write_text(program)
    full_env = dict(
        os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    full_env.pop("PROTON_DISABLE", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, *before, *(["-n", "cli"] if before else []), "prog.py"],
        cwd=str(folder),
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_the_command_line_instruments_a_whole_program(tmp_path, data):
    r = run_program(tmp_path, PROGRAM, "-m", "proton", "-b", "instrumentation", "-d", data)
    assert r.returncode == 7, r.stderr[-3000:]
    if data == "tree":
        root = load_hatchet(tmp_path / "cli.hatchet")[0]
        kernel = find(root, "cli_kernel")
        assert kernel["metrics"]["count"] == 3, dump(root)
        assert find(kernel, "body")["metrics"]["count"] == 3 * 8 * 2, dump(root)
    else:
        events = load_hatchet(tmp_path / "cli.chrome_trace")["traceEvents"]
        body = [e for e in events if e.get("ph") == "X" and e.get("name") == "body"]
        assert len(body) == 3 * 8 * 2


SMALL_RING = """
import json, torch, triton, triton.language as tl
import proton, proton.language as pl

@triton.jit
def wide_kernel(out, N: tl.constexpr):
    v = tl.program_id(0).to(tl.float32)
    with pl.scope("work"):
        for _ in tl.static_range(N):
            v = v * 1.5 + 1.0
    tl.store(out + tl.program_id(0), v)

out = torch.empty(4096, device="cuda")
for data, ctas, launches in (("tree", 4096, 20), ("trace", 4, 100)):
    proton.start(f"small_{data}", backend="instrumentation", data=data)
    for _ in range(launches):
        wide_kernel[(ctas,)](out, N=4, num_warps=4)
    torch.cuda.synchronize()
    proton.finalize()
print("ok")
"""


def test_a_small_ring_drains_often_and_loses_nothing(tmp_path):
    # PROTON_INSTRUMENTATION_RING_MB=1: the tree's 20 launches of 4096 CTAs (a CTA record
    # each) and the trace's 100 launches of 16 warps fill the ring several times over; every
    # launch is still recorded, exactly.
    r = run_program(tmp_path, SMALL_RING, env={"PROTON_INSTRUMENTATION_RING_MB": "1"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
    root = load_hatchet(tmp_path / "small_tree.hatchet")[0]
    kernel = find(root, "wide_kernel")
    assert kernel["metrics"]["count"] == 20, dump(root)
    assert find(kernel, "work")["metrics"]["count"] == 20 * 4096 * 4, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_ring_full_wait_us", 0) > 0, stats
    assert stats.get("instrumentation_launches_unrecorded", 0) == 0, stats
    trace = load_hatchet(tmp_path / "small_trace.chrome_trace")
    work = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("name") == "work"]
    assert len(work) == 100 * 4 * 4


def find_kernel_path(node, name, path=()):
    """The names from the root to the first node called `name`, and that node."""
    for child in node["children"]:
        here = (*path, child["frame"]["name"])
        if child["frame"]["name"] == name:
            return here, child
        found = find_kernel_path(child, name, here)
        if found:
            return found
    return None


def test_scopes_go_under_the_launch_s_python_frames_and_proton_scopes():
    out = torch.empty(CTAS, device="cuda")
    launch(out)  # compiled before the sessions

    def step():
        launch(out, 2)

    proton.start("py_frames", backend="instrumentation", context="python")
    step()
    proton.finalize()
    path, kernel = find_kernel_path(load_hatchet("py_frames.hatchet")[0], "counted_kernel")
    assert any(p.endswith("@step") for p in path[:-1]), path
    assert kernel["metrics"]["count"] == 2
    assert find(kernel, "work")["metrics"]["count"] == 2 * CTAS * WARPS

    proton.start("shadow_scopes", backend="instrumentation")
    with proton.scope("outer"), proton.scope("inner"):
        launch(out, 3)
    proton.finalize()
    root = load_hatchet("shadow_scopes.hatchet")[0]
    kernel = find(root, "outer", "inner", "counted_kernel")
    assert kernel["metrics"]["count"] == 3, dump(root)
    assert find(kernel, "work")["metrics"]["count"] == 3 * CTAS * WARPS, dump(root)


FIRST_LAUNCH_CAPTURED = """
import ctypes, json, sys, torch, triton, triton.language as tl
import proton, proton.language as pl

@triton.jit
def graphed(x, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("body"):
        v = tl.load(x + offs) * 2.0 + 1.0
    tl.store(out + offs, v)

x = torch.arange(4096, device="cuda", dtype=torch.float32)
out = torch.zeros_like(x)
if sys.argv[1] == "blocking":  # a stream that waits for the legacy one, as CUDA's default flags make
    handle = ctypes.c_void_p()
    assert ctypes.CDLL("libcuda.so.1").cuStreamCreate(ctypes.byref(handle), 0) == 0
    stream = torch.cuda.ExternalStream(handle.value)
else:
    stream = torch.cuda.Stream()
proton.start("first_capture", backend="instrumentation")
graphed.warmup(x, out, BLOCK=1024, grid=(4,), num_warps=4)  # compiled for the session only
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=stream):
    graphed[(4,)](x, out, BLOCK=1024, num_warps=4)  # the process's first instrumented launch
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
proton.finalize()
assert torch.equal(out, x * 2 + 1)
print("ok")
"""


@pytest.mark.parametrize("stream", ["pytorch", "blocking"])
def test_a_graph_captured_before_any_instrumented_launch_records_its_replays(tmp_path, stream):
    # Nothing was allocated while a stream captured, so a GPU's first instrumented launch
    # being captured ran unrecorded at every replay. The ring is now allocated then, without
    # touching the stream being captured (which, when blocking, the legacy stream waits for).
    r = run_program(tmp_path, FIRST_LAUNCH_CAPTURED.replace("sys.argv[1]", repr(stream)))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
    root = load_hatchet(tmp_path / "first_capture.hatchet")[0]
    _, kernel = find_kernel_path(root, "graphed")
    assert kernel["metrics"]["count"] == 3, dump(root)
    assert find(kernel, "body")["metrics"]["count"] == 3 * 4 * 4, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_graph_launches_unrecorded", 0) == 0, stats


def test_the_intra_kernel_example_writes_what_the_readme_shows(tmp_path):
    # examples/intra_kernel.py, as the README runs it: a vector add (its kernel scope) and a
    # matmul with "load" and "mma" in its K loop (16 iterations, 8 warps, 64 CTAs), as a tree
    # and as a timeline; then proton-viewer -m normalized_cycles on the tree.
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "intra_kernel.py")
    with open(example) as f:
        r = run_program(tmp_path, f.read())
    assert r.returncode == 0, r.stderr[-3000:]
    root = load_hatchet(tmp_path / "intra_tree.hatchet")[0]
    step = find(root, "step")
    assert find(step, "vadd")["metrics"]["cycles"] > 0, dump(root)
    matmul = find(step, "matmul")
    assert [find(matmul, s)["metrics"]["count"] for s in ("load", "mma")] == [8192, 8192]
    events = load_hatchet(tmp_path / "intra_trace.chrome_trace")["traceEvents"]
    slices = [e["name"] for e in events if e.get("ph") == "X"]
    assert slices.count("load") == slices.count("mma") == 8192
    viewer = subprocess.run(
        [
            sys.executable,
            "-m",
            "proton.viewer.main",
            "-m",
            "normalized_cycles",
            "intra_tree.hatchet",
        ],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert viewer.returncode == 0, viewer.stderr
    assert "mma" in viewer.stdout and "load" in viewer.stdout and "vadd" in viewer.stdout
