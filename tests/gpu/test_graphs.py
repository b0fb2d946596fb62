"""CUDA graphs on a real GPU (issue 13, items 1-4): every replay of a captured graph is filed
under <replay scope>/<captured_at>/<capture context>, only in the sessions that recorded at
capture, with the launch metadata evaluated at capture; kernels launched inside a launch
metadata function go under __proton_launch_metadata/<kernel being launched>.

Exact counts and paths read from the written profile; no timing is asserted.
"""

import json

import proton
import pytest
from gpu_tree import dump, kernels_under, total_count
from proton_test_utils import find, load_hatchet, run_program


def counted_outside_torch_bookkeeping(root):
    """Every kernel counted, less the int64 fills torch.cuda.graph launches outside any scope
    when it captures (seen on the H100: one or two per capture, never inside a scope)."""
    bookkeeping = sum(
        c["metrics"].get("count", 0)
        for c in root["children"]
        if "FillFunctor<long>" in c["frame"]["name"]
    )
    return total_count(root) - bookkeeping


torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

META = "__proton_launch_metadata"
N = 1024


def foo_metadata(grid, kernel_metadata, args):
    n = args["n"]
    return {"name": "foo_test", "flops": 2 * n, "bytes": 12 * n, "my_metric": 1}


@triton.jit(launch_metadata=foo_metadata)
def foo(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def probing_metadata(grid, kernel_metadata, args):
    total = args["x"].sum()  # a torch reduction launched by the metadata function
    return {"name": "probed", "flops": 1, "probe_was_nonneg": int(total.item() >= 0)}


@triton.jit(launch_metadata=probing_metadata)
def probed_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def launch(kernel, x, y, out):
    kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)


@pytest.fixture
def stream():
    """The reproducer's side stream made current, the default stream restored after."""
    s = torch.cuda.Stream()
    torch.cuda.set_stream(s)
    yield s
    torch.cuda.synchronize()
    torch.cuda.set_stream(torch.cuda.default_stream())


def fn():
    """Two torch.ones (fill kernels), an add, and foo: four kernels."""
    a = torch.ones(N, device="cuda")
    b = torch.ones(N, device="cuda")
    c = a + b
    launch(foo, a, b, c)


def capture_three_iterations(g):
    with torch.cuda.graph(g):
        for i in range(3):
            with proton.scope(f"iter_{i}"):
                fn()


# Defect 1: the first capture of a session was missed (its replays had no <captured_at>, and
# Proton said the graph was captured before profiling started): g.reset() destroyed the
# graph before CUPTI delivered the replays' records, and its capture context went with it.
def test_first_capture_replays_keep_their_capture_context_after_reset(stream):
    fn()  # compile foo and warm torch up before profiling
    torch.cuda.synchronize()
    proton.start("first_capture", backend="cupti")
    fn()
    g = torch.cuda.CUDAGraph()
    capture_three_iterations(g)
    with proton.scope("test0"):
        g.replay()
    with proton.scope("test1"):
        g.replay()
    g.reset()
    capture_three_iterations(g)
    with proton.scope("test2"):
        g.replay()
    proton.finalize()
    root = load_hatchet("first_capture.hatchet")[0]
    for replay in ("test0", "test1", "test2"):
        captured = find(root, replay, "<captured_at>")
        assert [c["frame"]["name"] for c in find(root, replay)["children"]] == ["<captured_at>"], (
            dump(root)
        )
        for i in range(3):
            iteration = find(captured, f"iter_{i}")
            assert total_count(iteration) == 4, dump(root)
            assert ("foo", 1) in kernels_under(iteration), dump(root)
        assert total_count(find(root, replay)) == 12, dump(root)
    for i in range(3):  # captured launches did not run at capture
        assert total_count(find(root, f"iter_{i}")) == 0, dump(root)
    assert counted_outside_torch_bookkeeping(root) == 4 + 3 * 12, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats["graph_kernels_without_capture_context"] == 0


# Defect 2: a kernel captured while the session was deactivated (scope_b) must not be
# recorded at replay; scope_a and scope_c are.
def test_kernels_captured_while_deactivated_are_not_recorded_at_replay():
    x = torch.zeros(N, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    session = proton.start("deactivated_capture", backend="cupti")

    def fn_toggled(s):
        with proton.scope("scope_a"):
            x.add_(1)
        proton.deactivate(s)
        with proton.scope("scope_b"):
            x.add_(1)
        proton.activate(s)
        with proton.scope("scope_c"):
            x.add_(1)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), proton.scope("iter_0"):
        fn_toggled(session)
    with proton.scope("test0"):
        g.replay()
    proton.finalize()
    root = load_hatchet("deactivated_capture.hatchet")[0]
    captured = find(root, "test0", "<captured_at>", "iter_0")
    assert sorted(c["frame"]["name"] for c in captured["children"]) == ["scope_a", "scope_c"], dump(
        root
    )
    assert total_count(find(captured, "scope_a")) == 1, dump(root)
    assert total_count(find(captured, "scope_c")) == 1, dump(root)
    assert counted_outside_torch_bookkeeping(root) == 2, dump(root)


