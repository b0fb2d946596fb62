"""The PyTorch adapter: context="torch" frames and backward attribution.

- Backward attribution (every session): torch.autograd's one entry into the C++ engine
  (_engine_run_backward, behind Tensor.backward, autograd.backward and autograd.grad) is
  wrapped so that the calling thread publishes its context; the engine's device threads
  (pt_autograd_<device>) borrow it. Compiled autograd and torch.compile'd backward graphs run
  on the same threads (or on the caller), so they are covered too.
- Module frames: "<name> (<Class>)", the name relative to the enclosing module's frame (the
  outermost one is its class name), pushed and popped at each module call: from
  sys.monitoring's events on Module._call_impl (CPython 3.12 and later; module calls keep
  PyTorch's fast path), else from global forward pre/post hooks. Inside a graph Dynamo
  traces, neither does anything (no graph break).
- Operator frames: a small C++ observer of PyTorch's RecordFunction (at::addGlobalCallback),
  built once against the installed torch's own headers (torch_observer.cc, cached under
  ~/.cache/proton), reports operators, backward nodes (tied to their forward operator by
  sequence number) and record_function ranges through proton/framework.h. Without a C++
  compiler, a warning says so and sessions get module frames only.
- Compiled kernels: see _inductor_frames.py.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import warnings
import weakref

from .. import _C, _import_hooks
from ..errors import ConfigError
from .base import FrameworkAdapter

_OBSERVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_observer.cc")


def _torch():
    return sys.modules.get("torch")


# ---------------------------------------------------------------- backward attribution


def _wrap_backward(original):
    if getattr(original, "_proton_original", None) is not None:
        return original

    def _engine_run_backward(*args, **kwargs):
        if not _C.profiling_on():
            return original(*args, **kwargs)
        token = _C.enter_backward()
        try:
            return original(*args, **kwargs)
        finally:
            _C.exit_backward(token)

    _engine_run_backward._proton_original = original
    return _engine_run_backward


def _patch_autograd(autograd) -> None:
    graph = sys.modules.get("torch.autograd.graph") or getattr(autograd, "graph", None)
    for module in (graph, autograd):
        original = getattr(module, "_engine_run_backward", None) if module else None
        if original is not None:
            module._engine_run_backward = _wrap_backward(original)


# ---------------------------------------------------------------- module frames

# (id(enclosing module), id(module)) -> (weak reference to module, frame name); the reference
# tells a reused id from the module it was made for.
_names = {}
_local = threading.local()
_is_compiling = None  # torch.compiler.is_compiling, bound when frames start


def _class_name(module) -> str:
    inner = getattr(module, "_orig_mod", None)  # torch.compile's OptimizedModule
    if inner is not None and type(module).__name__ == "OptimizedModule":
        return type(inner).__name__ + ", compiled"
    return type(module).__name__


def frame_name(parent, module) -> str:
    """'<path from parent> (<Class>)', or the class name when parent is None or does not own
    module."""
    key = (id(parent), id(module))
    entry = _names.get(key)
    if entry is not None and entry[0]() is module:
        return entry[1]
    relative = ""
    if parent is not None:
        for name, child in parent.named_modules():
            if child is module and name:
                relative = name
                break
    cls = _class_name(module)
    name = f"{relative} ({cls})" if relative else cls
    try:
        _names[key] = (weakref.ref(module), name)
    except TypeError:  # not weakly referenceable: named again next time
        pass
    return name


def _pre_hook(module, args):
    # Inside a graph Dynamo traces, is_compiling() is a constant True: the hook is gone from
    # the graph, with no graph break.
    if _is_compiling():
        return None
    try:
        stack = _local.modules
    except AttributeError:
        stack = _local.modules = []
    name = frame_name(stack[-1] if stack else None, module)
    stack.append(module)
    _C.enter_module(name)
    return None


def _post_hook(module, args, output):
    if _is_compiling():
        return None
    stack = getattr(_local, "modules", None)
    if not stack:
        return None
    stack.pop()
    _C.exit_module()
    return None


# The module-call events of CPython 3.12 and later (sys.monitoring): PY_START and PY_RETURN
# of Module._call_impl, PY_UNWIND while an exception leaves it, reported to C callables
# (csrc/bindings/bind_module_events.cc). No module hook is registered, so module calls keep
# PyTorch's fast path. Nothing runs inside a graph Dynamo traces (its bytecode is not run).
# PROTON_TORCH_MODULE_EVENTS=hooks asks for the hooks on any Python.
class _ModuleEvents:
    # noop=True: the same events calling `slice`, a C builtin that takes their arguments and
    # does nothing else (bench/overhead.py's torch_floor).
    def __init__(self, noop=False):
        self.noop = noop
        self.tool = None
        self.code = None

    def start(self, modules) -> bool:
        monitoring = getattr(sys, "monitoring", None)
        code = getattr(getattr(modules.Module, "_call_impl", None), "__code__", None)
        if (
            os.environ.get("PROTON_TORCH_MODULE_EVENTS", "") == "hooks"
            or monitoring is None
            or not _C.module_events_supported
            or code is None
        ):
            return False
        # 3 and 4 first: CPython names 0 (debugger), 1 (coverage), 2 (profiler), 5 (optimizer).
        free = [t for t in (3, 4, 0, 1, 2, 5) if monitoring.get_tool(t) is None]
        if not free:
            return False
        tool, events = free[0], monitoring.events
        try:
            monitoring.use_tool_id(tool, "proton")
        except ValueError:  # taken meanwhile: the hooks will do
            return False
        self.tool, self.code = tool, code
        begin, end = (slice, slice) if self.noop else (_C.module_call_start, _C.module_call_end)
        try:
            if not self.noop:
                _C.set_module_events(code, frame_name)
            monitoring.register_callback(tool, events.PY_START, begin)
            monitoring.register_callback(tool, events.PY_RETURN, end)
            monitoring.register_callback(tool, events.PY_UNWIND, end)
            monitoring.set_local_events(tool, code, events.PY_START | events.PY_RETURN)
            monitoring.set_events(tool, events.PY_UNWIND)
        except Exception as error:  # the hooks will do; say why once
            self.stop()
            warnings.warn(
                f"[PROTON] context='torch': module frames come from module hooks "
                f"(sys.monitoring refused Proton's events: {error})",
                RuntimeWarning,
                stacklevel=4,
            )
            return False
        return True

    def stop(self) -> None:
        if self.tool is None:
            return
        monitoring, events = sys.monitoring, sys.monitoring.events
        monitoring.set_events(self.tool, 0)
        monitoring.set_local_events(self.tool, self.code, 0)
        for event in (events.PY_START, events.PY_RETURN, events.PY_UNWIND):
            monitoring.register_callback(self.tool, event, None)
        monitoring.free_tool_id(self.tool)
        if not self.noop:
            _C.set_module_events(None, None)
        self.tool = self.code = None


# ---------------------------------------------------------------- operator observer


def _cache_dir() -> str:
    root = os.environ.get("PROTON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "proton",
    )
    return os.path.join(root, "torch_observer")


def _observer_library(torch) -> str:
    """Path of the observer built for this torch and this source, building it if needed."""
    from torch.utils import cpp_extension

    from .. import native

    with open(_OBSERVER_SOURCE, "rb") as f:
        source = f.read()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    key = hashlib.sha256(
        source
        + torch.__version__.encode()
        + os.path.dirname(torch.__file__).encode()
        + bytes([abi])
    ).hexdigest()[:16]
    out_dir = _cache_dir()
    path = os.path.join(out_dir, f"proton_torch_observer_{key}.so")
    if os.path.exists(path):
        return path
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not compiler:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++)")
    os.makedirs(out_dir, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    command = [compiler, "-shared", "-fPIC", "-O2", "-std=c++20", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    command += [f"-I{p}" for p in cpp_extension.include_paths()] + [f"-I{_proton_include(native)}"]
    command += [_OBSERVER_SOURCE, "-o", tmp]
    for lib_dir in cpp_extension.library_paths():
        command += [f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}"]
    command += ["-lc10", "-ltorch_cpu"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:1])} failed: {result.stderr.strip()[-2000:]}")
    os.replace(tmp, path)  # atomic: a concurrent build of the same key is harmless
    return path


def _proton_include(native) -> str:
    """proton/framework.h's directory: the package's (a wheel) or the checkout's (editable)."""
    installed = native.get_include()
    if os.path.exists(os.path.join(installed, "proton", "framework.h")):
        return installed
    checkout = os.path.join(os.path.dirname(native.__file__), "..", "..", "csrc", "include")
    return os.path.normpath(checkout)


