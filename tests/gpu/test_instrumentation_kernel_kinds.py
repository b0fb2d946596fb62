"""backend="instrumentation" over kinds of Triton kernels beyond a plain loop: autotuned,
with an early return, with device asserts and prints, split over a cluster (num_ctas=2),
reading through tensor descriptors (TMA), persistent, and the kernels torch.compile makes.
Each kernel's outputs are bit-identical with and without the session, and its scopes are
counted exactly: one per warp that ran them."""

import json
import os

import proton
import proton.language as pl
import pytest
from gpu_tree import dump, is_warp
from proton_test_utils import find, load_hatchet, run_program, run_python

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
from scoped_kernels import scoped_in_compiled_kernel, scoped_matmul_kernel  # after the skips

GPU_TESTS = os.path.dirname(os.path.abspath(__file__))  # scoped_kernels, for the programs


def outputs_and_profile(name, run):
    """run() before, inside and after an instrumentation session (the plain binary again);
    its outputs must be the same bits each time. Returns the session's tree."""
    plain = run()
    proton.start(name, backend="instrumentation")
    inside = run()
    proton.finalize()
    after = run()
    for a, b, c in zip(plain, inside, after):
        assert torch.equal(a, b) and torch.equal(a, c)
    return load_hatchet(f"{name}.hatchet")[0]


def scope_counts(root, kernel, *scopes):
    node = find(root, kernel)
    assert node["metrics"]["count"] == 1 and node["metrics"]["cycles"] > 0, dump(root)
    return [find(node, s)["metrics"]["count"] for s in scopes]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def autotuned_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    with pl.scope("work"):
        v = tl.load(x + offs, mask=m) * 2.0
    tl.store(out + offs, v, mask=m)


def test_an_autotuned_kernel_records_the_config_it_runs():
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)

    def run():
        autotuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        torch.cuda.synchronize()
        return [out.clone()]

    root = outputs_and_profile("autotuned", run)  # tuned before the session, not inside it
    best = autotuned_kernel.best_config
    ctas, warps = x.numel() // best.kwargs["BLOCK"], best.num_warps
    assert scope_counts(root, "autotuned_kernel", "work") == [ctas * warps]


@triton.jit
def early_return_kernel(x, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("body"):
        v = tl.load(x + offs) + 1.0
    tl.store(out + offs, v)


def test_ctas_that_return_early_count_in_the_kernel_scope_only():
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)

    def run():
        early_return_kernel[(8,)](x, out, 4096, BLOCK=1024, num_warps=4)
        torch.cuda.synchronize()
        return [out.clone()]

    root = outputs_and_profile("early", run)
    assert scope_counts(root, "early_return_kernel", "body") == [4 * 4]  # 4 CTAs of 8 work
    kernel = find(root, "early_return_kernel")["metrics"]
    # Every one of the 8 x 4 warps ran the kernel's own scope.
    assert kernel["cycles"] == pytest.approx(kernel["normalized_cycles"] * 8 * 4)


@triton.jit
def asserting_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    tl.device_assert(v >= 0, "negative input")
    with pl.scope("after_assert"):
        v = v * 3.0
    tl.store(out + offs, v)


@triton.jit
def printing_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    with pl.scope("printing"):
        tl.device_print("v", v)
    tl.store(out + offs, v + 1)


def test_kernels_with_device_asserts_and_prints_keep_their_scopes(capfd):
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    out, printed = torch.zeros_like(x), torch.zeros(32, device="cuda")

    def run():
        asserting_kernel[(4,)](x, out, BLOCK=256, num_warps=4, debug=True)
        printing_kernel[(1,)](x, printed, BLOCK=32, num_warps=1)
        torch.cuda.synchronize()
        return [out.clone(), printed.clone()]

    root = outputs_and_profile("asserts", run)
    assert scope_counts(root, "asserting_kernel", "after_assert") == [4 * 4]
    assert scope_counts(root, "printing_kernel", "printing") == [1]
    assert capfd.readouterr().out.count("v: 31") >= 3  # printed in every run, the session's too