# Defect 3: launch metadata evaluated at capture (hook="triton") renames the kernel and adds
# its metrics at every replay, as for a direct launch; nothing is filed at capture.
def test_launch_metadata_at_capture_applies_to_every_replay():
    x, y, out = (torch.rand(N, device="cuda") for _ in range(3))
    launch(foo, x, y, out)
    torch.cuda.synchronize()
    proton.start("metadata_replay", backend="cupti", hook="triton")
    with proton.scope("direct"):
        launch(foo, x, y, out)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), proton.scope("iter_0"):
        launch(foo, x, y, out)
    with proton.scope("test0"):
        for _ in range(3):
            g.replay()
    proton.finalize()
    root = load_hatchet("metadata_replay.hatchet")[0]
    direct = find(root, "direct", "foo_test")["metrics"]
    assert direct["count"] == 1 and direct["flops"] == 2 * N and direct["bytes"] == 12 * N
    assert direct["my_metric"] == 1
    replayed = find(root, "test0", "<captured_at>", "iter_0")
    assert kernels_under(replayed) == [("foo_test", 3)], dump(root)
    m = find(replayed, "foo_test")["metrics"]
    assert m["flops"] == 3 * 2 * N and m["bytes"] == 3 * 12 * N and m["my_metric"] == 3
    assert find(root, "iter_0")["children"] == [], dump(root)  # nothing at capture


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_scalar_scope_metrics_given_in_a_capture_count_at_every_replay(data):
    # As triton.profiler files them: `bytes` given in a scope while the graph is captured is
    # added at each replay under <captured_at>, never at the capture (which runs nothing).
    x, y, out = (torch.rand(N, device="cuda") for _ in range(3))
    launch(foo, x, y, out)
    torch.cuda.synchronize()
    proton.start("scalar_replay", backend="cupti", data=data)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with proton.scope("captured", {"bytes": 8, "note": "x"}):
            launch(foo, x, y, out)
        proton.enter_scope("exited")
        launch(foo, x, y, out)
        proton.exit_scope("exited", metrics={"flops": 2.5})
    with proton.scope("eager", {"bytes": 1}):
        launch(foo, x, y, out)
    with proton.scope("test0"):
        for _ in range(3):
            g.replay()
    proton.finalize()
    if data == "tree":
        root = load_hatchet("scalar_replay.hatchet")[0]
        replayed = find(root, "test0", "<captured_at>", "captured")
        assert replayed["metrics"] == {"bytes": 24, "note": "x"}, dump(root)
        assert kernels_under(replayed) == [("foo", 3)], dump(root)
        exited = find(root, "test0", "<captured_at>", "exited")
        assert exited["metrics"] == {"flops": 7.5}, dump(root)
        assert find(root, "captured")["metrics"] == {}, dump(root)  # nothing at capture
        assert find(root, "eager")["metrics"]["bytes"] == 1
        assert root["proton_metadata"]["stats"]["tensor_metrics_dropped"] == 0
        return
    events = json.load(open("scalar_replay.chrome_trace"))["traceEvents"]

    # A scope with metrics is a "metric" slice named "<scope>: <name, value>, ...".
    def scope(e):
        return e.get("args", {}).get("call_stack", [None])[-1]

    replays = [e for e in events if scope(e) == "captured" and "bytes" in e["args"]]
    assert [e["args"]["bytes"] for e in replays] == [8, 8, 8], events
    assert {e["name"] for e in replays} == {"captured: <bytes, 8>, <note, x>"}
    assert all(
        e["args"]["call_stack"][-3:] == ["test0", "<captured_at>", "captured"] for e in replays
    )
    exits = [e for e in events if scope(e) == "exited" and "flops" in e["args"]]
    assert [e["args"]["flops"] for e in exits] == [2.5, 2.5, 2.5], events