class _Observer:
    def __init__(self):
        self.library = None
        self.failed = None  # the reason, once building or loading failed

    def start(self, torch) -> bool:
        if os.environ.get("PROTON_TORCH_OPERATORS", "1") in ("0", "false", "False"):
            return False
        if self.failed is not None:
            return False
        try:
            if self.library is None:
                self.library = ctypes.CDLL(_observer_library(torch))
                self.library.proton_torch_observer_install.argtypes = [ctypes.c_void_p]
                self.library.proton_torch_observer_install.restype = ctypes.c_int
            if self.library.proton_torch_observer_install(_C.framework_api()) != 0:
                raise RuntimeError("the observer refused Proton's framework API version")
            return True
        except Exception as error:  # no compiler, headers missing, a link error
            self.failed = str(error)
            warnings.warn(
                "[PROTON] context='torch': PyTorch's operators are not recorded (module frames "
                f"and backward attribution still are): the operator observer could not be built "
                f"against the installed torch: {self.failed}",
                RuntimeWarning,
                stacklevel=4,
            )
            return False

    def stop(self) -> None:
        if self.library is not None:
            self.library.proton_torch_observer_remove()


# ---------------------------------------------------------------- the adapter


class TorchAdapter(FrameworkAdapter):
    name = "torch"
    backward_worker_prefixes = ("pt_autograd_",)

    def __init__(self):
        self._backward_hook = None
        self._handles = []
        self._observer = _Observer()
        self._module_events = _ModuleEvents()
        self.operators = False  # the observer runs

    def install(self) -> None:
        from . import _inductor_frames

        _inductor_frames.install()  # Inductor's module stacks exist only while it compiles

    def check(self) -> None:
        if _torch() is not None:
            return
        try:
            import torch  # noqa: F401
        except ImportError as error:
            raise ConfigError(
                f"[PROTON] context='torch' needs PyTorch, which cannot be imported: {error}"
            ) from None

    def install_backward(self) -> None:
        if self._backward_hook is not None:
            return
        _C.set_backward_worker_prefixes(list(self.backward_worker_prefixes))
        self._backward_hook = _import_hooks.AfterImport(_patch_autograd)
        self._backward_hook.install("torch.autograd")

    def start_frames(self) -> None:
        import torch

        from . import _inductor_frames

        global _is_compiling
        compiler = getattr(torch, "compiler", None)
        _is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        modules = torch.nn.modules.module
        # A module frame goes right below the user's line that called the module.
        _C.set_module_call_files([os.path.join("torch", "nn", "modules", "module.py")])
        if not self._module_events.start(modules):
            try:  # always_call: the frame is popped when forward raises
                post = modules.register_module_forward_hook(_post_hook, always_call=True)
            except TypeError:  # a torch without it
                post = modules.register_module_forward_hook(_post_hook)
            self._handles = [modules.register_module_forward_pre_hook(_pre_hook), post]
        self.operators = self._observer.start(torch)
        _inductor_frames.start()

    def stop_frames(self) -> None:
        from . import _inductor_frames

        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._module_events.stop()
        if self.operators:
            self._observer.stop()
        self.operators = False
        _inductor_frames.stop()
