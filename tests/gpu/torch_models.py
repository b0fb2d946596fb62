"""The PyTorch programs of the GPU torch-context tests, the benchmark and
scripts/gpu_torch_check.sh: an eager MLP training loop and a torch.compile'd
nn.TransformerEncoder (6 layers, bf16) trained with AdamW. Each step runs in a function
named train_step, so a profile's share of GPU time under it can be read."""

import torch


def make_mlp(device="cuda", width=1024, depth=8, batch=64):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()

    return train_step


class Encoder(torch.nn.Module):
    def __init__(self, d_model=512, heads=8, layers=6):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(
            d_model, heads, dim_feedforward=4 * d_model, batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.head(self.encoder(x))


def make_compiled_transformer(device="cuda", batch=16, seq=256, d_model=512):
    model = Encoder(d_model).to(device=device, dtype=torch.bfloat16)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, seq, d_model, device=device, dtype=torch.bfloat16)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = compiled(x).float().square().mean()
        loss.backward()
        opt.step()

    return train_step


def time_share(root, matches):
    """Share of the tree's GPU time (time (ns)) inside the subtrees of nodes whose name
    satisfies matches(name), outermost match counted once."""

    def total(node):
        return node["metrics"].get("time (ns)", 0) + sum(total(c) for c in node["children"])

    def under(node):
        if matches(node["frame"]["name"]):
            return total(node)
        return sum(under(c) for c in node["children"])

    everything = total(root)
    return (under(root) / everything if everything else 0.0), everything
