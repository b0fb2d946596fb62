"""Tensor metrics on a real GPU (issue 13, item 5): a metric given as a CUDA tensor is
copied on the current stream with no host synchronisation and read back at flush; inside a
CUDA graph each replay records the value the tensor holds at that replay; replays while a
session is inactive record nothing; trace mode and periodic flushing carry the values too.

Exact values read from the written profiles; no timing is asserted.
"""

# Nested `with` blocks are kept: capture and scope nesting is what these tests check.
# ruff: noqa: SIM117

import json

import proton
import pytest
from proton import _C
from proton_test_utils import find, load_hatchet, run_program

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

N = 1024


def tokens_metadata(grid, kernel_metadata, args):
    return {"name": "add_tokens", "tokens": args["x"][0].to(torch.int64), "flops": 2}


@triton.jit(launch_metadata=tokens_metadata)
def add_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + 1, mask=m)


def dropped():
    return dict(_C.stats()).get("tensor_metrics_dropped", 0)


def captured(root, replay_scope, *path):
    return find(root, replay_scope, "<captured_at>", *path)


def test_scope_tensor_values_sum_as_given_without_a_sync():
    before = dropped()
    n = torch.zeros((), dtype=torch.int64, device="cuda")
    v = torch.zeros(3, dtype=torch.float32, device="cuda")
    proton.start("eager", backend="cupti")
    for i in range(1, 4):
        n.fill_(i)
        v.copy_(torch.tensor([1.0, 2.0, 0.5], device="cuda") * i)
        with proton.scope("step", {"n": n, "v": v, "half": n.to(torch.float16)}):
            pass
        n.fill_(100)  # after the scope: not recorded
    proton.enter_scope("manual", metrics={"p (pty)": n})
    n.fill_(7)
    proton.exit_scope("manual", metrics={"e (exc)": n.to(torch.int32)})
    proton.finalize()
    root = load_hatchet("eager.hatchet")[0]
    step = find(root, "step")["metrics"]
    assert (step["n"], step["v"], step["half"]) == (6, [6.0, 12.0, 3.0], 6.0)
    manual = find(root, "manual")["metrics"]
    assert (manual["p"], manual["e"]) == (100, 7)
    assert dropped() == before


def test_each_graph_replay_records_the_value_at_that_replay():
    stream = torch.cuda.Stream()
    t = torch.zeros((), dtype=torch.int64, device="cuda")
    x = torch.ones(N, device="cuda")
    with torch.cuda.stream(stream):
        proton.start("replays", backend="cupti")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            with proton.scope("iter", {"v": t}):
                x.add_(1)
        for value in (1, 2, 3):
            t.fill_(value)
            with proton.scope("replay"):
                g.replay()
        proton.deactivate()
        t.fill_(1000)
        g.replay()  # while inactive: must not leak into the next replay
        proton.activate()
        t.fill_(5)
        with proton.scope("after"):
            g.replay()
    proton.finalize()
    root = load_hatchet("replays.hatchet")[0]
    assert captured(root, "replay", "iter")["metrics"]["v"] == 6
    assert captured(root, "after", "iter")["metrics"]["v"] == 5


def test_launch_metadata_tensor_is_recorded_eagerly_and_per_replay():
    # Each value is copied by a kernel of Proton's own, filed as triton.profiler files its copy
    # kernel: <metric> under __proton_launch_metadata (and the launched kernel's name for
    # launch metadata), each replay of a graph filing the captured copy again.
    x = torch.full((N,), 4.0, device="cuda")
    out = torch.empty_like(x)
    t = torch.full((), 5, dtype=torch.int64, device="cuda")

    def run():
        add_kernel[(triton.cdiv(N, 256),)](x, out, N, BLOCK=256)

    run()  # compile first
    torch.cuda.synchronize()
    proton.start("metadata", backend="cupti", hook="triton")
    with proton.scope("eager"):
        run()
    with proton.scope("given", {"t": t}):
        pass
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            with proton.scope("cap"):
                run()
        for value in (1.0, 2.0):
            x.fill_(value)
            with proton.scope("replay"):
                g.replay()
    proton.finalize()
    root = load_hatchet("metadata.hatchet")[0]
    eager = find(root, "eager", "add_tokens")["metrics"]
    assert (eager["tokens"], eager["count"]) == (4, 1)
    replayed = captured(root, "replay", "cap", "add_tokens")["metrics"]
    assert (replayed["tokens"], replayed["count"]) == (3, 2)
    meta = "__proton_launch_metadata"
    assert find(root, "eager", meta, "add_kernel", "<metric>")["metrics"]["count"] == 1
    assert find(root, "given", meta, "<metric>")["metrics"]["count"] == 1
    assert find(root, "given")["metrics"]["t"] == 5
    copies = captured(root, "replay", "cap", meta, "add_kernel", "<metric>")["metrics"]
    assert copies["count"] == 2
    assert dropped() == 0


