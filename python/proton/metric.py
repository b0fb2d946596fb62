"""triton.profiler's `metric` names.

    scalars, tensors = transform_tensor_metrics({"bytes": 8, "tokens": tokens_on_gpu})

transform_tensor_metrics splits a metrics dict as Proton records it: a GPU tensor becomes a
TensorMetric (its address, element count, dtype code, whether it is a list, device and
stream), which Proton copies on the device without waiting for it; a CPU tensor becomes its
value. Values are typed as triton.profiler types them (and Proton's core keeps them): a
`flops*` metric is a float (a list of floats), `bytes` an int (a list of ints); other values
stay as they are.
"""

from typing import Any, Dict, NamedTuple, Tuple

from . import _tensor

__all__ = ["TensorMetric", "transform_tensor_metrics"]


class TensorMetric(NamedTuple):
    data_ptr: int
    numel: int
    dtype: int  # the code of TensorDType in csrc/core/tensor_metric.h
    is_list: bool
    device: int
    stream: int


def _typed(name: str, value):
    """triton.profiler's rule: flops* as floats, bytes as ints (lists element-wise)."""
    if name.startswith("flops"):
        convert = float
    elif name == "bytes":
        convert = int
    else:
        return value
    if isinstance(value, (list, tuple)):
        return [convert(v) if isinstance(v, (int, float)) else v for v in value]
    return (
        convert(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    )


def transform_tensor_metrics(metrics: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(scalar metrics, tensor metrics) of a metrics dict; raises ConfigError for a tensor
    Proton cannot record (more than 1-d, a dtype that is not a number)."""
    scalars: Dict[str, Any] = {}
    tensors: Dict[str, TensorMetric] = {}
    for key, value in metrics.items():
        if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            described = _tensor.describe(key, value, True)
            if isinstance(described, tuple):
                tensors[key] = TensorMetric(*described)
                continue
            value = described
        scalars[key] = _typed(key, value)
    return scalars, tensors
