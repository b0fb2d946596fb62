"""CUPTI backend on a real GPU: exact kernel counts and attribution.

Every test compares exact counts read from the written profile; times are only compared with
CUDA events in the accuracy test, never against fixed numbers.
"""

import json
import threading

import proton
import pytest
from gpu_tree import dump, kernels_under, only_kernel, total_count
from proton_test_utils import find, load_hatchet, run_python

torch = pytest.importorskip("torch")


@pytest.fixture
def x():
    t = torch.zeros(4096, device="cuda")
    torch.cuda.synchronize()
    return t


def test_exact_count_for_n_launches(x):
    proton.start("n", backend="cupti")
    with proton.scope("loop"):
        for _ in range(1000):
            x.add_(1)
    proton.finalize()
    root = load_hatchet("n.hatchet")[0]
    name, metrics = only_kernel(find(root, "loop"))
    assert "elementwise" in name
    assert metrics["count"] == 1000
    assert metrics["time (ns)"] > 0
    assert metrics["device_id"] == "0" and metrics["device_type"] == "CUDA"
    assert total_count(root) == 1000
    assert int(x[0].item()) == 1000
    stats = dict(root["proton_metadata"]["stats"])
    assert stats["kernel_records_unmatched"] == 0


def test_scopes_nested_three_deep(x):
    proton.start("nested", backend="cupti")
    for _ in range(3):
        with proton.scope("a"), proton.scope("b"), proton.scope("c"):
            for _ in range(10):
                x.mul_(1.0)
        x.add_(1)
    proton.finalize()
    root = load_hatchet("nested.hatchet")[0]
    assert only_kernel(find(root, "a", "b", "c"))[1]["count"] == 30
    assert total_count(find(root, "a")) == 30
    assert total_count(root) == 33


