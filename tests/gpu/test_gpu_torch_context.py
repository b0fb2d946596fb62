"""context="torch" and backward attribution on a real GPU: exact kernel counts under module
and operator frames, backward kernels under their forward module, the >=95% rule on an eager
MLP loop and a compiled transformer, a compiled model's kernels, a CUDA graph replay.

Kernel counts are exact where PyTorch's kernels are known (one elementwise kernel per aten::mul,
aten::relu and their backward); no timing is asserted."""

import proton
import pytest
from gpu_tree import dump, kernels_under
from proton_test_utils import find

torch = pytest.importorskip("torch")

from torch_models import make_compiled_transformer, make_mlp, time_share  # noqa: E402

STEPS = 5


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2


def _small():
    return torch.nn.Sequential(Scale(), torch.nn.ReLU()).cuda()


def _root(session):
    return proton.data.get(session)[0]


def _count(node):
    return sum(c for _, c in kernels_under(node))


def test_forward_kernels_are_counted_under_their_module_and_operator():
    model, x = _small(), torch.randn(4096, device="cuda")
    s = proton.start("fwd", context="torch")
    with torch.no_grad():
        for _ in range(STEPS):
            with proton.scope("step"):
                model(x)
    proton.deactivate(s, flushing=True)
    root = _root(s)
    seq = find(root, "step", "Sequential")
    assert _count(find(seq, "0 (Scale)", "aten::mul")) == STEPS, dump(root)
    assert _count(find(seq, "1 (ReLU)", "aten::relu")) == STEPS, dump(root)
    assert _count(seq) == 2 * STEPS, dump(root)
    proton.finalize(s)


@pytest.mark.parametrize("context", ["torch", "python,torch"])
def test_backward_kernels_go_under_the_forward_module(context):
    model = _small()
    x = torch.randn(4096, device="cuda", requires_grad=True)
    s = proton.start("bwd", context=context)
    for _ in range(STEPS):
        x.grad = None
        with proton.scope("step"):
            model(x).sum().backward()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    # With Python frames, "step" sits under the forward's and the backward() call's frames
    # alike: sum over every module node of that name.
    assert _count_at(root, "0 (Scale)", "backward: aten::mul") == STEPS, dump(root)
    assert _count_at(root, "1 (ReLU)", "backward: aten::relu") == STEPS, dump(root)
    assert _count_at(root, "0 (Scale)", "aten::mul", forward_only=True) == STEPS, dump(root)
    # Nothing the backward pass launched is left at the root or under the engine's frames.
    steps = _outermost(root, "step")
    assert sum(_count(n) for n in steps) == _count(root), dump(root)
    proton.finalize(s)


def _count_at(root, module, below, forward_only=False):
    """Kernels under the frames named `below` inside the frames named `module` (with Python
    frames, torch's own frames may sit between the two); forward_only: not inside the module's
    `backward: ...` frames (a backward operator runs forward operators of its own)."""
    return sum(
        _count(inner)
        for outer in _outermost(root, module)
        for c in outer["children"]
        if not (forward_only and c["frame"]["name"].startswith("backward: "))
        for inner in _outermost(c, below)
    )


def _outermost(node, name):
    if node["frame"]["name"] == name:
        return [node]
    return [m for c in node["children"] for m in _outermost(c, name)]


def _walk(node):
    yield node
    for c in node["children"]:
        yield from _walk(c)


def _first(node, name):
    return next(n for n in _walk(node) if n["frame"]["name"] == name)


@pytest.mark.parametrize("context", ["python", "shadow", "python,torch"])
@pytest.mark.parametrize("program", ["mlp", "compiled_transformer"])
def test_at_least_95_percent_of_gpu_time_is_under_the_step(context, program):
    train_step = make_mlp() if program == "mlp" else make_compiled_transformer()
    for _ in range(3):  # compile and warm up outside the profile
        train_step()
    torch.cuda.synchronize()
    s = proton.start(program, context=context)
    for _ in range(STEPS):
        with proton.scope("train"):
            train_step()
    torch.cuda.synchronize()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    if context == "shadow":
        share, total = time_share(root, lambda n: n == "train")
    else:
        share, total = time_share(root, lambda n: n.endswith("@train_step"))
    assert total > 0
    assert share >= 0.95, f"{share:.3f} of GPU time under the step\n{dump(root)[:20000]}"
    proton.finalize(s)


