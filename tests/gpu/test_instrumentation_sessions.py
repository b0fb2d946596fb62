"""backend="instrumentation" through the rest of the session API: deactivate and activate,
in-memory data and phases, the decorator, sessions one after another with other modes, and
the command line. Counts are exact: one per warp that ran a scope, per recorded launch."""

import json
import os

import proton
import pytest
from gpu_tree import dump
from proton_test_utils import find, load_hatchet, run_interpreter, run_program

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
from scoped_kernels import counted_kernel  # noqa: E402 - after the skips above

GPU_TESTS = os.path.dirname(os.path.abspath(__file__))  # scoped_kernels, for the programs


CTAS, WARPS = 4, 4  # 16 warps per launch


def launch(out, times=1):
    for _ in range(times):
        counted_kernel[(CTAS,)](out, N=4, num_warps=WARPS)
    torch.cuda.synchronize()


def slice_names(chrome_trace_path):
    """The names of a trace file's slices ("X" events), in file order."""
    events = load_hatchet(chrome_trace_path)["traceEvents"]
    return [e["name"] for e in events if e.get("ph") == "X"]


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


def test_a_binary_compiled_in_a_session_still_launches_after_it():
    # The JIT returns the CompiledKernel it launched; a program may keep it and launch it by
    # hand. Compiled in the session, it asks for a profile buffer at every launch, which
    # Triton's own null allocator refuses with an exception after finalize(): it gets none.
    out = torch.zeros(CTAS, device="cuda")
    proton.start("kept_binary", backend="instrumentation")
    compiled = counted_kernel[(CTAS,)](out, N=4, num_warps=WARPS)
    torch.cuda.synchronize()
    proton.finalize()
    assert compiled.metadata.profile_scratch_size > 0
    expected = out.clone()
    out.zero_()
    compiled[(CTAS, 1, 1)](out, 4)
    torch.cuda.synchronize()
    assert torch.equal(out, expected) and expected[1] != 0
    assert work_counts(load_hatchet("kept_binary.hatchet")[0]) == (1, CTAS * WARPS)


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
    assert slice_names("then_trace.chrome_trace").count("work") == CTAS * WARPS
    assert work_counts(load_hatchet("tree_again.hatchet")[0]) == (4, 4 * 16)


PROGRAM = """
import torch
from scoped_kernels import counted_kernel

out = torch.empty(8, device="cuda")
for _ in range(3):
    counted_kernel[(8,)](out, N=4, num_warps=2)
torch.cuda.synchronize()
raise SystemExit(7)  # the program's own exit code, kept
"""


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_the_command_line_instruments_a_whole_program(tmp_path, data):
    command = ("-m", "proton", "-b", "instrumentation", "-d", data, "-n", "cli")
    r = run_program(PROGRAM, tmp_path, before=command, paths=(GPU_TESTS,))
    assert r.returncode == 7, r.stderr[-3000:]
    if data == "tree":
        root = load_hatchet(tmp_path / "cli.hatchet")[0]
        assert work_counts(root) == (3, 3 * 8 * 2), dump(root)
    else:
        assert slice_names(tmp_path / "cli.chrome_trace").count("work") == 3 * 8 * 2


SMALL_RING = """
import torch, proton
from scoped_kernels import counted_kernel

out = torch.empty(4096, device="cuda")
for data, ctas, launches in (("tree", 4096, 20), ("trace", 4, 100)):
    proton.start(f"small_{data}", backend="instrumentation", data=data)
    for _ in range(launches):
        counted_kernel[(ctas,)](out, N=4, num_warps=4)
    torch.cuda.synchronize()
    proton.finalize()
print("ok")
"""


def run_with_a_1mb_ring(program, tmp_path, after=()):
    """Runs `program` with a 1 MB ring (PROTON_INSTRUMENTATION_RING_MB=1), which its launches
    fill again and again; its stdout, once it exited with 0."""
    ring = {"PROTON_INSTRUMENTATION_RING_MB": "1"}
    r = run_program(program, tmp_path, after=after, env=ring, paths=(GPU_TESTS,))
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_a_small_ring_drains_often_and_loses_nothing(tmp_path):
    # PROTON_INSTRUMENTATION_RING_MB=1: the tree's 20 launches of 4096 CTAs (a CTA record
    # each) and the trace's 100 launches of 16 warps fill the ring several times over; every
    # launch is still recorded, exactly.
    assert run_with_a_1mb_ring(SMALL_RING, tmp_path).strip().endswith("ok")
    root = load_hatchet(tmp_path / "small_tree.hatchet")[0]
    assert work_counts(root) == (20, 20 * 4096 * 4), dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_ring_full_wait_us", 0) > 0, stats
    assert stats.get("instrumentation_launches_unrecorded", 0) == 0, stats
    assert slice_names(tmp_path / "small_trace.chrome_trace").count("work") == 100 * 4 * 4


