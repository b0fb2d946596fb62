"""Triton's matmul next to cuBLAS's, with TFLOP/s per problem size (needs an NVIDIA GPU).

    proton examples/matmul.py                  # writes proton.hatchet; the file asks for hook="triton"
    proton-viewer -m time/ms,tflop16/s proton.hatchet

or `python examples/matmul.py`, which starts its own session and writes matmul.hatchet. The Triton kernel declares
`launch_metadata`: each launch reports its FLOPs (flops16) and bytes and is renamed after its
tile sizes, so every autotuned config shows up as its own frame (under `autotune`). Each
problem size is one scope holding Triton's best kernel and cuBLAS's (torch.matmul, whose
FLOPs the `cublas` scope carries) side by side.
"""

import sys

import proton
import torch
import triton
import triton.language as tl

SIZES = (512, 1024, 2048, 4096)
REPEATS = 10


def matmul_metadata(grid, kernel_metadata, args):
    a, b = args["a_ptr"], args["b_ptr"]
    m, n, k = args["M"], args["N"], args["K"]
    name = f"triton_matmul_{args['BLOCK_M']}x{args['BLOCK_N']}x{args['BLOCK_K']}"
    return {
        "name": name,
        "flops16": 2 * m * n * k,
        "bytes": (m * k + k * n) * a.element_size() + m * n * b.element_size(),
    }


def configs():
    shapes = [(128, 128, 64, 4, 4), (128, 256, 64, 3, 8), (64, 128, 32, 4, 4)]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w
        )
        for bm, bn, bk, s, w in shapes
    ]


@triton.autotune(configs=configs(), key=["M", "N", "K"])
@triton.jit(launch_metadata=matmul_metadata)
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    # Grouped ordering of the output tiles, for L2 reuse.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    group_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m

    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


def triton_matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), device=a.device, dtype=torch.float16)

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    matmul_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )  # fmt: skip
    return c


def main(name="matmul"):
    if not torch.cuda.is_available():
        sys.exit("examples/matmul.py needs an NVIDIA GPU")
    session = proton.start(name, hook="triton")  # a no-op under the `proton` command line
    for size in SIZES:
        a = torch.randn((size, size), device="cuda", dtype=torch.float16)
        b = torch.randn((size, size), device="cuda", dtype=torch.float16)
        with proton.scope(f"size_{size}"):
            with proton.scope("autotune"):  # every config, timed by Triton's autotuner
                triton_matmul(a, b)
            for _ in range(REPEATS):
                c = triton_matmul(a, b)  # the best config
            with proton.scope("cublas", {"flops16": 2 * size**3 * REPEATS}):
                for _ in range(REPEATS):
                    ref = torch.matmul(a, b)
        torch.testing.assert_close(c, ref, atol=1e-1, rtol=1e-2)
    torch.cuda.synchronize()
    if session is not None:
        proton.finalize()
        print(f"profile written to {name}.hatchet; view it with:")
        print(f"  proton-viewer -m time/ms,tflop16/s {name}.hatchet")


if __name__ == "__main__":
    main(*sys.argv[1:2])