def test_triton_kernel_by_name(x):
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def proton_add_kernel(ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(ptr + offs, mask=offs < n)
        tl.store(ptr + offs, v + 1, mask=offs < n)

    proton_add_kernel[(4,)](x, x.numel(), BLOCK=1024)  # compile before profiling
    torch.cuda.synchronize()
    proton.start("triton", backend="cupti")
    with proton.scope("tri"):
        for _ in range(20):
            proton_add_kernel[(4,)](x, x.numel(), BLOCK=1024)
    proton.finalize()
    root = load_hatchet("triton.hatchet")[0]
    assert only_kernel(find(root, "tri"))[0] == "proton_add_kernel"
    assert only_kernel(find(root, "tri"))[1]["count"] == 20


def test_two_sessions_split_by_activate_deactivate(x):
    a = proton.start("a", backend="cupti")
    b = proton.start("b", backend="cupti")
    for _ in range(5):
        x.add_(1)
    proton.deactivate(b)
    for _ in range(7):
        x.add_(1)
    proton.activate(b)
    proton.deactivate(a)
    for _ in range(3):
        x.add_(1)
    proton.finalize()
    assert total_count(load_hatchet("a.hatchet")[0]) == 12
    assert total_count(load_hatchet("b.hatchet")[0]) == 8


def test_records_after_deactivate_stay_with_the_launch(x):
    y = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    proton.start("late", backend="cupti")
    with proton.scope("slow"):
        for _ in range(5):
            y = y @ y * 1e-3  # still running when we deactivate
    proton.deactivate(flushing=True)
    x.add_(1)  # not recorded: inactive
    proton.finalize()
    root = load_hatchet("late.hatchet")[0]
    assert total_count(find(root, "slow")) == 10, dump(root)  # 5 matmuls + 5 scalings
    assert total_count(root) == 10, dump(root)


def test_four_threads_two_streams():
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    bufs = [torch.zeros(1024, device="cuda") for _ in range(4)]
    torch.cuda.synchronize()
    proton.start("threads", backend="cupti")

    def work(i):
        with proton.scope(f"t{i}"), torch.cuda.stream(streams[i % 2]):
            for _ in range(50):
                bufs[i].add_(1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = load_hatchet("threads.hatchet")[0]
    for i in range(4):
        assert only_kernel(find(root, f"t{i}"))[1]["count"] == 50
    assert total_count(root) == 200


def test_cuda_graph_replayed_ten_times(x):
    y = torch.zeros_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up outside the graph, as torch requires
            y.copy_(x)
            y.add_(1)
            y.mul_(2)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    proton.start("graph", backend="cupti")
    g = torch.cuda.CUDAGraph()
    with proton.scope("capture"), torch.cuda.graph(g):
        y.add_(1)
        y.mul_(2)
        y.sqrt_()
    with proton.scope("replay"):
        for _ in range(10):
            g.replay()
    proton.finalize()
    root = load_hatchet("graph.hatchet")[0]
    captured = find(root, "replay", "<captured_at>", "capture")
    counts = sorted(c for _, c in kernels_under(captured))
    assert counts == [10, 10, 10], dump(root)
    # Captured launches never ran under "capture"; only torch's own set-up kernels did.
    capture = find(root, "capture")
    ran_at_capture = {name for name, _ in kernels_under(capture)}
    assert not ran_at_capture & {name for name, _ in kernels_under(captured)}, dump(root)
    assert total_count(root) == 30 + total_count(capture)


def test_graph_captured_before_start_is_still_counted(x):
    y = torch.zeros_like(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            y.add_(1)
            y.mul_(2)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y.add_(1)
        y.mul_(2)
    torch.cuda.synchronize()
    proton.start("precaptured", backend="cupti")
    with proton.scope("replay"):
        for _ in range(10):
            g.replay()
    proton.finalize()
    root = load_hatchet("precaptured.hatchet")[0]
    assert total_count(find(root, "replay")) == 20
    stats = dict(root["proton_metadata"]["stats"])
    # The profile counts its own session's losses.
    assert stats["graph_kernels_without_capture_context"] == 20


def test_trace_kernels_on_stream_lanes_with_flows(x):
    proton.start("trace", data="trace", backend="cupti")
    with proton.scope("step"):
        for _ in range(5):
            x.add_(1)
    proton.finalize()
    with open("trace.chrome_trace") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 5
    for k in kernels:
        assert k["ph"] == "X" and k["pid"] == "GPU 0" and k["dur"] > 0
        assert k["tid"].startswith("Stream ")
        assert k["args"]["call_stack"][:2] == ["ROOT", "step"]
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == 5 and len(finishes) == 5
    assert sorted(e["id"] for e in starts) == sorted(e["id"] for e in finishes)
    scopes = [e for e in events if e.get("cat") == "scope" and e["name"] == "step"]
    assert len(scopes) == 1
    # Launches happen inside the CPU scope, on the same clock.
    for s in starts:
        assert scopes[0]["ts"] <= s["ts"] <= scopes[0]["ts"] + scopes[0]["dur"]


def test_device_block_describes_the_gpu(x):
    proton.start("dev", backend="cupti")
    x.add_(1)
    proton.finalize()
    devices = load_hatchet("dev.hatchet")[1]
    d = devices["CUDA"]["0"]
    props = torch.cuda.get_device_properties(0)
    assert d["arch"] == f"{props.major}{props.minor}"
    assert d["num_sms"] == props.multi_processor_count
    assert d["clock_rate"] > 0 and d["memory_clock_rate"] > 0 and d["bus_width"] > 0


def test_phase_completes_after_flush(x):
    s = proton.start("phases", backend="cupti")
    for _ in range(10):
        x.add_(1)
    assert proton.data.advance_phase(s) == 1
    x.add_(1)
    proton.deactivate(s, flushing=True)
    assert proton.data.is_phase_complete(s, 0)
    assert not proton.data.is_phase_complete(s, 1)
    phase0 = proton.data.get(s, 0)[0]
    assert total_count(phase0) == 10
    proton.finalize()


def test_kernel_time_matches_cuda_events():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    proton.start("acc", backend="cupti")
    # The first launches of a session set CUPTI up on the host while the GPU waits: outside
    # the events, which are to time the kernels, not that.
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with proton.scope("mm"):
        begin.record()
        for _ in range(20):
            a @ a
        end.record()
    torch.cuda.synchronize()
    proton.finalize()
    events_ns = begin.elapsed_time(end) * 1e6
    root = load_hatchet("acc.hatchet")[0]
    mm = find(root, "mm")
    assert total_count(mm) == 20
    kernel_ns = sum(c["metrics"]["time (ns)"] for c in mm["children"])
    assert abs(kernel_ns - events_ns) / events_ns < 0.02, (kernel_ns, events_ns)


NVTX_PROGRAM = """
import torch, proton
x = torch.zeros(1024, device="cuda"); torch.cuda.synchronize()
proton.start("nvtx", backend="cupti")
torch.cuda.nvtx.range_push("outer")
for _ in range(5):
    x.add_(1)
torch.cuda.nvtx.range_push("inner")
x.mul_(2)
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_pop()
x.add_(1)
proton.finalize()
"""


def test_nvtx_ranges_become_frames(tmp_path):
    r = run_python(NVTX_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    root = load_hatchet(tmp_path / "nvtx.hatchet")[0]
    outer = find(root, "outer")
    assert sum(c for _, c in kernels_under(outer)) == 6
    assert total_count(find(outer, "inner")) == 1
    assert total_count(root) == 7


COEXIST_PROGRAM = """
import torch, proton
x = torch.zeros(1024, device="cuda"); torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
    x.add_(1)
    try:
        proton.start("clash", backend="cupti")
        print("STARTED")
    except proton.BackendUnavailableError as e:
        print("ERROR", e)
    x.add_(1)
torch.cuda.synchronize()
print("STILL RUNNING", int(x[0].item()))
"""


def test_another_cupti_client_is_a_clear_error(tmp_path):
    r = run_python(COEXIST_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ERROR [PROTON]" in r.stdout, r.stdout + r.stderr
    assert "another CUPTI client" in r.stdout
    assert "STILL RUNNING 2" in r.stdout


AFTER_TORCH_PROFILER_PROGRAM = """
import torch, proton
x = torch.zeros(1024, device="cuda"); torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
    x.add_(1)
torch.cuda.synchronize()
try:
    proton.start("after", backend="cupti")
    print("STARTED")
    proton.finalize()
except proton.BackendUnavailableError as e:
    print("ERROR", e)
x.add_(1)
print("STILL RUNNING", int(x[0].item()))
"""


def test_after_a_torch_profiler_block_the_error_says_pytorch_keeps_cupti(tmp_path):
    # PyTorch keeps its CUPTI subscription once a profile with CUDA activities has run: the
    # message must not tell the user to leave a block that has already ended.
    r = run_python(AFTER_TORCH_PROFILER_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "STILL RUNNING 2" in r.stdout
    if "STARTED" not in r.stdout:
        assert "also after its block has ended" in r.stdout, r.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_kernels_on_two_gpus_keep_their_device():
    xs = [torch.zeros(1024, device=f"cuda:{d}") for d in range(2)]
    for d in range(2):
        torch.cuda.synchronize(d)
    proton.start("two", backend="cupti")
    for d in range(2):
        with proton.scope(f"gpu{d}"):
            for _ in range(10 + d):
                xs[d].add_(1)
    proton.finalize()
    root, devices = load_hatchet("two.hatchet")
    for d in range(2):
        name, metrics = only_kernel(find(root, f"gpu{d}"))
        assert metrics["count"] == 10 + d
        assert metrics["device_id"] == str(d)
    assert sorted(devices["CUDA"]) == ["0", "1"]
