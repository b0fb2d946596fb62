"""Tensor metric values without a GPU: tensors are recognised by duck typing (no torch
import), checked for shape and dtype, and, when no GPU backend records device values, read
as host values. Trace scopes with metrics are slices even when they launched no kernel.
The device path (copies on the stream, graph replays) is tested in tests/gpu."""

# ruff: noqa: SIM117

import json
import sys

import proton
import pytest
from proton.hooks.launch import metrics_of
from proton_test_utils import tree


class FakeDevice:
    def __init__(self, kind):
        self.type = kind
        self.index = 0 if kind == "cuda" else None


class FakeTensor:
    """What proton reads of a torch.Tensor: dim, dtype, numel, device, tolist."""

    def __init__(self, values, dtype="torch.int64", device="cpu"):
        self.values = values
        self.dtype = dtype
        self.device = FakeDevice(device)

    def dim(self):
        return 1 if isinstance(self.values, list) else 0

    def numel(self):
        return len(self.values) if isinstance(self.values, list) else 1

    def tolist(self):
        return self.values

    def data_ptr(self):
        return 0

    def is_contiguous(self):
        return True


def test_one_element_tensors_are_scalar_metrics_whatever_their_shape():
    s = proton.start("one_element")
    with proton.scope("a", {"one": FakeTensor([8.0], "torch.float32"), "zero_d": FakeTensor(2)}):
        pass
    assert tree(s)[2] == [("a", {"one": 8.0, "zero_d": 2}, [])]


def test_cpu_tensor_metrics_sum_like_scalars():
    s = proton.start("cpu_tensors")
    for _ in range(2):
        with proton.scope("a", {"n": FakeTensor(5), "v": FakeTensor([1.0, 2.5], "torch.float32")}):
            pass
    proton.enter_scope("b", metrics={"x": FakeTensor(1.5, "torch.float64")})
    proton.exit_scope("b", metrics={"y": FakeTensor(7, "torch.int32")})
    assert tree(s) == (
        "ROOT",
        {"n": 0, "x": 0, "y": 0},  # list metrics have no root entry
        [("a", {"n": 10, "v": [2.0, 5.0]}, []), ("b", {"x": 1.5, "y": 7}, [])],
    )
    proton.finalize(s)


def test_tensor_metrics_keep_exc_and_pty_suffixes():
    s = proton.start("suffixes")
    with proton.scope("a", {"p (pty)": FakeTensor(3)}):
        with proton.scope("b", {"e (exc)": FakeTensor(2)}):
            pass
    with proton.scope("a", {"p (pty)": FakeTensor(9)}):
        pass
    root = proton.data.get(s, 0)[0]
    (a,) = root["children"]
    assert a["metrics"]["p"] == 9
    assert a["children"][0]["metrics"]["e"] == 2
    proton.finalize(s)


def test_gpu_tensor_without_a_gpu_backend_is_read_as_a_host_value():
    # No GPU runtime here: no backend copies device values, so the value is read at once.
    s = proton.start("no_backend")
    with proton.scope("a", {"n": FakeTensor(4, device="cuda")}):
        pass
    assert tree(s) == ("ROOT", {"n": 0}, [("a", {"n": 4}, [])])
    proton.finalize(s)
    assert "torch" not in sys.modules or hasattr(sys.modules["torch"], "Tensor")


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (FakeTensor([[1, 2]]), None),
        (FakeTensor(1, "torch.bool"), "dtype torch.bool"),
        (FakeTensor(1, "torch.complex64"), "dtype torch.complex64"),
        (FakeTensor([], "torch.float32"), "0 elements"),
    ],
)
def test_tensor_metrics_of_a_refused_shape_or_dtype_raise_config_error(tensor, message):
    if message is None:
        tensor.dim = lambda: 2
        message = "2-d tensor"
    s = proton.start("refused")
    with pytest.raises(proton.ConfigError, match=message):
        with proton.scope("a", {"t": tensor}):
            pass
    assert proton.context.depth(s) == 0
    proton.finalize(s)


def test_tensor_metric_whose_type_conflicts_raises_metric_type_error():
    s = proton.start("conflict")
    with proton.scope("a", {"n": "text"}):
        pass
    with pytest.raises(proton.MetricTypeError, match="current=str, new=int"):
        with proton.scope("a", {"n": FakeTensor(1)}):
            pass
    proton.finalize(s)


def test_launch_metadata_keeps_tensor_values_for_the_core():
    t = FakeTensor(3)
    assert metrics_of({"name": "k", "flops": 2, "tokens": t, "note": "x"}) == {
        "flops": 2,
        "tokens": t,
    }


def test_trace_scope_with_metrics_and_no_kernel_is_a_slice_with_its_metrics(tmp_path):
    s = proton.start(str(tmp_path / "t"), data="trace")
    with proton.scope("step", {"tokens": 128, "t": FakeTensor(5)}):
        with proton.scope("inner"):
            pass
    proton.enter_scope("manual", metrics={"a": FakeTensor([1.0, 2.0], "torch.float32")})
    proton.exit_scope("manual", metrics={"b": 2})
    proton.finalize(s)
    trace = json.loads((tmp_path / "t.chrome_trace").read_text())
    slices = {e["args"]["call_stack"][-1]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    assert set(slices) == {"step", "inner", "manual"}
    assert slices["step"]["name"] == "step: <t, 5>, <tokens, 128>"
    assert slices["manual"]["args"]["metrics"] == {"a": "[1,2]", "b": "2"}
    assert (slices["step"]["args"]["tokens"], slices["step"]["args"]["t"]) == (128, 5)
    assert slices["step"]["args"]["call_stack"] == ["ROOT", "step"]
    assert slices["inner"]["args"]["call_stack"] == ["ROOT", "step", "inner"]
    assert (slices["manual"]["args"]["a"], slices["manual"]["args"]["b"]) == ([1.0, 2.0], 2)
    assert (slices["step"]["cat"], slices["inner"]["cat"]) == ("metric", "scope")