CROSS_THREAD_CAPTURE = """
import ctypes, json, sys, threading, torch, proton
from scoped_kernels import counted_kernel

CAPTURES, DATA = 40, sys.argv[1]
GRID = 4096 if DATA == "tree" else 4  # a trace's 4 CTAs take about as much ring
small, big = torch.empty(4, device="cuda"), torch.empty(GRID, device="cuda")
counted_kernel[(4,)](small, N=4, num_warps=4)  # compiled before the session
torch.cuda.synchronize()
proton.start("cross_thread", backend="instrumentation", data=DATA)
results, graphs, done = [], [], threading.Event()

cuda = ctypes.CDLL("libcuda.so.1")

def launch_on(stream):
    with torch.cuda.stream(stream):
        counted_kernel[(4,)](small, N=4, num_warps=4)

def capturer():
    # Each round, while the main thread's launches fill the ring: eager launches on the capture
    # stream, on a side stream and on a stream then destroyed; a capture (global mode,
    # PyTorch's default) of a launch on the capture stream and one on the side stream, which
    # joins the capture by waiting for it; a replay.
    stream, side = torch.cuda.Stream(), torch.cuda.Stream()
    try:
        with proton.scope("capturer"):
            for _ in range(CAPTURES):
                launch_on(stream)
                launch_on(side)
                handle = ctypes.c_void_p()
                assert cuda.cuStreamCreate(ctypes.byref(handle), 1) == 0
                launch_on(torch.cuda.ExternalStream(handle.value))
                assert cuda.cuStreamDestroy_v2(handle) == 0
                g = torch.cuda.CUDAGraph()
                try:
                    with torch.cuda.graph(g, stream=stream):
                        counted_kernel[(4,)](small, N=4, num_warps=4)
                        side.wait_stream(stream)
                        launch_on(side)
                        stream.wait_stream(side)
                    g.replay()
                    graphs.append(g)
                    results.append("ok")
                except RuntimeError as e:
                    results.append(str(e).splitlines()[0])
    finally:
        done.set()

thread = threading.Thread(target=capturer)
thread.start()  # outside "launcher": a thread takes the scopes open where it starts
launches = 0
with proton.scope("launcher"):
    while not done.is_set():
        counted_kernel[(GRID,)](big, N=4, num_warps=4)
        launches += 1
thread.join()
torch.cuda.synchronize()
proton.finalize()
print(json.dumps({"results": results, "launches": launches}))
"""


def summed(node, name, metric="count"):
    """The sum of `metric` over every node called `name` at or below node."""
    own = node["metrics"].get(metric, 0) if node["frame"]["name"] == name else 0
    return own + sum(summed(c, name, metric) for c in node["children"])


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_ring_drains_leave_a_capture_on_another_thread_alone(tmp_path, data):
    # One thread captures CUDA graphs (PyTorch's global mode, a side stream joining each
    # capture) while another fills a 1 MB ring again and again. A drain synchronised the
    # context, which ends a capture under way on any thread (on an H100, 16 of 40 captures
    # failed with the tree; an H200 probe saw 0 of 300 survive). Drains now wait for the
    # launches' streams, and for a mark recorded on a stream as it begins or joins a capture
    # or is destroyed; a full trace ring no longer flushes either.
    stdout = run_with_a_1mb_ring(CROSS_THREAD_CAPTURE, tmp_path, after=(data,))
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["results"] == ["ok"] * 40, out["results"][:3]
    launches = out["launches"]
    if data == "trace":
        trace = load_hatchet(tmp_path / "cross_thread.chrome_trace")
        stats = dict(trace["otherData"]["proton_metadata"]["stats"])
        # A trace replay that finds the ring full runs unrecorded (counted): its drain needs
        # kernel records, which its launch callback cannot wait for.
        recorded = 200 - stats["instrumentation_graph_launches_unrecorded"] + launches
        assert slice_names(tmp_path / "cross_thread.chrome_trace").count("work") == recorded * 16
    else:
        root = load_hatchet(tmp_path / "cross_thread.hatchet")[0]
        stats = dict(root["proton_metadata"]["stats"])
        assert stats["instrumentation_graph_launches_unrecorded"] == 0, stats
        # Every launch and replay filed once: 40 x (3 eager launches and a replay of 2) of 4
        # CTAs on the capturing thread, the main thread's of 4096 CTAs; 4 warps each.
        assert summed(find(root, "capturer"), "counted_kernel") == 200, dump(root)
        assert summed(find(root, "launcher"), "counted_kernel") == launches, dump(root)
        assert summed(root, "work") == (200 * 4 + launches * 4096) * 4, (stats, dump(root))
    assert stats["instrumentation_ring_drains"] > 10, stats
    assert stats["instrumentation_drains_waiting_for_context"] == 0, stats
    assert stats["instrumentation_launches_unrecorded"] == 0, stats
    assert stats.get("flush_timeouts", 0) == 0, stats