def test_a_program_split_over_a_cluster_records_each_of_its_ctas():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("clusters (num_ctas > 1) need sm_90 or later")
    torch.manual_seed(0)
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 512, device="cuda", dtype=torch.float32)

    def run():
        scoped_matmul_kernel[(4, 4)](a, b, c, 512, BM=128, BN=128, BK=64, num_warps=4, num_ctas=2)
        torch.cuda.synchronize()
        return [c.clone()]

    root = outputs_and_profile("cluster", run)
    # 16 programs of 2 CTAs each, 4 warps per CTA, 8 iterations of the K loop.
    counts = scope_counts(root, "scoped_matmul_kernel", "load", "mma")
    assert counts == [16 * 2 * 4 * 8] * 2


@triton.jit
def descriptor_kernel(x, out, n, BLOCK: tl.constexpr):
    dx = tl.make_tensor_descriptor(x, shape=[n], strides=[1], block_shape=[BLOCK])
    do = tl.make_tensor_descriptor(out, shape=[n], strides=[1], block_shape=[BLOCK])
    with pl.scope("tma_load"):
        v = dx.load([tl.program_id(0) * BLOCK])
    do.store([tl.program_id(0) * BLOCK], v + 1.0)


def test_a_kernel_reading_through_tensor_descriptors_keeps_its_scratch_and_its_scopes():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors (TMA) need sm_90 or later")
    # Descriptors made on the device take Triton's global scratch, from the user's allocator;
    # the profile scratch is Proton's: the two must not be confused.
    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)

    def run():
        descriptor_kernel[(16,)](x, out, 4096, BLOCK=256, num_warps=4)
        torch.cuda.synchronize()
        return [out.clone()]

    root = outputs_and_profile("descriptors", run)
    assert scope_counts(root, "descriptor_kernel", "tma_load") == [16 * 4]
    assert torch.equal(out, x + 1.0)


@triton.jit
def persistent_kernel(x, out, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    for tile in tl.range(tl.program_id(0), n // BLOCK, PROGRAMS, num_stages=2):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        with pl.scope("tile"):
            v = tl.load(x + offs)
        tl.store(out + offs, v * v)


def test_a_persistent_kernel_counts_every_tile_of_every_warp():
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)

    def run():
        persistent_kernel[(8,)](x, out, 1 << 16, BLOCK=512, PROGRAMS=8, num_warps=4)
        torch.cuda.synchronize()
        return [out.clone()]

    root = outputs_and_profile("persistent", run)
    tiles = (1 << 16) // 512
    assert scope_counts(root, "persistent_kernel", "tile") == [tiles * 4]  # per tile, 4 warps


def test_torch_compile_kernels_record_each_warps_span():
    # Inductor compiles and launches its kernels itself; in the session they run binaries
    # Proton rewrote from their PTX in Triton's cache (the implicit kernel scope), with the
    # same outputs, under their CUPTI frames.
    f = torch.compile(lambda x: (x.sin() * 2 + x.cos()).sum(dim=-1, keepdim=True) + x)
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32).reshape(64, 1024)

    def run():
        y = f(x)
        torch.cuda.synchronize()
        return [y]

    root = outputs_and_profile("inductor", run)  # compiled before the session
    triton_kernels = [c for c in root["children"] if c["frame"]["name"].startswith("triton_")]
    assert triton_kernels, dump(root)
    for k in triton_kernels:
        m = k["metrics"]
        assert m["count"] == 1 and m["time (ns)"] > 0, dump(root)
        assert m["cycles"] > 0 and m["cycles"] >= m["normalized_cycles"] > 0, dump(root)
    # A function compiled inside the session (its kernels built by Inductor's workers then).
    g = torch.compile(lambda x: torch.relu(x) * 3 - 1)
    proton.start("inductor_inside", backend="instrumentation")
    y = g(x)
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(y, torch.relu(x) * 3 - 1)
    root = load_hatchet("inductor_inside.hatchet")[0]
    inside = [c for c in root["children"] if c["frame"]["name"].startswith("triton_")]
    assert len(inside) == 1 and inside[0]["metrics"]["cycles"] > 0, dump(root)


