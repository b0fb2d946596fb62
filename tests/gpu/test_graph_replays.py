"""Intra-kernel slots of CUDA graphs on the GPU: two executables of one graph replayed on two
streams at once, an executable updated from another graph (cuGraphExecUpdate), and CUDA C++
scopes of a module unloaded before the drain. Counts are exact: one per warp per iteration."""

import os
import shutil
import subprocess

import proton
import pytest
from gpu_tree import dump
from proton_test_utils import load_hatchet, run_program

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

SPIN = """
import ctypes, sys, torch, triton, triton.language as tl
import proton, proton.language as pl

@triton.jit
def spin(out, ITERS: tl.constexpr):
    acc = tl.zeros((128,), tl.float32)
    for _ in range(ITERS):
        with pl.scope("step"):
            acc = acc * 0.5 + 1.0
    tl.store(out + tl.program_id(0) * 128 + tl.arange(0, 128), acc)

cuda = ctypes.CDLL("libcuda.so.1")
try:
    kept = torch.cuda.CUDAGraph(keep_graph=True)
except TypeError:
    print("skip: this PyTorch cannot keep a CUDA graph after capture")
    sys.exit(0)


def captured(out, iters, stream):
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, stream=stream):
        spin[(4,)](out, ITERS=iters, num_warps=4)
    return g, ctypes.c_void_p(g.raw_cuda_graph())


def instantiated(graph):
    exec_ = ctypes.c_void_p()
    assert cuda.cuGraphInstantiateWithFlags(ctypes.byref(exec_), graph, ctypes.c_ulonglong(0)) == 0
    return exec_


def launch(exec_, stream):
    assert cuda.cuGraphLaunch(exec_, ctypes.c_void_p(stream.cuda_stream)) == 0
"""

TWO_STREAMS = (
    SPIN
    + """
ITERS, REPLAYS = 2000, 20
out = torch.zeros(4 * 128, device="cuda")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
proton.start("two_streams", backend="instrumentation")
spin[(4,)](out, ITERS=ITERS, num_warps=4)  # eager: compiled, the ring made
torch.cuda.synchronize()
g, graph = captured(out, ITERS, s1)
first, second = instantiated(graph), instantiated(graph)  # two executables of one graph
for _ in range(REPLAYS):  # each pair runs at once, on two streams, nothing in between
    launch(first, s1)
    launch(second, s2)
torch.cuda.synchronize()
proton.finalize()
print("ok")
"""
)


def counts(node, name):
    """The `count` of every node called `name`, added up over the tree."""
    here = node["metrics"].get("count", 0) if node["frame"]["name"] == name else 0
    return here + sum(counts(c, name) for c in node["children"])


def stats_of(root):
    return dict(root["proton_metadata"]["stats"])


