"""The frames given to torch.compile's kernels (proton/frameworks/_inductor_frames.py): names
from Inductor's records, merged across the places a kernel serves, kept beside its source."""

import types

from proton.frameworks import _inductor_frames as frames


def _node(stack, target, backward_stack=None, original=None):
    meta = {}
    if stack is not None:
        meta["nn_module_stack"] = {str(i): entry for i, entry in enumerate(stack)}
    if backward_stack is not None:
        meta["fwd_nn_module_stack"] = {str(i): entry for i, entry in enumerate(backward_stack)}
    if original is not None:
        meta["original_aten"] = original
    return types.SimpleNamespace(meta=meta, target=target, op="call_function")


def test_dynamo_module_names_read_as_the_user_writes_them():
    assert frames.module_path("L['self'].encoder.layers[3].linear1") == "encoder.layers.3.linear1"
    assert frames.module_path("getattr(L['self'].layers, '0')") == "layers.0"
    assert frames.module_path("L['self']._modules['fc']") == "fc"
    assert frames.module_path("self.blocks.2") == "blocks.2"
    assert frames.module_path("L['self']") == ""


def test_module_frames_are_relative_to_the_enclosing_module():
    stack = [
        ("L['self'].encoder", "torch.nn.modules.transformer.TransformerEncoder"),
        ("L['self'].encoder.layers[3]", "torch.nn.modules.transformer.TransformerEncoderLayer"),
        ("L['self'].encoder.layers[3].linear1", "torch.nn.modules.linear.Linear"),
    ]
    assert frames.module_frames(stack) == [
        "encoder (TransformerEncoder)",
        "layers.3 (TransformerEncoderLayer)",
        "linear1 (Linear)",
    ]


def test_a_kernel_gets_the_path_its_nodes_share_and_their_operators():
    layer = ("L['self'].layers[0]", "Block")
    a = _node([layer, ("L['self'].layers[0].fc", "Linear")], "aten.addmm.default")
    b = _node([layer, ("L['self'].layers[0].act", "GELU")], "aten.gelu.default")
    assert frames.kernel_frames([a, b], backward=False) == (
        "layers.0 (Block)",
        "fused: aten::addmm, aten::gelu",
    )
    grad = _node(None, "aten.mul.Tensor", backward_stack=[layer], original="aten.gelu_backward")
    assert frames.kernel_frames([grad], backward=True) == (
        "layers.0 (Block)",
        "backward: fused: aten::gelu_backward",
    )


def test_a_kernel_reused_by_several_layers_keeps_the_path_above_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PROTON_CACHE_DIR", str(tmp_path / "cache"))
    source = "@triton.jit\ndef triton_poi_fused_gelu_0(x):\n    pass\n"
    key = frames.source_key(source)
    frames.record(key, ("model (M)", "layers.0 (Block)", "fused: aten::gelu"))
    frames.record(key, ("model (M)", "layers.1 (Block)", "fused: aten::gelu"))
    assert frames.frames_of_key(key) == ("model (M)", "fused: aten::gelu")
    # A later process (Inductor's cache) reads them from Proton's cache, by the kernel file.
    frames._by_key.clear()
    kernel_file = tmp_path / "cabc.py"
    kernel_file.write_text(source + "\n")
    assert frames.frames_of_source_file(str(kernel_file)) == ("model (M)", "fused: aten::gelu")
    assert frames.frames_of_source_file(str(tmp_path / "unknown.py")) == ()