def test_a_trace_draws_the_scopes_captured_with_a_graph_at_each_replay():
    x, y, out = (torch.rand(N, device="cuda") for _ in range(3))
    launch(foo, x, y, out)
    torch.cuda.synchronize()
    proton.start("graph_trace", backend="cupti", data="trace")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), proton.scope("iter_0"):
        launch(foo, x, y, out)
        with proton.scope("inner"):
            launch(foo, x, y, out)
    with proton.scope("test0"):
        for _ in range(3):
            g.replay()
    proton.finalize()
    events = json.load(open("graph_trace.chrome_trace"))["traceEvents"]
    graph_lanes = [
        e["tid"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name" and e["tid"].startswith("Graph: Stream ")
    ]
    assert len(graph_lanes) == 1, events  # the lane is named by a metadata event too
    ranges = [e for e in events if e["ph"] == "X" and e["tid"] == graph_lanes[0]]
    assert all(r["cat"] == "scope" for r in ranges), ranges
    assert [e["name"] for e in ranges] == ["<captured_at>", "iter_0", "inner"] * 3, ranges
    kernels = [
        e for e in events if e.get("cat") == "kernel" and "<captured_at>" in e["args"]["call_stack"]
    ]
    assert len(kernels) == 6
    for r in ranges:
        assert r["pid"] == "GPU 0" and r["tid"].startswith("Graph: Stream ")
        assert r["args"]["call_stack"][:3] == ["ROOT", "test0", "<captured_at>"]
        # Each range covers exactly the replay's kernels under it: 1 for inner, else 2.
        inside = [
            k
            for k in kernels
            if r["ts"] <= k["ts"] and k["ts"] + k["dur"] <= r["ts"] + r["dur"] + 1e-3
        ]
        assert len(inside) == (1 if r["name"] == "inner" else 2), (r, kernels)


# Defect 3, graphs on several streams: the capture forks onto a second stream and joins back;
# both nodes keep the metadata evaluated when they were captured.
def test_launch_metadata_at_capture_on_two_streams():
    x, y, out, out2 = (torch.rand(N, device="cuda") for _ in range(4))
    launch(foo, x, y, out)
    torch.cuda.synchronize()
    proton.start("metadata_streams", backend="cupti", hook="triton")
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), proton.scope("iter_0"):
        launch(foo, x, y, out)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch(foo, y, x, out2)
        torch.cuda.current_stream().wait_stream(side)
    with proton.scope("test0"):
        for _ in range(2):
            g.replay()
    proton.finalize()
    root = load_hatchet("metadata_streams.hatchet")[0]
    replayed = find(root, "test0", "<captured_at>", "iter_0")
    assert kernels_under(replayed) == [("foo_test", 4)], dump(root)
    m = find(replayed, "foo_test")["metrics"]
    assert m["flops"] == 4 * 2 * N and m["bytes"] == 4 * 12 * N and m["my_metric"] == 4
    assert counted_outside_torch_bookkeeping(root) == 4, dump(root)


# Item 4: kernels launched inside a launch_metadata function go under
# __proton_launch_metadata/<name of the kernel being launched>/<their kernel>.
def test_kernels_inside_launch_metadata_go_under_the_launched_kernels_name():
    x, y, out = (torch.rand(N, device="cuda") for _ in range(3))
    launch(probed_kernel, x, y, out)
    torch.cuda.synchronize()
    proton.start("inside_metadata", backend="cupti", hook="triton")
    with proton.scope("tri"):
        for _ in range(5):
            launch(probed_kernel, x, y, out)
    proton.finalize()
    root = load_hatchet("inside_metadata.hatchet")[0]
    tri = find(root, "tri")
    meta = find(tri, META)
    assert [c["frame"]["name"] for c in meta["children"]] == ["probed_kernel"], dump(root)
    probes = find(meta, "probed_kernel")
    assert sum(c for _, c in kernels_under(probes)) == 5, dump(root)  # one reduction each
    assert all(not c["children"] for c in probes["children"]), dump(root)
    assert find(tri, "probed")["metrics"]["count"] == 5
    assert find(tri, "probed")["metrics"]["flops"] == 5
    assert total_count(tri) == 10, dump(root)


