"""Run by test_pcsampling.py::test_sampling_after_twenty_earlier_sessions in a process of its
own, in the directory it is started in: twenty sessions of every kind of tracing, then a
sampling session over a Triton kernel compiled inside it and a torch kernel. Prints one JSON
line: {kernel name: [count, samples including its lines]} and the non-user sample count."""

import json

import proton
import torch
import triton
import triton.language as tl

x = torch.randn(1 << 16, device="cuda")
for i in range(20):
    proton.start(
        f"earlier{i}", hook="triton" if i % 2 else None, data="trace" if i % 5 == 4 else "tree"
    )
    with proton.scope("s"):
        torch.ones(1000, device="cuda")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x * 2
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = x * 2
        graph.replay()
        torch.cuda.nvtx.range_push("r")
        torch.add(x, x)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    proton.finalize()


@triton.jit
def chase_kernel(next_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = offs
    for _ in range(steps):
        i = tl.load(next_ptr + i)
    tl.store(out_ptr + offs, i)


N = 1 << 18
perm = torch.randperm(N, device="cuda").to(torch.int32)
out = torch.empty(N, dtype=torch.int32, device="cuda")
torch.cuda.synchronize()
proton.start("sampled", mode="pcsampling", hook="triton")
for _ in range(3):
    chase_kernel[(N // 128,)](perm, out, 2000, BLOCK=128)  # compiled and loaded while sampling
    torch.ones(1 << 24, device="cuda")
torch.cuda.synchronize()
proton.finalize()

with open("sampled.hatchet") as f:
    root = json.load(f)[0]


def inclusive(node):
    return node["metrics"].get("num_samples", 0) + sum(inclusive(c) for c in node["children"])


kernels = {}


def walk(node):
    frame = node["frame"]["name"]
    name = "chase_kernel" if "chase_kernel" in frame else "torch" if "elementwise" in frame else ""
    if name and node["metrics"].get("count"):  # kernel nodes (the root carries every key)
        count, samples = kernels.get(name, (0, 0))
        kernels[name] = (count + node["metrics"]["count"], samples + inclusive(node))
    for c in node["children"]:
        walk(c)


walk(root)
stats = dict(root["proton_metadata"]["stats"])
print(
    json.dumps(
        {
            "kernels": kernels,
            "total": inclusive(root),
            "non_user": stats.get("pc_samples_in_non_user_kernels", 0),
        }
    )
)
