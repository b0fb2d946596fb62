"""backend="instrumentation" on a real GPU: scopes inside Triton kernels (proton.language),
the implicit scope of unedited kernels, exact counts, per-warp timelines, options, and
outputs bit-identical with and without instrumentation."""

import contextlib
import json

import proton
import proton.language as pl
import pytest
from gpu_tree import dump, is_warp
from proton_test_utils import find, load_hatchet

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
from scoped_kernels import scoped_matmul_kernel  # after the skips above


@triton.jit
def vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def chain_kernel(out, N: tl.constexpr):
    # N dependent multiply-adds inside one scope: its cycles grow linearly with N.
    v = tl.program_id(0).to(tl.float32) + 1.0
    with pl.scope("chain"):
        for _ in tl.static_range(N):
            v = v * 1.0001 + 0.5
    with pl.scope("empty"):
        pass
    tl.store(out + tl.program_id(0), v)


@triton.jit
def unmatched_kernel(out):
    pl.exit_scope("never_opened")
    tl.store(out, 1.0)


@triton.jit
def half_entered_kernel(out):
    # Even CTAs enter the scope; every CTA leaves it.
    pid = tl.program_id(0)
    if pid % 2 == 0:
        pl.enter_scope("half")
    v = tl.load(out + pid)
    pl.exit_scope("half")
    tl.store(out + pid, v + 1.0)


@triton.jit(noinline=True)
def _scoped_helper(x, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    with pl.scope("in_helper"):
        v = tl.load(x + offs)
    tl.store(x + offs, v + 1.0)


@triton.jit
def calls_helper_kernel(x, BLOCK: tl.constexpr):
    # The helper is a function of its own in the PTX: its scope cannot be recorded.
    with pl.scope("around_call"):
        _scoped_helper(x, tl.program_id(0) * BLOCK, BLOCK)


K = 512


def run_vadd(n=4096, block=1024, launches=1):
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    for _ in range(launches):
        vadd_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block, num_warps=4)
    torch.cuda.synchronize()
    return out