FLUSHES_BESIDE_CAPTURES = """
import ctypes, json, sys, threading, torch, proton

CAPTURES, KERNELS = 40, 50
x = torch.ones(1 << 16, device="cuda")
recorded = proton.start("recorded")
flushed = proton.start("flushed")  # flushing it flushes the backend both sessions share
if "second_context" in sys.argv:
    # A second context on the device, with a kernel launched in it: flushes synchronise it
    # too, while the captures run on the primary context.
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx, module, noop, popped = (ctypes.c_void_p() for _ in range(4))
    ptx = b".version 7.0\\n.target sm_80\\n.address_size 64\\n.visible .entry noop()\\n{\\n ret;\\n}\\n"
    assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
    assert cuda.cuModuleLoadData(ctypes.byref(module), ptx) == 0
    assert cuda.cuModuleGetFunction(ctypes.byref(noop), module, b"noop") == 0
    assert cuda.cuLaunchKernel(noop, 1, 1, 1, 1, 1, 1, 0, None, None, None) == 0
    assert cuda.cuCtxSynchronize() == 0
    assert cuda.cuCtxPopCurrent_v2(ctypes.byref(popped)) == 0
results, done = [], threading.Event()

def capturer():
    stream = torch.cuda.Stream()
    try:
        with proton.scope("capturer"):
            for _ in range(CAPTURES):
                g = torch.cuda.CUDAGraph()
                try:
                    with torch.cuda.graph(g, stream=stream):  # global mode, PyTorch's default
                        for _ in range(KERNELS):
                            x.mul_(1.0)
                    g.replay()
                    results.append("ok")
                except RuntimeError as e:
                    results.append(str(e).splitlines()[0])
    finally:
        done.set()

thread = threading.Thread(target=capturer)
thread.start()
flushes = gives = 0
def give():  # a value of its own each time: one read before it landed would show
    global gives
    gives += 1
    with proton.scope("given", metrics={"tokens": torch.full((), gives, device="cuda")}):
        pass
while not done.is_set():
    give()  # read back by the flush
    proton.deactivate(flushed, flushing=True)
    proton.activate(flushed)
    flushes += 1
thread.join()
own = "ok"
give()  # still on the device at the flush in the capture below, read at finalize
# A blocking stream (PyTorch's own are not): the legacy stream waits for it, so anything on the
# legacy stream during its capture ends the capture.
handle = ctypes.c_void_p()
assert ctypes.CDLL("libcuda.so.1").cuStreamCreate(ctypes.byref(handle), 0) == 0
blocking = torch.cuda.ExternalStream(handle.value)
try:
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=blocking):
        x.add_(1.0)
        proton.deactivate(flushed, flushing=True)  # inside this thread's own capture
    proton.activate(flushed)
    g.replay()
except RuntimeError as e:
    own = str(e).splitlines()[0]
torch.cuda.synchronize()
proton.finalize()
print(json.dumps({"results": results, "own": own, "flushes": flushes, "gives": gives}))
"""


@pytest.mark.parametrize("contexts", ["one_context", "second_context"])
def test_flushes_leave_captures_alone_on_other_threads_and_their_own(tmp_path, contexts):
    # A flush synchronised every context, which ends any CUDA graph being captured on its
    # device, on any thread and in any capture mode. Now it waits for other threads' captures
    # to end (a capture beginning meanwhile waits for the synchronisation) and does not
    # synchronise inside the flushing thread's own capture (counted). Tensor metric values are
    # read back on a stream of Proton's own, not the legacy stream: one given before the
    # thread's own capture (on a blocking stream, which the legacy stream waits for) is left on
    # the device by the flush inside it, and filed at finalize. With a second context, the
    # flushes synchronise it too while the captures run on the primary one, and the main
    # thread's own capture keeps it from synchronising either.
    r = run_program(FLUSHES_BESIDE_CAPTURES, tmp_path, after=(contexts,), timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["results"] == ["ok"] * 40 and out["own"] == "ok", (out, r.stderr[-2000:])
    assert out["flushes"] > 0
    root = load_hatchet(tmp_path / "recorded.hatchet")[0]
    stats = dict(root["proton_metadata"]["stats"])
    # Inside its own capture the main thread synchronises neither context.
    assert stats["flush_syncs_skipped_for_captures"] == (2 if contexts == "second_context" else 1)
    assert stats.get("flush_timeouts", 0) == 0, stats
    assert stats["tensor_metric_reads_put_off_for_captures"] == 1, stats
    assert stats.get("tensor_metrics_dropped", 0) == 0, stats
    gives = out["gives"]
    assert gives == out["flushes"] + 1
    assert find(root, "given")["metrics"]["tokens"] == gives * (gives + 1) // 2

    # Every replay's 50 kernels, under the thread's scope; the main thread's replay's one.
    # Not torch.full's fills nor Proton's copy of each value given (<metric>).
    def not_fills(node):
        return sum(
            c
            for name, c in kernels_under(node)
            if "FillFunctor<long>" not in name and name != "<metric>"
        )

    metric_copies = [c for name, c in kernels_under(find(root, "given")) if name == "<metric>"]
    assert sum(metric_copies) == gives

    assert not_fills(find(root, "capturer")) == 40 * 50, dump(root)
    noop = 1 if contexts == "second_context" else 0  # the kernel launched in the second context
    assert not_fills(root) == 40 * 50 + 1 + noop, dump(root)