def _compiled_linear_gelu(monkeypatch):
    """A compiled Linear + GELU and its input, compiled afresh by this process's Inductor (a
    graph from Inductor's caches would come from an earlier compile)."""
    import torch._inductor.config as inductor_config

    if hasattr(inductor_config, "force_disable_caches"):
        monkeypatch.setattr(inductor_config, "force_disable_caches", True)
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()).cuda()
    return torch.compile(model), torch.randn(64, 256, device="cuda", requires_grad=True)


def test_compiled_model_kernels_carry_fused_operators_forward_and_backward(monkeypatch):
    compiled, x = _compiled_linear_gelu(monkeypatch)
    s = proton.start("compiled", context="torch")  # compiled inside: Inductor's records
    for _ in range(STEPS):
        compiled(x).sum().backward()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    names = [n["frame"]["name"] for n in _walk(root)]
    fused = [n for n in names if n.startswith("fused: ")]
    assert any("aten::gelu" in n for n in fused), dump(root)
    assert any(n.startswith("backward: fused: ") for n in names), dump(root)
    compiled_root = find(root, "Sequential, compiled")
    assert _count(compiled_root) > 0
    proton.finalize(s)


def test_a_model_compiled_before_the_session_keeps_its_kernels_module_paths(monkeypatch):
    # The usual order: compile and warm up, then profile. Code generation ran with no session.
    compiled, x = _compiled_linear_gelu(monkeypatch)
    compiled(x).sum().backward()  # compiled here, outside any session
    torch.cuda.synchronize()
    s = proton.start("precompiled", context="torch")
    for _ in range(STEPS):
        compiled(x).sum().backward()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    names = [n["frame"]["name"] for n in _walk(root)]
    fused = [n for n in _walk(root) if n["frame"]["name"].startswith("fused: ")]
    gelu = [n for n in fused if "aten::gelu" in n["frame"]["name"]]
    assert gelu and sum(_count(n) for n in gelu) >= STEPS, dump(root)
    assert any(n.startswith("backward: fused: ") for n in names), dump(root)
    proton.finalize(s)


def test_cuda_graph_replays_keep_the_captures_operator_context():
    model, x = _small(), torch.randn(4096, device="cuda")
    s = proton.start("graph", context="torch")
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        model(x)  # warm up on the capture stream
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            with proton.scope("capture"):
                model(x)
    torch.cuda.synchronize()
    with proton.scope("replays"):
        for _ in range(3):
            graph.replay()
    torch.cuda.synchronize()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    replays = find(root, "replays")
    captured = [n for n in _walk(replays) if n["frame"]["name"] == "<captured_at>"]
    assert len(captured) == 1, dump(root)
    scale = _first(captured[0], "0 (Scale)")
    assert _count(find(scale, "aten::mul")) == 3, dump(root)
    proton.finalize(s)


def test_backward_attribution_under_python_context_reaches_the_backward_call():
    train_step = make_mlp(width=256, depth=2, batch=8)
    train_step()
    s = proton.start("pyback", context="python")
    train_step()
    torch.cuda.synchronize()
    proton.deactivate(s, flushing=True)
    root = _root(s)
    steps = [n for n in _walk(root) if n["frame"]["name"].endswith("@train_step")]
    backward = [
        n for step in steps for n in _walk(step) if n["frame"]["name"].endswith("@backward")
    ]
    # Under the line of train_step that called backward(): torch's backward() frames, then
    # the engine threads' kernels.
    assert backward and sum(_count(n) for n in backward) > 0, dump(root)
    proton.finalize(s)


def test_triton_hook_names_a_kernel_launched_inside_a_module():
    triton = pytest.importorskip("triton")
    tl = pytest.importorskip("triton.language")

    def metadata(grid, kernel, args):
        return {"name": "scaled_add", "flops32": args["n"]}

    @triton.jit(launch_metadata=metadata)
    def add_kernel(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=m) * 2, mask=m)

    class TritonScale(torch.nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            add_kernel[(4,)](x, out, x.numel(), BLOCK=1024)
            return out

    model, x = torch.nn.Sequential(TritonScale()).cuda(), torch.randn(4096, device="cuda")
    model(x)  # compiled before the session
    s = proton.start("hooked", context="torch", hook="triton")
    for _ in range(STEPS):
        model(x)
    proton.deactivate(s, flushing=True)
    root = _root(s)
    node = find(root, "Sequential", "0 (TritonScale)", "scaled_add")
    assert node["metrics"]["count"] == STEPS, dump(root)
    assert node["metrics"]["flops32"] == STEPS * 4096, dump(root)
    proton.finalize(s)