def test_trace_slices_carry_tensor_values_and_graph_replays(tmp_path):
    t = torch.full((), 3, dtype=torch.int64, device="cuda")
    proton.start("trace", backend="cupti", data="trace")
    with proton.scope("no_kernel", {"t": t}):
        pass
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        g = torch.cuda.CUDAGraph()
        x = torch.ones(N, device="cuda")
        with torch.cuda.graph(g, stream=stream):
            with proton.scope("inside", {"t": t}):
                x.add_(1)
        for value in (10, 20):
            t.fill_(value)
            with proton.scope("replay"):
                g.replay()
    proton.finalize()
    events = json.loads((tmp_path / "trace.chrome_trace").read_text())["traceEvents"]
    # Scopes with metrics are "metric" slices named "<scope>: <name, value>", as Triton's.
    slices = [e for e in events if e["ph"] == "X" and e["cat"] in ("scope", "metric")]
    no_kernel = [e for e in slices if e["args"]["call_stack"] == ["ROOT", "no_kernel"]]
    assert [(e["name"], e["cat"], e["args"]["t"]) for e in no_kernel] == [
        ("no_kernel: <t, 3>", "metric", 3)
    ]
    replays = [
        e for e in slices if "<captured_at>" in e["args"]["call_stack"] and e["pid"] == "CPU"
    ]
    assert sorted((e["name"], e["args"]["t"]) for e in replays) == [
        ("inside: <t, 10>", 10),
        ("inside: <t, 20>", 20),
    ]
    assert all(e["args"]["call_stack"][:3] == ["ROOT", "replay", "<captured_at>"] for e in replays)
    assert sum(e["name"] == "replay" and e["cat"] == "scope" for e in slices) == 2
    # Each replay runs the captured copy of t: a <metric> kernel under the scope it was given
    # to, drawn with the scopes captured with the graph on its Graph lane.
    copies = [e for e in events if e.get("cat") == "kernel" and e["name"] == "<metric>"]
    replayed = ["ROOT", "replay", "<captured_at>", "inside", "__proton_launch_metadata"]
    assert sorted(e["args"]["call_stack"] for e in copies) == [
        ["ROOT", "no_kernel", "__proton_launch_metadata", "<metric>"],
        [*replayed, "<metric>"],
        [*replayed, "<metric>"],
    ], copies
    replay_lane = next(e["tid"] for e in copies if "<captured_at>" in e["args"]["call_stack"])
    graph_lane = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert [e["tid"] for e in graph_lane] == ["Graph: " + replay_lane], graph_lane


def test_periodic_flushing_writes_tensor_values_with_their_phase(tmp_path):
    t = torch.full((), 2, dtype=torch.int64, device="cuda")
    s = proton.start("periodic", backend="cupti", mode="periodic_flushing")
    with proton.scope("phase0", {"t": t}):
        pass
    proton.data.advance_phase(s)
    t.fill_(9)
    with proton.scope("phase1", {"t": t}):
        pass
    proton.finalize()
    phase0 = load_hatchet("periodic.part_0.hatchet")[0]
    phase1 = load_hatchet("periodic.part_1.hatchet")[0]
    assert find(phase0, "phase0")["metrics"]["t"] == 2
    assert find(phase1, "phase1")["metrics"]["t"] == 9


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_two_devices_are_each_copied_on_their_device():
    a = torch.full((), 3, dtype=torch.int64, device="cuda:0")
    b = torch.full((), 4, dtype=torch.int64, device="cuda:1")
    proton.start("devices", backend="cupti")
    with proton.scope("both", {"a": a, "b": b}):
        pass
    with torch.cuda.device(1):
        with proton.scope("both", {"a": a, "b": b}):
            pass
    proton.finalize()
    both = find(load_hatchet("devices.hatchet")[0], "both")["metrics"]
    assert (both["a"], both["b"]) == (6, 8)


BEHIND_A_KERNEL_NOT_SEEN = """
import torch, proton
x = torch.tensor(7, device="cuda")  # a copy: no kernel
torch.cuda._sleep(1 << 31)  # launched before the session, so not seen by it: ~1 s
proton.start("unseen")
with proton.scope("s", metrics={"v": x}):  # the value's copy waits behind the sleep
    pass
proton.finalize()
"""


def test_a_value_in_a_context_no_session_kernel_ran_in_is_read_once_it_landed(tmp_path):
    # The flush synchronises the contexts that kernels of the session ran in, and those holding
    # tensor metric values: here the only context has no such kernel, and the value's copy
    # waits behind a kernel launched before the session. (The build before that rule read 7
    # too, in 3 runs of 3 on an H100: the read-back, into pageable memory, waited there.)
    r = run_program(BEHIND_A_KERNEL_NOT_SEEN, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    root = load_hatchet(tmp_path / "unseen.hatchet")[0]
    assert find(root, "s")["metrics"]["v"] == 7
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("tensor_metrics_dropped", 0) == 0, stats
