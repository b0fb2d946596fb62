"""Frames of the Triton kernels torch.compile (Inductor) generates, for context="torch": the
module path of the code they were compiled from, then the original operators fused into them
("fused: aten::addmm, aten::gelu"; "backward: fused: ..." in a backward graph).

Inside a compiled graph no module hook and no operator runs, so Inductor's own record is used:
each FX node keeps the module stack it was traced under (nn_module_stack, or
fwd_nn_module_stack for a backward node) and the operator it came from (original_aten).
- At code generation (TritonScheduling.define_kernel, patched from `import proton` on, session
  or not, so a model compiled before the session started, during warm-up say, has them too):
  the kernel's frames are the module path its nodes share (a kernel reused by six layers gets
  the path above them) and the union of their operators. They are kept by a hash of the
  kernel's final source, in memory and in a file under Proton's cache
  (~/.cache/proton/inductor_frames/<hash>.json), so a later process that loads the compiled
  graph from Inductor's cache finds them too.
- At launch (CachingAutotuner.run, patched while a torch session is live): the kernel's source
  file (the autotuner's filename) is read once and hashed, and its frames are pushed around
  the launch (_C.enter_frames / exit_frames).
A kernel compiled before `import proton` (and not found in Proton's cache), or by an Inductor
whose internals differ, gets no frames of its own: it is filed under the frames open at its
launch, as before. Recording costs a walk over the kernel's FX nodes and one small file per
kernel, at compile time only.
Thread-safety: code generation and launches run under the GIL.
"""

import hashlib
import json
import os
import re

from .. import _C, _import_hooks

_CODEGEN_MODULE = "torch._inductor.codegen.triton"
_RUNTIME_MODULE = "torch._inductor.runtime.triton_heuristics"
_by_key = {}  # hash of a kernel's source -> frames (tuple of str)
_codegen_hook = None
_runtime_hook = None
_runtime_original = None  # CachingAutotuner.run while patched


# ---------------------------------------------------------------- names


def module_path(fqn: str) -> str:
    """Dynamo's module names as a user writes them: "L['self'].encoder.layers[3]" ->
    "encoder.layers.3"."""
    text = fqn or ""
    while True:
        new = re.sub(r"getattr\(([^,()]*), ['\"]([^'\"]*)['\"]\)", r"\1.\2", text)
        if new == text:
            break
        text = new
    text = re.sub(r"^L\[['\"][^'\"]*['\"]\]", "", text)
    text = re.sub(r"\._modules\[['\"]([^'\"]*)['\"]\]", r".\1", text)
    text = re.sub(r"\[['\"]?([^'\"\]]*)['\"]?\]", r".\1", text)
    text = re.sub(r"^self\b", "", text)
    return text.strip(".")


def _class_name(klass) -> str:
    if isinstance(klass, str):
        return klass.rsplit(".", 1)[-1]
    return getattr(klass, "__name__", str(klass))


def module_frames(stack) -> list:
    """Frames of one node's module stack (a list of (fqn, class)), each named relative to the
    one before, as the eager module hooks name them."""
    frames, outer = [], ""
    for fqn, klass in stack:
        path = module_path(fqn)
        if not path:
            continue
        relative = path[len(outer) + 1 :] if outer and path.startswith(outer + ".") else path
        frames.append(f"{relative} ({_class_name(klass)})")
        outer = path
    return frames


def operator_name(target) -> str:
    """aten.addmm.default -> aten::addmm."""
    text = str(getattr(target, "_overloadpacket", target))
    parts = text.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "quantized"):
        return f"{parts[0]}::{parts[1]}"
    return text


def _common_prefix(a: list, b: list) -> list:
    out = []
    for x, y in zip(a, b):
        if x != y:
            break
        out.append(x)
    return out


def kernel_frames(origins, backward: bool) -> tuple:
    """The frames of a kernel made from these FX nodes."""
    paths, ops = None, []
    for node in origins:
        meta = getattr(node, "meta", {}) or {}
        stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
        frames = module_frames(list(stack.values()) if hasattr(stack, "values") else [])
        paths = frames if paths is None else _common_prefix(paths, frames)
        original = meta.get("original_aten")
        target = original if original is not None else getattr(node, "target", None)
        if getattr(node, "op", "call_function") == "call_function" and target is not None:
            name = operator_name(target)
            if name not in ops:
                ops.append(name)
    frames = list(paths or [])
    if ops:
        frames.append(("backward: " if backward else "") + "fused: " + ", ".join(sorted(ops)))
    return tuple(frames)


def merge(earlier: tuple, later: tuple) -> tuple:
    """Frames of a kernel Inductor reuses for two places: the module path both share, and the
    operators of both."""
    if not earlier:
        return later
    modules_a = [f for f in earlier if not _is_fused(f)]
    modules_b = [f for f in later if not _is_fused(f)]
    fused = [f for f in earlier if _is_fused(f)] or [f for f in later if _is_fused(f)]
    return tuple(_common_prefix(modules_a, modules_b) + fused)


def _is_fused(frame: str) -> bool:
    return frame.startswith("fused: ") or frame.startswith("backward: fused: ")


# ---------------------------------------------------------------- code generation


def _origins(node_schedule):
    for item in node_schedule or ():
        nodes = item.get_nodes() if hasattr(item, "get_nodes") else ()
        for scheduled in nodes:
            ir_node = getattr(scheduled, "node", None)
            yield from getattr(ir_node, "origins", None) or ()


