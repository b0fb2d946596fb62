"""Intra-kernel profiling: cycles per scope inside Triton kernels, as a tree and a timeline.

python3 examples/intra_kernel.py      # needs an NVIDIA GPU, torch and triton
proton-viewer -m normalized_cycles intra_tree.hatchet
# open intra_trace.chrome_trace in https://ui.perfetto.dev

The trace is written twice: intra_trace.chrome_trace in the default layout ("full": warp slices
as triton.profiler writes them, then kernel slices, CPU scopes and launch flows on one clock)
and intra_trace_triton.chrome_trace in triton.profiler's own (its warp slices, nothing else).
"""

import proton
import proton.language as pl
import torch
import triton
import triton.language as tl


@triton.jit
def vadd(x, y, out, n, BLOCK: tl.constexpr):  # no scopes: the kernel's own scope only
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def matmul(a, b, c, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        with pl.scope("load"):
            x = tl.load(a + offs_m[:, None] * K + (k + offs_k)[None, :])
            y = tl.load(b + (k + offs_k)[:, None] * K + offs_n[None, :])
        pl.enter_scope("mma")
        acc = tl.dot(x, y, acc)
        pl.exit_scope("mma")
    tl.store(c + offs_m[:, None] * K + offs_n[None, :], acc)


def work():
    n, K = 1 << 20, 1024
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    a = torch.randn(K, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, K, device="cuda", dtype=torch.float16)
    c = torch.empty(K, K, device="cuda", dtype=torch.float32)
    with proton.scope("step"):
        vadd[(n // 1024,)](x, x, out, n, BLOCK=1024)
        matmul[(K // 128, K // 128)](a, b, c, K=K, BM=128, BN=128, BK=64, num_warps=8)


for name, data, layout in (
    ("intra_tree", "tree", "full"),
    ("intra_trace", "trace", "full"),
    ("intra_trace_triton", "trace", "triton"),
):
    mode = proton.mode.Default(trace_layout=layout)
    proton.start(name, backend="instrumentation", data=data, mode=mode)
    work()
    proton.finalize()
    print(f"wrote {name}.{'hatchet' if data == 'tree' else 'chrome_trace'}")
