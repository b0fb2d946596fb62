"""Where a PyTorch training step spends its GPU time: a torch.compile'd transformer encoder
(6 layers, bf16, AdamW) profiled with Python frames, modules and operators in one tree.

    python examples/torch_training.py [context] [steps]      # needs an NVIDIA GPU
    proton-viewer -d 6 torch_training.hatchet

`context` defaults to "python,torch": Python frames, with each nn.Module and aten operator
spliced in where the interpreter called it; the backward pass is filed under the
`loss.backward()` line that asked for it. Try "torch" (modules and operators only) or
"python". The script prints the share of GPU time under train_step (the rest is the
optimizer's first steps and what ran outside the step).
"""

import sys

import proton
import torch


def build(batch=16, seq=256, d_model=512):
    layer = torch.nn.TransformerEncoderLayer(
        d_model, 8, dim_feedforward=4 * d_model, batch_first=True
    )
    model = torch.nn.Sequential(
        torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False),
        torch.nn.Linear(d_model, d_model),
    ).to(device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, seq, d_model, device="cuda", dtype=torch.bfloat16)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = compiled(x).float().square().mean()
        loss.backward()
        opt.step()

    return train_step


def gpu_time(node):
    return node["metrics"].get("time (ns)", 0) + sum(gpu_time(c) for c in node["children"])


def time_under(node, suffix):
    if node["frame"]["name"].endswith(suffix):
        return gpu_time(node)
    return sum(time_under(c, suffix) for c in node["children"])


def main():
    context = sys.argv[1] if len(sys.argv) > 1 else "python,torch"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if not torch.cuda.is_available():
        sys.exit("this example needs an NVIDIA GPU")
    train_step = build()
    for _ in range(3):  # compile and warm up outside the profile
        train_step()
    torch.cuda.synchronize()
    session = proton.start("torch_training", context=context)
    for _ in range(steps):
        train_step()
    proton.deactivate(session, flushing=True)  # every kernel's time is in the tree
    root = proton.data.get(session)[0]
    proton.finalize(session)
    total = gpu_time(root)
    print(f"GPU time {total / 1e6:.1f} ms over {steps} steps")
    if "python" in context.split(","):
        share = time_under(root, "@train_step") / total if total else 0.0
        print(f"{share:.1%} of it under train_step")
    print("view it: proton-viewer -d 6 torch_training.hatchet")


if __name__ == "__main__":
    main()