def test_warp_specialized_gluon_partitions_record_their_own_scopes():
    gluon = pytest.importorskip("triton.experimental.gluon")
    gl = pytest.importorskip("triton.experimental.gluon.language")
    if not hasattr(gl, "warp_specialize"):
        pytest.skip("this Gluon has no warp_specialize")

    @gluon.jit
    def default_partition(x, out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.program_id(0) * N + gl.arange(0, N, layout=layout)
        with pl.scope("default"):
            v = gl.load(x + offs)
        gl.store(out + offs, v + 1.0)

    @gluon.jit
    def worker_partition(x, out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        offs = gl.program_id(0) * N + gl.arange(0, N, layout=layout)
        with pl.scope("worker"):
            v = gl.load(x + offs)
        gl.store(out + offs, v * 2.0)

    @gluon.jit
    def specialized_kernel(x, out, out2, N: gl.constexpr):
        gl.warp_specialize(
            [(default_partition, (x, out, N)), (worker_partition, (x, out2, N))], [1], [48]
        )

    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out, out2 = torch.zeros_like(x), torch.zeros_like(x)

    def run():
        specialized_kernel[(32,)](x, out, out2, N=128, num_warps=4)
        torch.cuda.synchronize()
        return [out.clone(), out2.clone()]

    root = outputs_and_profile("specialized", run)
    # The default partition runs on the kernel's 4 warps, the worker on 1 warp of its own.
    assert scope_counts(root, "specialized_kernel", "default", "worker") == [32 * 4, 32 * 1]
    assert torch.equal(out, x + 1.0) and torch.equal(out2, x * 2.0)


def test_torch_compile_kernels_in_a_trace_and_in_cuda_graphs():
    f = torch.compile(lambda x: x * 2 + 1)
    x = torch.arange(1 << 12, device="cuda", dtype=torch.float32)
    f(x)
    proton.start("inductor_trace", backend="instrumentation", data="trace")
    y = f(x)
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(y, x * 2 + 1)
    with open("inductor_trace.chrome_trace") as trace:
        events = json.load(trace)["traceEvents"]
    warps = [e for e in events if is_warp(e)]
    assert warps and all(e["name"].startswith("triton_") for e in warps)
    # Captured into CUDA graphs inside the session (mode="reduce-overhead"), replayed inside
    # and after it: the same outputs.
    g = torch.compile(lambda x: x.relu() - 3, mode="reduce-overhead")
    proton.start("inductor_graph", backend="instrumentation")
    for _ in range(4):
        out = g(x)
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(out, x.relu() - 3)
    assert torch.equal(g(x), x.relu() - 3)


def test_a_scoped_kernel_inside_the_compiled_graph_records_its_scopes():
    # Inductor compiles a user's kernel from a copy of its source in a module of its own, which
    # Proton gives the kernel's pl import (without it: NameError, session or not), and without
    # the session's options: in a session Proton compiles that copy again with them, so the
    # kernel records its scopes. It runs the same bits with and without a session.
    def launch(x):
        out = torch.empty_like(x)
        scoped_in_compiled_kernel[(x.numel() // 256,)](x, out, BLOCK=256, num_warps=4)
        return out

    f = torch.compile(lambda x: launch(x + 1.0) * 2.0)
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)

    def run():
        y = f(x)
        torch.cuda.synchronize()
        return [y]

    assert torch.equal(run()[0], (x + 1.0) * 3.0 * 2.0)
    root = outputs_and_profile("scoped_compiled", run)
    (node,) = triton_kernel_nodes(root, "scoped_in_compiled_kernel")
    assert scope_counts(root, node["frame"]["name"], "user_scope") == [256 * 4], dump(root)


def test_a_scoped_kernel_first_compiled_in_the_session_records_its_scopes():
    # Compiled by Inductor inside the session (loaded there: known by its load), launched in it.
    def launch(x):
        out = torch.empty_like(x)
        scoped_in_compiled_kernel[(x.numel() // 256,)](x, out, BLOCK=256, num_warps=4)
        return out

    f = torch.compile(lambda x: launch(x - 1.0) + 5.0)
    x = torch.arange(1 << 15, device="cuda", dtype=torch.float32)
    proton.start("scoped_compiled_in_session", backend="instrumentation")
    y = f(x)
    y = f(x)
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(y, (x - 1.0) * 3.0 + 5.0) and torch.equal(f(x), y)
    root = load_hatchet("scoped_compiled_in_session.hatchet")[0]
    (node,) = [c for c in root["children"] if c["frame"]["name"].startswith("scoped_in")]
    assert node["metrics"]["count"] == 2, dump(root)
    assert find(node, "user_scope")["metrics"]["count"] == 2 * 128 * 4, dump(root)


WORKER_COMPILED = """
import gc, json, torch, proton
import torch._inductor.config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from triton.compiler.compiler import CompiledKernel
from scoped_kernels import scoped_in_compiled_kernel


def launch(x):
    out = torch.empty_like(x)
    scoped_in_compiled_kernel[(x.numel() // 256,)](x, out, BLOCK=256, num_warps=4)
    return out


inductor_config.compile_threads = 4
AsyncCompile.warm_pool()
AsyncCompile.use_process_pool()
AsyncCompile.wait_pool_ready()
f = torch.compile(lambda x: launch(x + 1.0) * 2.0)
x = torch.arange(1 << 15, device="cuda", dtype=torch.float32)
y = f(x)
torch.cuda.synchronize()
ks = [o for o in gc.get_objects() if type(o) is CompiledKernel and o.name == "scoped_in_compiled_kernel"]
proton.start("worker", backend="instrumentation")
inside = f(x)
torch.cuda.synchronize()
proton.finalize()
assert torch.equal(y, (x + 1.0) * 6.0) and torch.equal(inside, y) and torch.equal(f(x), y)
root = json.load(open("worker.hatchet"))[0]
(node,) = [c for c in root["children"] if c["frame"]["name"] == "scoped_in_compiled_kernel"]
print(json.dumps({"dropped": [k.src.fn.fn is None for k in ks], "count": node["metrics"]["count"],
                  "scopes": {c["frame"]["name"]: c["metrics"]["count"] for c in node["children"]}}))
"""


def test_a_scoped_kernel_compiled_in_an_inductor_worker_records_its_scopes(tmp_path):
    # Once Inductor's pool of worker processes is up, it compiles kernels there and the copy
    # comes back without its Python function: Proton loads it again through its autotuner.
    r = run_program(WORKER_COMPILED, tmp_path, timeout=300, paths=(GPU_TESTS,))
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result == {"dropped": [True], "count": 1, "scopes": {"user_scope": 128 * 4}}, r.stdout


def launched_by_hand(kernel, block):
    """x (16K floats) and a function that launches `kernel`(x, out, BLOCK=block) over x, as
    a CompiledKernel compiled before any session, by hand, and returns [out]."""
    x = torch.arange(1 << 14, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    ctas = x.numel() // block
    compiled = kernel.warmup(x, out, BLOCK=block, grid=(ctas,), num_warps=4)

    def by_hand():
        compiled[(ctas, 1, 1)](x, out, block)
        torch.cuda.synchronize()
        return [out.clone()]

    return x, by_hand


def test_a_scoped_kernel_compiled_and_launched_by_hand_records_its_scopes():
    x, by_hand = launched_by_hand(scoped_in_compiled_kernel, 256)
    root = outputs_and_profile("scoped_by_hand", by_hand)
    assert torch.equal(by_hand()[0], x * 3.0)
    assert scope_counts(root, "scoped_in_compiled_kernel", "user_scope") == [64 * 4], dump(root)


def test_a_scoped_kernel_launched_outside_the_compiled_graph_keeps_its_scopes():
    # Launched from a function torch.compile leaves out of its graph, such a kernel runs as
    # Triton's JIT kernel does.
    @torch.compiler.disable
    def launch(x):
        out = torch.empty_like(x)
        scoped_in_compiled_kernel[(x.numel() // 256,)](x, out, BLOCK=256, num_warps=4)
        return out

    f = torch.compile(lambda x: launch(x).sin() + 1)
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)

    def run():
        y = f(x)
        torch.cuda.synchronize()
        return [y]

    root = outputs_and_profile("disabled", run)
    assert scope_counts(root, "scoped_in_compiled_kernel", "user_scope") == [256 * 4]
    inductor = [c for c in root["children"] if c["frame"]["name"].startswith("triton_")]
    assert len(inductor) == 1 and inductor[0]["metrics"]["cycles"] > 0, dump(root)


@triton.jit
def plain_user_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) * 2.0 + 1.0)


def triton_kernel_nodes(root, prefix):
    nodes = [c for c in root["children"] if c["frame"]["name"].startswith(prefix)]
    assert nodes, dump(root)
    for node in nodes:
        m = node["metrics"]
        assert m["count"] == 1 and m["cycles"] >= m["normalized_cycles"] > 0, dump(root)
    return nodes


def test_binaries_loaded_before_the_session_run_instrumented_through_triton_s_launcher():
    # Launches that do not go through Triton's JIT run the binary loaded before the session
    # through Triton's CUDA launcher: a CompiledKernel launched by hand, a user kernel inside a
    # compiled function, Inductor's kernels with its static launcher off.
    x, by_hand = launched_by_hand(plain_user_kernel, 1024)
    root = outputs_and_profile("by_hand", by_hand)
    assert triton_kernel_nodes(root, "plain_user_kernel")[0]["metrics"]["count"] == 1

    def with_user_kernel(x):
        y = torch.empty_like(x)
        plain_user_kernel[(x.numel() // 1024,)](x.sin(), y, BLOCK=1024, num_warps=4)
        return y * 3

    f = torch.compile(with_user_kernel)
    root = outputs_and_profile("user_kernel_compiled", lambda: [f(x)])
    triton_kernel_nodes(root, "plain_user_kernel")
    with torch._inductor.config.patch(use_static_triton_launcher=False):
        g = torch.compile(lambda x: x.cos() * 5 + 2)
        g(x)  # compiled now, for Triton's launcher
    root = outputs_and_profile("no_static_launcher", lambda: [g(x)])
    triton_kernel_nodes(root, "triton_")


def test_torch_compile_with_launch_hooks_in_the_session_is_instrumented():
    # With hook="triton" installed when Inductor loads its kernels, it launches them through
    # Triton's launcher (its static launcher takes no hooks): loaded in the session, each
    # kernel is known by Triton's load hook.
    x = torch.arange(1 << 14, device="cuda", dtype=torch.float32)
    h = torch.compile(lambda x: x.exp() - 4)
    proton.start("hooked_inductor", backend="instrumentation", hook="triton")
    y = h(x)
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(y, x.exp() - 4)
    root = load_hatchet("hooked_inductor.hatchet")[0]
    # Inductor also benchmarks the kernel as it loads it (as many launches as it likes).
    (node,) = [c for c in root["children"] if c["frame"]["name"].startswith("triton_")]
    assert node["metrics"]["cycles"] >= node["metrics"]["normalized_cycles"] > 0, dump(root)


FIRST_COMPILE_IN_SESSION = """
import json, sys, torch, proton
assert "torch._inductor.runtime.static_triton_launcher" not in sys.modules
x = torch.arange(1 << 12, device="cuda", dtype=torch.float32)
proton.start("fresh", backend="instrumentation")
y = torch.compile(lambda x: x * 2 + 1)(x)  # Inductor's first import and compile, in the session
torch.cuda.synchronize()
proton.finalize()
assert torch.equal(y, x * 2 + 1)
root = json.load(open("fresh.hatchet"))[0]
print(json.dumps([(c["frame"]["name"], c["metrics"].get("cycles", 0)) for c in root["children"]]))
"""


def test_torch_compile_first_used_inside_the_session_is_instrumented(tmp_path):
    # Nothing of Inductor's is imported when the session starts: its launcher is taken over as
    # PyTorch first imports it.
    r = run_python(FIRST_COMPILE_IN_SESSION, tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    kernels = [
        k for k in json.loads(r.stdout.strip().splitlines()[-1]) if k[0].startswith("triton_")
    ]
    assert len(kernels) == 1 and kernels[0][1] > 0, r.stdout


@triton.jit
def graphed_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("body"):
        v = tl.load(x + offs) * 2.0 + 1.0
    tl.store(out + offs, v)


def test_a_kernel_captured_into_a_cuda_graph_records_every_replay():
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out = torch.zeros_like(x)
    proton.start("graphed", backend="instrumentation")
    graphed_kernel[(4,)](x, out, BLOCK=1024, num_warps=4)  # compiled for the session, eagerly
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    out2 = torch.zeros_like(x)
    with proton.scope("capture"), torch.cuda.graph(g):  # two launches: two slots, one copy
        graphed_kernel[(4,)](x, out, BLOCK=1024, num_warps=4)
        graphed_kernel[(4,)](out, out2, BLOCK=1024, num_warps=4)
    out.zero_()
    with proton.scope("replays"):
        for _ in range(5):
            g.replay()
    with proton.scope("more_replays"):
        g.replay()
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(out, x * 2 + 1) and torch.equal(out2, out * 2 + 1)
    root = load_hatchet("graphed.hatchet")[0]
    # Every replay's scopes, under the frame kernel tracing files the replay's kernels at:
    # <replay context>/<captured_at>/<capture context>/<kernel>, 4 CTAs x 4 warps per launch.
    for replays, launches in (("replays", 2 * 5), ("more_replays", 2 * 1)):
        kernel = find(root, replays, "<captured_at>", "capture", "graphed_kernel")
        assert kernel["metrics"]["count"] == launches, dump(root)
        assert find(kernel, "body")["metrics"]["count"] == launches * 4 * 4, dump(root)
        m = kernel["metrics"]
        # normalized_cycles: per warp and launch, summed over the launches.
        assert m["cycles"] == pytest.approx(m["normalized_cycles"] * 16, rel=1e-9), dump(root)
    eager = find(root, "graphed_kernel")
    assert eager["metrics"]["count"] == 1 and find(eager, "body")["metrics"]["count"] == 16


def test_a_kernel_captured_into_a_cuda_graph_in_a_trace_records_every_replay():
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out, out2 = torch.zeros_like(x), torch.zeros_like(x)
    proton.start("graphed_trace", backend="instrumentation", data="trace")
    graphed_kernel[(4,)](x, out, BLOCK=1024, num_warps=4)  # compiled for the session, eagerly
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graphed_kernel[(4,)](x, out, BLOCK=1024, num_warps=4)
        graphed_kernel[(4,)](out, out2, BLOCK=1024, num_warps=4)
    out.zero_()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    proton.finalize()
    assert torch.equal(out, x * 2 + 1) and torch.equal(out2, out * 2 + 1)
    with open("graphed_trace.chrome_trace") as trace:
        events = json.load(trace)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"] == "graphed_kernel"]
    body = [e for e in events if is_warp(e) and e["name"] == "body"]
    assert len(kernels) == 1 + 3 * 2
    # The eager launch and 3 replays of 2 launches, 4 CTAs x 4 warps each.
    assert len(body) == (1 + 3 * 2) * 16
    # Each warp's slice sits inside one of the kernel's slices (1 us for clock granularity):
    # a replay's slices keep the GPU's %globaltimer, which kernel records share.
    for w in body:
        assert any(
            k["ts"] - 1.0 <= w["ts"] and w["ts"] + w["dur"] <= k["ts"] + k["dur"] + 1.0
            for k in kernels
        ), (w, [(k["ts"], k["dur"]) for k in kernels])