def run_matmul():
    torch.manual_seed(0)
    a = torch.randn(K, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, K, device="cuda", dtype=torch.float16)
    c = torch.empty(K, K, device="cuda", dtype=torch.float32)
    scoped_matmul_kernel[(K // 128, K // 128)](
        a, b, c, K, BM=128, BN=128, BK=64, num_warps=8, num_stages=3
    )
    torch.cuda.synchronize()
    return c


def profile(name, fn, **kwargs):
    proton.start(name, backend="instrumentation", **kwargs)
    result = fn()
    proton.finalize()
    return result


def test_unedited_kernel_records_each_warps_span_under_its_cupti_frame():
    run_vadd()  # compiled (and cached) before the session: recompiled for it
    profile("vadd", lambda: run_vadd(launches=10))
    root = load_hatchet("vadd.hatchet")[0]
    kernel = find(root, "vadd_kernel")
    assert kernel is not None, dump(root)
    m = kernel["metrics"]
    assert m["count"] == 10 and m["time (ns)"] > 0, dump(root)
    # 4 CTAs x 4 warps per launch: every warp's span summed; normalized_cycles is the
    # per-warp average of each launch, summed over launches (as time sums over launches).
    assert m["cycles"] > 0 and m["normalized_cycles"] > 0
    assert m["cycles"] == pytest.approx(m["normalized_cycles"] * 4 * 4)


def test_scopes_in_a_pipelined_k_loop_count_exactly():
    profile("mm", run_matmul)
    root = load_hatchet("mm.hatchet")[0]
    kernel = find(root, "scoped_matmul_kernel")
    assert kernel is not None, dump(root)
    ctas, warps, iters = (K // 128) ** 2, 8, K // 64
    for scope in ("load", "mma"):
        node = find(kernel, scope)
        assert node is not None, dump(root)
        assert node["metrics"]["count"] == ctas * warps * iters, dump(root)
        assert node["metrics"]["cycles"] > 0
    assert kernel["metrics"]["count"] == 1


def test_outputs_are_bit_identical_with_and_without_instrumentation():
    plain_mm, plain_add = run_matmul(), run_vadd()
    proton.start("same", backend="instrumentation")
    inst_mm, inst_add = run_matmul(), run_vadd()
    proton.finalize()
    after_mm = run_matmul()  # the plain binary again
    assert torch.equal(plain_mm, inst_mm) and torch.equal(plain_add, inst_add)
    assert torch.equal(plain_mm, after_mm)


def test_plain_binaries_come_back_after_finalize():
    profile("first", run_vadd)
    proton.start("plain")  # kernel tracing only
    run_vadd()
    proton.finalize()
    kernel = find(load_hatchet("plain.hatchet")[0], "vadd_kernel")
    assert kernel["metrics"]["count"] == 1 and "cycles" not in kernel["metrics"]


def test_trace_has_one_lane_per_cta_and_warp_inside_the_kernel_slice():
    profile("tl", lambda: run_vadd(n=2048), data="trace")
    events = json.load(open("tl.chrome_trace"))["traceEvents"]
    kernel = [e for e in events if e.get("cat") == "kernel" and e["name"] == "vadd_kernel"]
    warps = [e for e in events if is_warp(e)]
    assert len(kernel) == 1
    assert len(warps) == 2 * 4  # 2 CTAs x 4 warps, one kernel-wide slice each
    # Triton's lanes: one process per (kernel, SM, CTA), one thread per warp.
    lanes = {(w["pid"].split(" CTA")[1], w["tid"]) for w in warps}
    assert lanes == {(str(c), f"warp {w}") for c in range(2) for w in range(4)}
    k = kernel[0]
    assert k["pid"] == "GPU 0"
    for w in warps:
        assert w["name"] == "vadd_kernel" and "sm" in w["args"] and w["args"]["cycles"] > 0
        assert w["pid"] == f"vadd_kernel Core{w['args']['sm']} CTA{w['pid'].split(' CTA')[1]}"
        assert w["cat"] == "vadd_kernel" and w["args"]["call_stack"][-1] == "vadd_kernel"
        # Same clock: the warps sit inside the kernel's slice (1 us for clock granularity).
        assert k["ts"] - 1.0 <= w["ts"] and w["ts"] + w["dur"] <= k["ts"] + k["dur"] + 1.0


@triton.jit
def two_scopes_kernel(x, y, size: tl.constexpr):
    pl.enter_scope("entire")
    offs = tl.arange(0, size)
    pl.enter_scope("load")
    v = tl.load(x + offs) + 1
    pl.exit_scope("load")
    tl.store(y + offs, v)
    pl.exit_scope("entire")


def test_trace_layouts_full_and_triton_on_one_example():
    # triton.profiler's scripts count the events of a trace: with trace_layout="triton" the
    # file holds exactly its warp slices, one per scope run (4 warps x "entire" and "load");
    # "full" writes those first, then each warp's kernel-wide slice, the kernel slices, the
    # CPU scope and the flows.
    keys = {"call_stack", "Init Time (ns)", "Post Final Time (ns)", "Finalization Time (ns)"}
    x = torch.ones(1024, device="cuda")
    y = torch.zeros_like(x)
    for layout in ("triton", "full"):
        mode = proton.mode.Default(trace_layout=layout)
        proton.start(layout, backend="instrumentation", data="trace", mode=mode)
        with proton.scope("step"):
            two_scopes_kernel[(1,)](x, y, 1024, num_warps=4)
        proton.finalize()
        trace = json.load(open(f"{layout}.chrome_trace"))
        events = trace["traceEvents"]
        warps = [e for e in events if is_warp(e)]
        assert warps == events[: len(warps)], events  # warp slices first
        # Triton's order (SM, CTA, warp, start) for the scopes; "full" then adds each warp's
        # kernel-wide slice, in the same order.
        for group in (
            [e for e in warps if e["name"] != "two_scopes_kernel"],
            [e for e in warps if e["name"] == "two_scopes_kernel"],
        ):
            order = [
                (e["args"]["sm"], int(e["pid"].split(" CTA")[1]), e["tid"], e["ts"]) for e in group
            ]
            assert order == sorted(order)
        kernel_wide = [e["name"] == "two_scopes_kernel" for e in warps]
        assert kernel_wide == sorted(kernel_wide)  # the scopes' slices, then the kernel-wide ones
        for w in warps:
            assert w["cat"] == "two_scopes_kernel" and w["tid"].startswith("warp ")
            assert keys | {"Frequency (MHz)", "sm", "cycles", "scope_path"} <= set(w["args"])
            assert w["args"]["call_stack"] == ["ROOT", "step", "two_scopes_kernel"]
            assert w["pid"] == f"two_scopes_kernel Core{w['args']['sm']} CTA0"
        names = sorted(w["name"] for w in warps)
        if layout == "triton":
            assert names == ["entire"] * 4 + ["load"] * 4 and len(events) == 8, events
            assert trace["displayTimeUnit"] == "ns"
            continue
        assert names == ["entire"] * 4 + ["load"] * 4 + ["two_scopes_kernel"] * 4
        rest = events[len(warps) :]
        kernels = [e for e in rest if e.get("cat") == "kernel"]
        assert [e["name"] for e in kernels] == ["two_scopes_kernel"], rest
        assert [e["name"] for e in rest if e.get("cat") == "scope"] == ["step"], rest
        assert sorted(e["ph"] for e in rest if e.get("cat") == "flow") == ["f", "s"], rest
        assert all(isinstance(e["pid"], str) and isinstance(e["tid"], str) for e in rest)


def test_warp_group_with_selected_units_records_only_those():
    mode = proton.mode.Default(
        granularity="warp_group", sampling_strategy="selective", sampling_options="1"
    )
    profile("sel", run_matmul, data="trace", mode=mode)
    events = json.load(open("sel.chrome_trace"))["traceEvents"]
    lanes = {(e["pid"], e["tid"]) for e in events if is_warp(e)}
    ctas = (K // 128) ** 2
    assert len(lanes) == ctas  # one unit (warps 4-7, led by warp 4) per CTA
    assert {tid for _, tid in lanes} == {"warp 4"}


def test_cycles_grow_linearly_with_dependent_work_and_time_shift_zeroes_empty_scopes():
    sizes = [64, 128, 256, 512, 1024]
    mode = proton.mode.Default(optimizations="time_shift")
    out = torch.empty(1, device="cuda")
    cycles, empty = [], []
    for n in sizes:
        name = f"chain{n}"
        profile(
            name,
            lambda n=n: (chain_kernel[(1,)](out, N=n, num_warps=1), torch.cuda.synchronize()),
            mode=mode,
        )
        kernel = find(load_hatchet(f"{name}.hatchet")[0], "chain_kernel")
        cycles.append(find(kernel, "chain")["metrics"]["normalized_cycles"])
        empty.append(find(kernel, "empty")["metrics"]["normalized_cycles"])
    mean_x, mean_y = sum(sizes) / 5, sum(cycles) / 5
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, cycles))
    sxx = sum((x - mean_x) ** 2 for x in sizes)
    syy = sum((y - mean_y) ** 2 for y in cycles)
    r2 = sxy * sxy / (sxx * syy)
    assert r2 > 0.99, (sizes, cycles)
    assert max(empty) <= 8, empty


def test_scope_cycles_fit_inside_the_kernels_duration():
    profile("fit", run_matmul)
    root = load_hatchet("fit.hatchet")
    kernel = find(root[0], "scoped_matmul_kernel")
    khz = root[1]["CUDA"]["0"]["clock_rate"]
    per_warp_ns = kernel["metrics"]["normalized_cycles"] / (khz / 1e6)
    # A warp cannot be busy longer than its kernel ran (the SM may clock below the max rate,
    # which only makes cycles / max rate shorter).
    assert per_warp_ns <= kernel["metrics"]["time (ns)"]


def test_unknown_option_values_raise_config_error_listing_the_allowed_ones():
    with pytest.raises(proton.ConfigError, match="warp_group"):
        proton.mode.Default(granularity="warps")
    with pytest.raises(proton.ConfigError, match="time_shift"):
        proton.mode.Default(optimizations="fast")


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_unmatched_exit_is_counted_and_named(capfd, data):
    # A tree counts each recording warp's run of the exit (1 CTA of 4 warps: 4); a trace has
    # no event for it and counts the marker once per launch. (Before, a tree added that count
    # on top of its warps': 5.)
    out = torch.empty(1, device="cuda")
    with pytest.warns(UserWarning, match="never_opened"):
        profile(
            "unm",
            lambda: (unmatched_kernel[(1,)](out, num_warps=4), torch.cuda.synchronize()),
            data=data,
        )
    written = load_hatchet("unm.hatchet" if data == "tree" else "unm.chrome_trace")
    meta = written[0] if data == "tree" else written["otherData"]
    stats = dict(meta["proton_metadata"]["stats"])
    expected = 4 if data == "tree" else 1
    assert stats["instrumentation_unmatched_scopes[unmatched_kernel]"] == expected, stats
    assert stats["instrumentation_unmatched_scopes"] == expected, stats
    assert "unmatched_kernel" in capfd.readouterr().err


def test_gluon_kernel_scopes_count_exactly():
    gluon = pytest.importorskip("triton.experimental.gluon")
    gl = pytest.importorskip("triton.experimental.gluon.language")

    @gluon.jit
    def gluon_add(x, out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.program_id(0) * N + gl.arange(0, N, layout=layout)
        with pl.scope("load"):
            v = gl.load(x + offs)
        gl.store(out + offs, v + 1.0)

    x = torch.zeros(1024, device="cuda")
    out = torch.empty_like(x)
    profile(
        "gluon", lambda: (gluon_add[(8,)](x, out, N=128, num_warps=4), torch.cuda.synchronize())
    )
    kernel = find(load_hatchet("gluon.hatchet")[0], "gluon_add")
    assert kernel is not None
    assert find(kernel, "load")["metrics"]["count"] == 8 * 4
    assert torch.equal(out, torch.ones_like(out))


@triton.jit
def event_kernel(x, out, TILES: tl.constexpr, N: tl.constexpr):
    # triton.profiler.language's async events, started and ended in one warp: a slice from
    # each start to the next end, TILES per warp.
    offs = tl.program_id(0) * N + tl.arange(0, N)
    event = pl.allocate_event("copy")
    pl.start_event(event)
    v = tl.load(x + offs)
    for t in tl.range(1, TILES):
        pl.end_event(event)
        tl.store(out + (t - 1) * 4 * N + offs, v)
        pl.start_event(event)
        v = tl.load(x + t * 4 * N + offs)
    pl.end_event(event)
    tl.store(out + (TILES - 1) * 4 * N + offs, v)


def test_events_started_and_ended_in_a_warp_are_slices_counted_per_start():
    x = torch.arange(3 * 4 * 128, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)

    def run():
        event_kernel[(4,)](x, out, TILES=3, N=128, num_warps=4)
        torch.cuda.synchronize()

    profile("events", run)
    kernel = find(load_hatchet("events.hatchet")[0], "event_kernel")
    assert kernel is not None
    copy = find(kernel, "copy")
    assert copy["metrics"]["count"] == 4 * 4 * 3 and copy["metrics"]["cycles"] > 0, dump(kernel)
    assert torch.equal(out, x)
    profile("events_trace", run, data="trace")
    events = json.load(open("events_trace.chrome_trace"))["traceEvents"]
    slices = [e for e in events if is_warp(e) and e["name"] == "copy"]
    per_warp = {}
    for e in slices:
        assert e["dur"] > 0
        per_warp[(e["pid"], e["tid"])] = per_warp.get((e["pid"], e["tid"]), 0) + 1
    assert len(per_warp) == 4 * 4 and set(per_warp.values()) == {3}


@pytest.mark.parametrize("layout", ["full", "triton"])
def test_an_event_started_in_one_partition_and_ended_in_another_is_linked_per_warp(layout):
    # Gluon's warp_specialize, as Triton's test_gluon_warp_specialized_event: the producer's 4
    # warps start the event, the consumer's 4 warps (the default partition) end it. Each
    # start is linked to one end in another warp: two zero-length slices sharing a bind_id,
    # flow_out on the start, flow_in on the end; nothing is counted as unmatched.
    from gluon_event_kernels import warp_specialized_event_kernel

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("warp_specialize needs Hopper or newer")
    ws_event_kernel = warp_specialized_event_kernel()

    def run():
        ws_event_kernel[(1,)](num_warps=4)
        torch.cuda.synchronize()

    profile(f"ws_{layout}", run, data="trace", mode=proton.mode.Default(trace_layout=layout))
    with open(f"ws_{layout}.chrome_trace") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    linked = [e for e in events if e["name"] == "warp_specialized"]
    links = {}
    for e in linked:
        assert e["ph"] == "X" and e["dur"] == 0, e
        links.setdefault(e["bind_id"], []).append(e)
    assert len(links) == 4, linked
    for ends in links.values():
        assert len(ends) == 2, ends
        start = next(e for e in ends if e.get("flow_out"))
        end = next(e for e in ends if e.get("flow_in"))
        assert start["tid"] != end["tid"] and start["ts"] <= end["ts"], ends
    assert sorted(e["tid"] for e in linked) == [f"warp {w}" for w in range(8)]
    stats = dict(trace["otherData"]["proton_metadata"]["stats"])
    assert stats.get("instrumentation_unmatched_scopes", 0) == 0, stats


def _named_by_metadata(grid, kernel, args):
    return {"name": f"vadd_{args['n']}", "bytes": 12 * args["n"]}


@triton.jit(launch_metadata=_named_by_metadata)
def named_vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("add"):
        v = tl.load(x + offs) + tl.load(y + offs)
    tl.store(out + offs, v)


def test_scopes_go_under_the_kernel_frame_launch_metadata_names():
    # With hook="triton", kernel tracing files a launch at <context>/<metadata name>; the
    # intra-kernel sums go there too (they went to <context> itself, beside the kernel).
    n = 4096
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)

    def run():
        with proton.scope("step"):
            for _ in range(3):
                named_vadd_kernel[(n // 1024,)](x, x, out, n, BLOCK=1024)
        torch.cuda.synchronize()

    profile("named", run, hook="triton")
    root = load_hatchet("named.hatchet")[0]
    step = find(root, "step")
    assert [c["frame"]["name"] for c in step["children"]] == [f"vadd_{n}"], dump(root)
    kernel = step["children"][0]
    assert kernel["metrics"]["count"] == 3 and kernel["metrics"]["bytes"] == 3 * 12 * n
    assert kernel["metrics"]["cycles"] > 0, dump(root)
    assert step["metrics"].get("cycles", 0) == 0, dump(root)
    (add,) = kernel["children"]
    assert add["frame"]["name"] == "add" and add["metrics"]["count"] == 3 * 4 * 4


def test_a_kernel_tracing_session_beside_an_instrumentation_session_keeps_its_own_profile():
    run_vadd()
    proton.start("beside_plain")
    proton.start("beside_inst", backend="instrumentation")
    run_vadd(launches=3)
    proton.finalize()
    plain = find(load_hatchet("beside_plain.hatchet")[0], "vadd_kernel")
    inst = find(load_hatchet("beside_inst.hatchet")[0], "vadd_kernel")
    assert plain["metrics"]["count"] == inst["metrics"]["count"] == 3
    assert "cycles" not in plain["metrics"] and plain["children"] == [], plain
    assert inst["metrics"]["cycles"] > 0


def test_every_launch_of_threads_that_never_touched_cuda_is_recorded():
    # Triton asks for a launch's buffer before its launcher makes a CUDA context current, so
    # the first launch of a thread that had not used CUDA found none and ran unrecorded,
    # silently (4 threads started inside a session lost one launch each).
    import threading

    out = torch.empty(4, device="cuda")
    proton.start("threads", backend="instrumentation")
    chain_kernel[(4,)](out, N=8, num_warps=4)  # compiled for the session on this thread
    torch.cuda.synchronize()
    streams = [None, None, torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [torch.empty(4, device="cuda") for _ in streams]

    def work(stream, out):  # launches only: nothing else here touches CUDA first
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for _ in range(5):
                chain_kernel[(4,)](out, N=8, num_warps=4)

    threads = [threading.Thread(target=work, args=(s, o)) for s, o in zip(streams, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    proton.finalize()
    root = load_hatchet("threads.hatchet")[0]
    kernel = find(root, "chain_kernel")
    launches = 1 + len(streams) * 5
    assert kernel["metrics"]["count"] == launches, dump(root)
    # 4 CTAs x 4 warps per launch, every launch recorded.
    assert find(kernel, "chain")["metrics"]["count"] == launches * 16, dump(root)


def test_a_scope_left_where_it_was_not_entered_keeps_only_the_warps_that_entered_it():
    # The odd CTAs' warps leave "half" without entering it: they are counted as unmatched and
    # their sums left out. (Before, each such exit added a clock reading less an enter that
    # never happened: 45 billion cycles over 64 warps, and a count of 64.)
    out = torch.zeros(16, device="cuda")
    profile(
        "half", lambda: (half_entered_kernel[(16,)](out, num_warps=4), torch.cuda.synchronize())
    )
    root = load_hatchet("half.hatchet")[0]
    kernel = find(root, "half_entered_kernel")
    half = find(kernel, "half")
    assert half["metrics"]["count"] == 8 * 4, dump(root)
    assert 0 < half["metrics"]["cycles"] < kernel["metrics"]["cycles"], dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats["instrumentation_unmatched_scopes[half_entered_kernel]"] == 8 * 4
    assert torch.equal(out, torch.ones(16, device="cuda"))


def test_a_scope_in_a_function_not_inlined_is_named_and_counted(capfd):
    # Before, the helper's scope vanished from the profile with no word and no stat.
    x = torch.zeros(4 * 512, device="cuda")
    launch = lambda: calls_helper_kernel[(4,)](x, BLOCK=512, num_warps=4)
    profile("noinl", lambda: (launch(), launch(), torch.cuda.synchronize()))
    assert torch.equal(x, torch.full_like(x, 2.0))
    root = load_hatchet("noinl.hatchet")[0]
    kernel = find(root, "calls_helper_kernel")
    assert find(kernel, "around_call")["metrics"]["count"] == 2 * 4 * 4, dump(root)
    assert [c["frame"]["name"] for c in kernel["children"]] == ["around_call"], dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    # Two markers (the helper's enter and exit) per launch.
    assert stats["instrumentation_markers_not_recorded[calls_helper_kernel]"] == 2 * 2
    err = capfd.readouterr().err
    assert err.count("2 scope markers of scope in_helper are not recorded") == 1, err


def test_each_trace_session_gets_the_whole_slice_cap(monkeypatch):
    # Before, the cap counted the process's slices: once a trace had reached it, every later
    # trace session in the process recorded nothing.
    monkeypatch.setenv("PROTON_INSTRUMENTATION_TRACE_EVENTS", "100")
    for name in ("cap1", "cap2"):
        # 10 launches of 4 CTAs x 4 warps, each warp one slice (its kernel scope): 160.
        profile(name, lambda: run_vadd(n=4096, block=1024, launches=10), data="trace")
        with open(f"{name}.chrome_trace") as f:
            trace = json.load(f)
        warps = [e for e in trace["traceEvents"] if is_warp(e)]
        stats = dict(trace["otherData"]["proton_metadata"]["stats"])
        assert len(warps) == 100, name
        # All ten drained at the end: the 7th fills the cap (4 of its 16 slices kept), the
        # last three are not walked.
        assert stats["instrumentation_trace_events_capped"] == 12, (name, stats)
        assert stats["instrumentation_launches_past_trace_cap"] == 3, (name, stats)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_instrumented_launches_on_two_gpus_stay_on_their_own_device():
    # Each device has its own ring: the scopes go under each launch's own kernel frame, with
    # its device, and a timeline places each launch's warps on its own GPU.
    outs = [torch.empty(4, device=f"cuda:{d}") for d in range(2)]

    def launches():
        for d in range(2):
            with torch.cuda.device(d), proton.scope(f"gpu{d}"):
                for _ in range(2 + d):
                    chain_kernel[(4,)](outs[d], N=8, num_warps=4)
            torch.cuda.synchronize(d)

    profile("two_tree", launches)
    root = load_hatchet("two_tree.hatchet")[0]
    for d in range(2):
        kernel = find(find(root, f"gpu{d}"), "chain_kernel")
        assert kernel["metrics"]["count"] == 2 + d, dump(root)
        assert kernel["metrics"]["device_id"] == str(d), dump(root)
        assert find(kernel, "chain")["metrics"]["count"] == (2 + d) * 16, dump(root)
    profile("two_trace", launches, data="trace")
    events = json.load(open("two_trace.chrome_trace"))["traceEvents"]
    for d in range(2):
        kernels = [e for e in events if e.get("cat") == "kernel" and e["pid"] == f"GPU {d}"]
        # A warp slice's launch context ends in its GPU's scope and kernel.
        warps = [e for e in events if is_warp(e) and e["args"]["call_stack"][1] == f"gpu{d}"]
        assert len(kernels) == 2 + d
        assert sum(w["name"] == "chain_kernel" for w in warps) == (2 + d) * 16
        assert sum(w["name"] == "chain" for w in warps) == (2 + d) * 16
        for w in warps:  # inside one of this GPU's kernel slices (1 us for clock granularity)
            assert any(
                k["ts"] - 1.0 <= w["ts"] and w["ts"] + w["dur"] <= k["ts"] + k["dur"] + 1.0
                for k in kernels
            )


def test_instrumentation_hook_host_buffer_copies_the_last_launchs_buffer():
    from proton.hooks.instrumentation import InstrumentationHook

    InstrumentationHook.enable_host_buffer = True
    try:
        proton.start("host_buffer", backend="instrumentation")
        assert InstrumentationHook.active_count == 1
        run_vadd(n=2048)
        raw = InstrumentationHook.host_buffer
        proton.finalize()
    finally:
        InstrumentationHook.enable_host_buffer = False
    # Proton's own layout (2 CTAs' records of the kernel's one scope): bytes were written.
    assert raw is not None and raw.dtype == torch.uint8 and raw.device.type == "cpu"
    assert raw.numel() > 0 and int(raw.count_nonzero()) > 0
    assert InstrumentationHook.host_buffer is None  # switched off again
