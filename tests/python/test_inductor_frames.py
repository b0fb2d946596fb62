"""The frames given to torch.compile's kernels (proton/frameworks/_inductor_frames.py): names
from Inductor's records, merged across the places a kernel serves, kept beside its source."""

import types

import pytest
from proton import _C
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


def test_kernels_generated_with_no_session_live_get_their_frames(tmp_path, monkeypatch):
    # A model compiled before proton.start (a warm-up, say) keeps its kernels' frames: code
    # generation is watched from `import proton` on, with or without a session.
    virtualized = pytest.importorskip("torch._inductor.virtualized")
    codegen = pytest.importorskip("torch._inductor.codegen.triton")
    assert getattr(codegen.TritonScheduling.define_kernel, "_proton_original", None)
    assert not _C.framework_live()
    monkeypatch.setenv("PROTON_CACHE_DIR", str(tmp_path))

    class Scheduling:  # Inductor's TritonScheduling, as far as the patch sees it
        def define_kernel(self, src_code, node_schedule, kernel):
            return "triton_poi_fused_gelu_7"

        def _emit_kernel_to_wrapper(self, wrapper, kernel, src, name, subs, schedule, path):
            return None

    frames._patch_codegen(types.SimpleNamespace(TritonScheduling=Scheduling))
    layer = ("L['self'].layers[0]", "Block")
    origins = [_node([layer, ("L['self'].layers[0].act", "GELU")], "aten.gelu.default")]
    ir_node = types.SimpleNamespace(origins=origins)
    schedule = [types.SimpleNamespace(get_nodes=lambda: [types.SimpleNamespace(node=ir_node)])]
    source = "@triton.jit\ndef triton_poi_fused_gelu_7(x):\n    pass\n"
    wrapper = types.SimpleNamespace()
    with virtualized.V.set_graph_handler(
        types.SimpleNamespace(wrapper_code=wrapper, is_backward=False)
    ):
        scheduling = Scheduling()
        scheduling._emit_kernel_to_wrapper(
            wrapper, None, source, "triton_poi_fused_gelu_7", "triton_", schedule, "k.py"
        )
        assert scheduling.define_kernel(source, schedule, None) == "triton_poi_fused_gelu_7"
    expected = ("layers.0 (Block)", "act (GELU)", "fused: aten::gelu")
    assert frames.frames_of_key(frames.source_key(source)) == expected
    frames._by_key.clear()  # a later process: Proton's cache has them
    kernel_file = tmp_path / "c7.py"
    kernel_file.write_text(source)
    assert frames.frames_of_source_file(str(kernel_file)) == expected