def run_graph_program(code, tmp_path, profile):
    """Runs a program of SPIN (skipped where PyTorch cannot keep a graph) and returns the root
    of its profile."""
    r = run_program(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.startswith("skip:"):
        pytest.skip(r.stdout.strip())
    assert r.stdout.strip().endswith("ok"), r.stdout
    return load_hatchet(tmp_path / profile)[0]


def test_two_executables_of_one_graph_on_two_streams_record_every_replay(tmp_path):
    # Both executables' kernels record into the graph's slots, which each launch copies out
    # and clears on its own stream afterwards. Run at once, one replay's copy took part of the
    # other's sums and its clear wiped some of them. Now the second stream waits for the first
    # replay's copies before its graph runs.
    root = run_graph_program(TWO_STREAMS, tmp_path, "two_streams.hatchet")
    warps, iters, launches = 16, 2000, 1 + 2 * 20
    assert counts(root, "spin") == launches, dump(root)
    assert counts(root, "step") == launches * warps * iters, dump(root)
    stats = stats_of(root)
    assert stats["graph_replays_unordered"] == 0, stats
    assert stats.get("instrumentation_graph_launches_unrecorded", 0) == 0, stats


UPDATED = (
    SPIN
    + """
out1 = torch.zeros(4 * 128, device="cuda")
out2 = torch.zeros(4 * 128, device="cuda")
stream = torch.cuda.Stream()
proton.start("updated", backend="instrumentation")
spin[(4,)](out1, ITERS=8, num_warps=4)
torch.cuda.synchronize()
out1.zero_()
g1, graph1 = captured(out1, 8, stream)
g2, graph2 = captured(out2, 8, stream)
exec1 = instantiated(graph1)
info = (ctypes.c_byte * 64)()  # CUgraphExecUpdateResultInfo
assert cuda.cuGraphExecUpdate_v2(exec1, graph2, info) == 0
for _ in range(5):
    launch(exec1, stream)  # graph2's kernel now: it writes out2, and records into graph2's slots
torch.cuda.synchronize()
proton.finalize()
assert out2.abs().sum() > 0 and out1.abs().sum() == 0
print("ok")
"""
)


def test_an_updated_executable_records_into_its_new_graphs_slots(tmp_path):
    # The executable's kernels take graph2's parameters, its slot address among them: its
    # replays copied out graph1's slots (zeros) before, and graph2's filled up unread.
    root = run_graph_program(UPDATED, tmp_path, "updated.hatchet")
    assert counts(root, "spin") == 1 + 5, dump(root)
    assert counts(root, "step") == (1 + 5) * 16 * 8, dump(root)
    assert stats_of(root).get("instrumentation_graph_launches_unrecorded", 0) == 0


NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)

MODULE_SOURCE = r"""
#include <proton/instrument.cuh>
extern "C" __global__ void scoped(float *x) {
  PROTON_SCOPE(SCOPE_NAME);
  x[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;
}
"""

UNLOADED = """
import ctypes, sys, torch, proton
cuda = ctypes.CDLL("libcuda.so.1")
x = torch.zeros(4 * 64, device="cuda")
torch.cuda.synchronize()
proton.start("unloaded", backend="instrumentation")
for cubin, times in (("first.cubin", 3), ("second.cubin", 5)):
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(module), open(cubin, "rb").read()) == 0
    assert cuda.cuModuleGetFunction(ctypes.byref(function), module, b"scoped") == 0
    arg = ctypes.c_void_p(x.data_ptr())
    params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    for _ in range(times):
        assert cuda.cuLaunchKernel(function, 4, 1, 1, 64, 1, 1, 0, None, params, None) == 0
    assert cuda.cuCtxSynchronize() == 0
    assert cuda.cuModuleUnload(module) == 0  # before any drain
proton.finalize()
assert torch.equal(x, torch.full_like(x, 8.0))
print("ok")
"""


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_scopes_of_a_module_unloaded_before_the_drain_keep_their_names(tmp_path):
    # The drain read each scope's name from its module's memory, gone by then (or holding the
    # next module's name): the names are now read when the module is unloaded. The second
    # module, which may get the first one's handle, is set up at its own first launch.
    major, minor = torch.cuda.get_device_capability()
    (tmp_path / "scoped.cu").write_text(MODULE_SOURCE)
    for name in ("first", "second"):
        command = [NVCC, "-cubin", f"-arch=sm_{major}{minor}", "-std=c++17"]
        command += ["-I", proton.get_include(), f'-DSCOPE_NAME="{name}"']
        command += ["-o", str(tmp_path / f"{name}.cubin"), str(tmp_path / "scoped.cu")]
        built = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        assert built.returncode == 0, built.stderr
    r = run_program(UNLOADED, tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
    root = load_hatchet(tmp_path / "unloaded.hatchet")[0]
    assert counts(root, "scoped") == 3 + 5, dump(root)
    assert counts(root, "first") == 3 * 4 * 2, dump(root)  # 4 CTAs of 2 warps
    assert counts(root, "second") == 5 * 4 * 2, dump(root)
    assert counts(root, "<unnamed scope>") == 0, dump(root)
