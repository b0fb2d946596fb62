"""Tensor metric values: how a tensor given as a metric is read, without importing torch
unless the tensor lives on a GPU (then its current stream is needed).

Called by proton._C when a metric value has data_ptr, device and dtype (duck typing).
"""

from .errors import ConfigError

# dtype name -> code of TensorDType in csrc/core/tensor_metric.h
_DTYPES = {
    "torch.int64": 0,
    "torch.int32": 1,
    "torch.int16": 2,
    "torch.int8": 3,
    "torch.uint8": 4,
    "torch.float64": 5,
    "torch.float32": 6,
    "torch.float16": 7,
    "torch.bfloat16": 8,
}
_MAX_ELEMENTS = 1 << 16


def describe(name, value, on_device):
    """A device tensor as (data_ptr, numel, dtype_code, is_list, device_index, stream), or
    the host value (int, float or list) of a CPU tensor, or of any tensor when on_device is
    False (no GPU backend records device values: the value is read now, which waits for it).
    A tensor of one element is a scalar metric whatever its shape, as in triton.profiler; a
    1-d tensor of more is a list.
    """
    dims = value.dim()
    dtype = str(value.dtype)
    if dims > 1:
        raise ConfigError(
            f"[PROTON] metric '{name}' is a {dims}-d tensor; tensor metrics must be 0-d or 1-d"
        )
    if dtype not in _DTYPES:
        raise ConfigError(
            f"[PROTON] metric '{name}' has dtype {dtype}; tensor metrics must have an "
            "integer or floating-point dtype"
        )
    numel = value.numel()
    if dims == 1 and not 0 < numel <= _MAX_ELEMENTS:
        raise ConfigError(
            f"[PROTON] metric '{name}' has {numel} elements; a 1-d tensor metric needs "
            f"1 to {_MAX_ELEMENTS}"
        )
    is_list = dims == 1 and numel > 1
    device = value.device
    if device.type != "cuda" or not on_device:
        host = value.tolist()
        return host[0] if isinstance(host, list) and not is_list else host
    import torch  # only for a GPU tensor: its device's current stream

    if not value.is_contiguous():
        value = value.contiguous()  # ordered on the current stream, like the copy
    stream = torch.cuda.current_stream(device).cuda_stream
    return (value.data_ptr(), numel, _DTYPES[dtype], is_list, device.index or 0, stream)
