"""Triton kernels with scopes that several GPU test files launch (imported after their
importorskip of triton, so that a machine without it skips them)."""

import proton.language as pl
import triton
import triton.language as tl


@triton.jit
def scoped_matmul_kernel(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A software-pipelined K loop (num_stages=3) with one scope per half of its body.
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


@triton.jit
def counted_kernel(out, N: tl.constexpr):
    # N dependent multiply-adds in one scope, one program per CTA: exact counts per warp.
    v = tl.program_id(0).to(tl.float32)
    with pl.scope("work"):
        for _ in tl.static_range(N):
            v = v * 1.5 + 1.0
    tl.store(out + tl.program_id(0), v)


@triton.jit
def scoped_in_compiled_kernel(x, out, BLOCK: tl.constexpr):
    # One scope around a load and a multiply: the kernel torch.compile's graphs launch.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("user_scope"):
        v = tl.load(x + offs) * 3.0
    tl.store(out + offs, v)