TRACE_REPLAY_LOOP = """
import torch, proton
from scoped_kernels import counted_kernel

small = torch.empty(4, device="cuda")
counted_kernel[(4,)](small, N=4, num_warps=4)  # compiled before the session
torch.cuda.synchronize()
session = proton.start("replay_loop", backend="instrumentation", data="trace")
counted_kernel[(4,)](small, N=4, num_warps=4)  # eager: the replays' slices go on its clock
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=torch.cuda.Stream()):
    counted_kernel[(4,)](small, N=4, num_warps=4)
proton.deactivate(session, flushing=True)  # the eager launch filed: the ring holds replays only
proton.activate(session)
for _ in range(200):
    g.replay()
torch.cuda.synchronize()
proton.finalize()
print("ok")
"""


def test_a_loop_of_trace_replays_drains_its_ring_and_records_every_replay(tmp_path):
    # 200 replays of a 16-warp trace launch fill a 1 MB ring several times, and nothing but a
    # replay can drain it. A trace replay that found the ring full ran unrecorded, and so did
    # every replay after it until a flush; now it drains the ring (no eager launch in it waits
    # for its kernel record).
    assert run_with_a_1mb_ring(TRACE_REPLAY_LOOP, tmp_path).strip().endswith("ok")
    path = tmp_path / "replay_loop.chrome_trace"
    stats = dict(load_hatchet(path)["otherData"]["proton_metadata"]["stats"])
    assert stats["instrumentation_graph_launches_unrecorded"] == 0, stats
    assert stats["instrumentation_ring_drains"] >= 5, stats
    assert slice_names(path).count("work") == (1 + 200) * 16


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
    r = run_program(FIRST_LAUNCH_CAPTURED, tmp_path, after=(stream,))
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
        r = run_program(f.read(), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    root = load_hatchet(tmp_path / "intra_tree.hatchet")[0]
    step = find(root, "step")
    assert find(step, "vadd")["metrics"]["cycles"] > 0, dump(root)
    matmul = find(step, "matmul")
    assert [find(matmul, s)["metrics"]["count"] for s in ("load", "mma")] == [8192, 8192]
    slices = slice_names(tmp_path / "intra_trace.chrome_trace")
    assert slices.count("load") == slices.count("mma") == 8192
    # The full layout's warp slices: the vadd's 1024 CTAs x 4 warps and the matmul's 64 x 8
    # warps, each a kernel-wide slice, and the matmul's scopes. Triton's: the scopes only.
    warps = [e for e in load_hatchet(tmp_path / "intra_trace.chrome_trace")["traceEvents"]]
    warps = [e for e in warps if str(e.get("tid", "")).startswith("warp ")]
    assert len(warps) == 4096 + 512 + 8192 * 2
    triton_events = load_hatchet(tmp_path / "intra_trace_triton.chrome_trace")["traceEvents"]
    assert sorted({e["name"] for e in triton_events}) == ["load", "mma"]
    assert len(triton_events) == 8192 * 2
    viewer = run_interpreter(
        ["-m", "proton.viewer.main", "-m", "normalized_cycles", "intra_tree.hatchet"], tmp_path
    )
    assert viewer.returncode == 0, viewer.stderr
    assert "mma" in viewer.stdout and "load" in viewer.stdout and "vadd" in viewer.stdout
    # Cycles are exclusive (each node's own scope), so the viewer shows the file's values as
    # they are: the matmul's own, not its own plus its scopes' (which it already contains).
    aggregation = root["proton_metadata"]["metric_aggregation"]["exclusive"]
    assert {"cycles", "normalized_cycles"} <= set(aggregation), aggregation
    shown = {line.split()[-1]: line.split()[0] for line in viewer.stdout.splitlines()[1:8]}
    for name, node in (("matmul", matmul), ("load", find(matmul, "load"))):
        assert shown[name] == f"{node['metrics']['normalized_cycles']:.3f}", viewer.stdout
    # One launch: its average time is its time, whatever its scopes' run counts (16384).
    viewer = run_interpreter(
        ["-m", "proton.viewer.main", "-m", "avg_time/ns,time/ns", "intra_tree.hatchet"], tmp_path
    )
    assert viewer.returncode == 0, viewer.stderr
    row = next(line.split() for line in viewer.stdout.splitlines() if line.endswith(" matmul"))
    assert float(row[0]) == float(row[1]) == matmul["metrics"]["time (ns)"], viewer.stdout


ACROSS_A_DEVICE_RESET = """
import faulthandler, sys
faulthandler.dump_traceback_later(120, exit=True)  # a hang fails with every thread's stack
import ctypes, json, torch, triton, triton.language as tl, proton
import proton.language as pl
from scoped_kernels import counted_kernel


@triton.jit
def after_reset_kernel(out, N: tl.constexpr):  # loaded into the context made after the reset
    v = tl.program_id(0).to(tl.float32)
    with pl.scope("work"):
        for _ in tl.static_range(N):
            v = v * 1.5 + 1.0
    tl.store(out + tl.program_id(0), v)


proton.start("reset", backend="instrumentation")
out = torch.empty(4, device="cuda")
for _ in range(5):
    counted_kernel[(4,)](out, N=4, num_warps=4)
torch.cuda.synchronize()
del out
torch.cuda.empty_cache()
assert ctypes.CDLL("libcudart.so.13").cudaDeviceReset() == 0
out = torch.empty(4, device="cuda")
for _ in range(3):
    after_reset_kernel[(4,)](out, N=4, num_warps=4)
torch.cuda.synchronize()
proton.finalize()
print(json.dumps(out.tolist()))
"""


def test_a_device_reset_keeps_the_scopes_before_it_and_records_those_after_it(tmp_path):
    # The reset destroys the context and its memory, and the next context gets the same handle:
    # Proton's ring of that context is drained when its destroy begins, and the launches after
    # it record into a ring of the new context, not into the freed one.
    r = run_program(ACROSS_A_DEVICE_RESET, tmp_path, paths=(GPU_TESTS,), timeout=240)
    # A hang (seen once in a full GPU run, not reproduced alone) exits with the stacks above.
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(json.loads(r.stdout.strip().splitlines()[-1])) == 4
    root = load_hatchet(tmp_path / "reset.hatchet")[0]
    for name, launches in (("counted_kernel", 5), ("after_reset_kernel", 3)):
        kernel = find(root, name)
        assert kernel["metrics"]["count"] == launches, dump(root)
        assert find(kernel, "work")["metrics"]["count"] == launches * CTAS * WARPS, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_launches_unrecorded", 0) == 0, stats


ANOTHER_THREAD_ACROSS_A_RESET = """
import ctypes, queue, threading, torch, triton, triton.language as tl, proton


@triton.jit
def now(x):
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def spin_kernel(ns, TAG: tl.constexpr):  # TAG: a binary for each context
    # No pointer: after the reset, PyTorch's allocator may hand out memory of the old context.
    x = tl.program_id(0)
    start = now(x)
    t = start
    while t - start < ns:
        t = now(x)


jobs, done = queue.Queue(), queue.Queue()


def worker():  # launches on the context before the reset, then on the one made after it
    while (job := jobs.get()) is not None:
        try:
            job()
        finally:
            done.put(None)


cudart = ctypes.CDLL("libcudart.so.13")
thread = threading.Thread(target=worker)
thread.start()
proton.start("reset_thread")
torch.cuda.init()
jobs.put(lambda: spin_kernel[(1,)](1000, TAG=0))
done.get()
assert cudart.cudaDeviceSynchronize() == 0 and cudart.cudaDeviceReset() == 0
assert cudart.cudaFree(None) == 0  # the new context, made on this thread: no launch here


def spin_on_the_new_context():
    # The runtime makes the new primary context current on this thread too.
    assert cudart.cudaSetDevice(0) == 0 and cudart.cudaFree(None) == 0
    spin_kernel[(1,)](3_000_000_000, TAG=1)


jobs.put(spin_on_the_new_context)
done.get()
proton.finalize()  # the worker's kernel is still spinning
jobs.put(None)
thread.join()
"""


def test_a_thread_launching_across_another_threads_reset_has_its_kernels_waited_for(tmp_path):
    # The new context has the old one's handle, which the worker thread had launched on: its
    # next launch must still tell Proton of the context, or the flush does not wait for the
    # kernel (3 s, past the flush's 2 s wait for records), whose record then comes without an
    # end. (Before, the profile had the 2 launches taking 1952 ns in all.)
    r = run_program(ANOTHER_THREAD_ACROSS_A_RESET, tmp_path, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    root = load_hatchet(tmp_path / "reset_thread.hatchet")[0]
    kernel = find(root, "spin_kernel")
    assert kernel["metrics"]["count"] == 2, dump(root)
    # CUPTI's clock and the GPU's %globaltimer that the kernel spins on differ by some ppm (an
    # H200 read 2999965578 ns); without the fix the time read about 2 us.
    assert kernel["metrics"]["time (ns)"] >= 2_900_000_000, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("flush_timeouts", 0) == 0, stats
    assert stats.get("kernel_records_untimed", 0) == 0, stats
