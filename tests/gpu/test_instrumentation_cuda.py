"""proton/instrument.cuh on a real GPU: scopes in a CUDA C++ kernel built with nvcc (a torch
C++ extension) land under the kernel's own frame, nested, with exact counts; a trace has
their slices on warp lanes; outside a session the kernel runs as before."""

import json
import os

import proton
import pytest
from gpu_tree import dump, is_warp
from proton_test_utils import find, load_hatchet

torch = pytest.importorskip("torch")
cpp_extension = pytest.importorskip("torch.utils.cpp_extension")

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <proton/instrument.cuh>

__global__ void scaled_kernel(float *x, int n) {
  PROTON_SCOPE("body");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  proton::enter_scope("math");
  if (i < n) x[i] = x[i] * 2.0f + 1.0f;
  proton::exit_scope("math");
}

void scaled(torch::Tensor x) {
  int n = x.numel();
  scaled_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), n);
}

void scaled_on_stream(torch::Tensor x) {  // on PyTorch's current stream (a graph's capture)
  int n = x.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  scaled_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), n);
}
"""


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    # For this device only, and for this build only: a session-wide setting made every later
    # extension build in the run target Hopper, which fails on other GPUs.
    major, minor = torch.cuda.get_device_capability()
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    try:
        return _load(tmp_path_factory)
    finally:
        if arch is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch


def _load(tmp_path_factory):
    return cpp_extension.load_inline(
        name="proton_scoped_ext",
        cpp_sources="void scaled(torch::Tensor x);\nvoid scaled_on_stream(torch::Tensor x);",
        cuda_sources=SOURCE,
        functions=["scaled", "scaled_on_stream"],
        extra_include_paths=[proton.get_include()],
        build_directory=str(tmp_path_factory.mktemp("ext")),
    )


def run(ext, launches, n=1024):
    x = torch.ones(n, device="cuda")
    for _ in range(launches):
        ext.scaled(x)
    torch.cuda.synchronize()
    return x


def test_cuda_scopes_nest_under_the_kernels_frame_with_exact_counts(ext):
    run(ext, 1)  # the module is loaded (and seen by no session) before start
    proton.start("cuda", backend="instrumentation")
    out = run(ext, 3)
    proton.finalize()
    root = load_hatchet("cuda.hatchet")[0]
    kernel = find(root, "scaled_kernel(float*, int)")
    assert kernel is not None, dump(root)
    assert kernel["metrics"]["count"] == 3
    body = find(kernel, "body")
    math = find(body, "math") if body else None
    assert body and math, dump(root)
    warps = 1024 // 32
    assert body["metrics"]["count"] == 3 * warps and math["metrics"]["count"] == 3 * warps
    assert 0 < math["metrics"]["cycles"] <= body["metrics"]["cycles"]
    assert torch.equal(out, torch.full((1024,), 15.0, device="cuda"))  # 1 -> 3 -> 7 -> 15
    stats = json.dumps(load_hatchet("cuda.hatchet"))
    assert "instrumentation_native_events_unattributed" not in stats or (
        '"instrumentation_native_events_unattributed": 0' in stats
    )


def test_cuda_scopes_in_a_trace_are_warp_slices(ext):
    proton.start("cudatrace", backend="instrumentation", data="trace")
    run(ext, 1, n=256)
    proton.finalize()
    events = json.load(open("cudatrace.chrome_trace"))["traceEvents"]
    slices = [e for e in events if is_warp(e)]
    assert sorted(e["name"] for e in slices) == ["body"] * 8 + ["math"] * 8
    assert all("sm" in e["args"] and e["args"]["cycles"] > 0 for e in slices)
    kernel = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("scaled")]
    assert len(kernel) == 1


def test_outside_a_session_the_kernel_records_nothing(ext):
    proton.start("after", backend="instrumentation")
    run(ext, 1)
    proton.finalize()
    proton.start("plain")
    out = run(ext, 1)
    proton.finalize()
    kernel = find(load_hatchet("plain.hatchet")[0], "scaled_kernel(float*, int)")
    assert kernel["metrics"]["count"] == 1 and not kernel["children"]
    assert torch.equal(out, torch.full((1024,), 3.0, device="cuda"))


def test_cuda_scopes_of_a_graphs_replays_go_where_their_kernels_are_filed(ext):
    x = torch.ones(1024, device="cuda")
    proton.start("cudagraph", backend="instrumentation")
    ext.scaled_on_stream(x)  # its module seen in the session before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with proton.scope("capture"), torch.cuda.graph(g):
        ext.scaled_on_stream(x)
    with proton.scope("replays"):
        for _ in range(3):
            g.replay()
    torch.cuda.synchronize()
    proton.finalize()
    root = load_hatchet("cudagraph.hatchet")[0]
    name = "scaled_kernel(float*, int)"
    kernel = find(root, "replays", "<captured_at>", "capture", name)
    warps = 1024 // 32
    assert kernel["metrics"]["count"] == 3, dump(root)
    assert find(kernel, "body")["metrics"]["count"] == 3 * warps, dump(root)
    assert find(root, name)["metrics"]["count"] == 1  # the eager launch
    assert torch.equal(x, torch.full((1024,), 31.0, device="cuda"))  # 1 -> 3 -> 7 -> 15 -> 31