def source_key(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:32]


def _store_dir() -> str:
    root = os.environ.get("PROTON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "proton",
    )
    return os.path.join(root, "inductor_frames")


def record(key: str, frames: tuple) -> None:
    """Keeps a kernel's frames, merged with those it already had, by its source's hash."""
    if not key or not frames:
        return
    merged = merge(frames_of_key(key), frames)
    _by_key[key] = merged
    try:
        os.makedirs(_store_dir(), exist_ok=True)
        path = os.path.join(_store_dir(), key + ".json")
        with open(f"{path}.{os.getpid()}", "w") as f:
            json.dump(list(merged), f)
        os.replace(f"{path}.{os.getpid()}", path)
    except OSError:
        pass  # the in-memory copy still serves this process


def _final_source(src_code: str, name: str) -> str:
    """A kernel's source as define_kernel finishes it (for an Inductor without
    _emit_kernel_to_wrapper, which hands it over)."""
    from torch._inductor import config
    from torch._inductor.utils import Placeholder

    subs = name if config.triton.unique_kernel_names else "triton_"
    final = src_code.replace(str(Placeholder.DESCRIPTIVE_NAME), name)
    return final.replace(str(Placeholder.KERNEL_NAME), subs).replace("#pragma CMT", "#")


def _patch_codegen(module) -> None:
    scheduling = getattr(module, "TritonScheduling", None)
    if scheduling is None or getattr(scheduling.define_kernel, "_proton_original", None):
        return
    define_original = scheduling.define_kernel
    emit_original = getattr(scheduling, "_emit_kernel_to_wrapper", None)

    def define_kernel(self, src_code, node_schedule, kernel):
        name = define_original(self, src_code, node_schedule, kernel)
        try:
            from torch._inductor.virtualized import V

            keys = getattr(V.graph.wrapper_code, "_proton_kernel_keys", {})
            key = keys.get(name) or source_key(_final_source(src_code, name))
            backward = bool(getattr(V.graph, "is_backward", False))
            record(key, kernel_frames(list(_origins(node_schedule)), backward))
        except Exception:  # noqa: BLE001 - another Inductor: its kernels get no frames
            pass
        return name

    define_kernel._proton_original = define_original
    scheduling.define_kernel = define_kernel
    if emit_original is None:
        return

    def emit(self, wrapper, kernel, src_code, kernel_name, subs_name, node_schedule, path, *rest):
        try:
            keys = wrapper.__dict__.setdefault("_proton_kernel_keys", {})
            keys[kernel_name] = source_key(src_code)
        except Exception:  # noqa: BLE001
            pass
        return emit_original(
            self, wrapper, kernel, src_code, kernel_name, subs_name, node_schedule, path, *rest
        )

    scheduling._emit_kernel_to_wrapper = emit


# ---------------------------------------------------------------- launches


def frames_of_key(key: str) -> tuple:
    frames = _by_key.get(key)
    if frames is None:
        try:
            with open(os.path.join(_store_dir(), key + ".json")) as f:
                frames = tuple(json.load(f))
        except (OSError, ValueError):
            frames = ()
        _by_key[key] = frames
    return frames


def frames_of_source_file(path: str) -> tuple:
    try:
        with open(path) as f:
            return frames_of_key(source_key(f.read()))
    except OSError:
        return ()


def _frames_of(autotuner) -> tuple:
    frames = autotuner.__dict__.get("_proton_frames")
    if frames is None:
        # The kernel's source file; a kernel compiled in a worker process comes back without
        # its Python function, never without its filename.
        path = getattr(autotuner, "filename", None)
        if not path:
            code = getattr(getattr(getattr(autotuner, "fn", None), "fn", None), "__code__", None)
            path = code.co_filename if code else None
        frames = frames_of_source_file(path) if path else ()
        autotuner.__dict__["_proton_frames"] = frames
    return frames


def _patch_runtime(module) -> None:
    global _runtime_original
    autotuner = getattr(module, "CachingAutotuner", None)
    if autotuner is None or _runtime_original is not None:
        return
    original = autotuner.run

    def run(self, *args, **kwargs):
        frames = _frames_of(self)
        if not frames:
            return original(self, *args, **kwargs)
        _C.enter_frames(frames)
        try:
            return original(self, *args, **kwargs)
        finally:
            _C.exit_frames()

    run._proton_original = original
    autotuner.run = run
    _runtime_original = original


def install() -> None:
    """Records the frames of every kernel Inductor generates from now on (`import proton`
    calls it; nothing of PyTorch's is imported for it)."""
    global _codegen_hook
    if _codegen_hook is None:
        _codegen_hook = _import_hooks.AfterImport(_patch_codegen)
        _codegen_hook.install(_CODEGEN_MODULE)


def start() -> None:
    global _runtime_hook
    install()
    _runtime_hook = _import_hooks.AfterImport(_patch_runtime)
    _runtime_hook.install(_RUNTIME_MODULE)


def stop() -> None:
    global _runtime_hook, _runtime_original
    if _runtime_hook is not None:
        _runtime_hook.remove()
        _runtime_hook = None
    import sys

    module = sys.modules.get(_RUNTIME_MODULE)
    if module is not None and _runtime_original is not None:
        module.CachingAutotuner.run = _runtime_original
    _runtime_original = None
