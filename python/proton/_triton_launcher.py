"""Triton kernels launched with a binary loaded before the session, in instrumentation sessions.

Triton's JIT compiles a kernel afresh for a session (the compile step adds the recording), but
some launches never go through the JIT: Inductor's kernels when Inductor launches through
Triton's launcher (launch hooks installed, as hook="triton" does, or its static launcher
turned off), and a CompiledKernel launched by hand (kernel.warmup(...) then
compiled[grid](...)). They run the binary their CompiledKernel loaded, through its
CudaLauncher, whose call Inductor's launchers bound before any session. While an
instrumentation session is live, Proton stands in front of CudaLauncher.__call__:
- a launcher whose binary takes a profile buffer (compiled in the session) runs as it is;
- for any other, the kernel is found by its function handle (the kernels loaded in the
  session through Triton's load hook and CompiledKernel._init_handles, those loaded before
  it by one look over the live CompiledKernels, once per session) and gets a binary that
  records, which the launch runs with its slice of Proton's buffer, handed out by Triton's
  profile allocator as for a kernel compiled in the session:
  - a kernel whose source uses proton.language (a user's kernel inside torch.compile, or
    compiled by hand) is compiled again from its source, with the options it was compiled
    with and the session's configuration, so its scopes record as in a JIT launch (a binary
    compiled outside a session carries no scope markers);
  - any other has its PTX rewritten with the session's configuration (the implicit kernel
    scope) and loaded;
- a kernel whose PTX cannot be found, rewritten or loaded runs as it was, with one warning; one
  whose source cannot be compiled again records its kernel scope, with one warning.
The binaries are kept per function handle, kernel and configuration, so later sessions reuse
them;
finalize() puts the launcher back.
Thread-safety: launches hold the GIL between bytecodes only; a kernel's binary may be built
twice by two threads racing on its first launch, and one of the two is kept; a load on one
thread copies the binaries' keys before it looks them over.
"""

import copy
import dataclasses
import gc
import warnings
import weakref

from . import _C, _inductor_source

_DRIVER_MODULE = "triton.backends.nvidia.driver"
# What Triton's CUDA launcher raises when a launch fails (driver.c), the kernel not run.
_LAUNCH_ERROR = "Triton Error [CUDA]"


def instrument(ptx: str, config: str, shared: int, max_shared: int) -> tuple:
    """Rewrites a kernel's PTX for the configuration and registers its scope table: (PTX,
    shared memory the kernel needs, bytes of buffer per CTA, the table)."""
    new_ptx, table, new_shared = _C.instrument_ptx(ptx, config, shared, max_shared)
    _C.register_instrumentation_table(table)
    return new_ptx, new_shared or shared, int(table.split("\t")[9]), table


def cached_ptx(hash: str, name: str) -> str:
    """A kernel's PTX from Triton's cache, where Triton (and Inductor) keep it by hash."""
    from triton.runtime.cache import get_cache_manager

    manager = get_cache_manager(hash)
    path = manager.get_file(f"{name}.ptx")
    if path is None:
        where = getattr(manager, "cache_dir", "")
        raise RuntimeError(f"no PTX for it in Triton's cache ({where or 'hash ' + hash})")
    with open(path) as f:
        return f.read()


class _Kernel:
    """What a loaded kernel's function handle leads to: where its PTX is, and its
    CompiledKernel (a weak reference; None where only the load hook saw it)."""

    __slots__ = ("compiled", "hash", "name", "ptx_path")

    def __init__(self, name, hash, ptx_path, compiled=None):
        self.name, self.hash, self.ptx_path = name, hash, ptx_path
        self.compiled = compiled


class _Binary:
    """An instrumented binary of one kernel for one configuration, and the launcher that runs
    it: the kernel's own, asking Triton's profile allocator for `slot_bytes` per CTA."""

    __slots__ = ("compiled", "function", "launcher", "shared")

    def __init__(self, function, shared, launcher, compiled=None):
        self.function, self.shared, self.launcher = function, shared, launcher
        self.compiled = compiled  # the CompiledKernel compiled again, kept with its binary


class _Patch:
    def __init__(self):
        self.cls = None  # CudaLauncher, while a session is live
        self.call = None  # its own __call__
        self.compiled_cls = None  # CompiledKernel, while a session is live
        self.init_handles = None  # its own _init_handles
        self.config = ""
        self.warn = None
        self.max_shared = None
        self.kernels = {}  # function handle -> _Kernel
        self.scanned = False  # the live CompiledKernels were looked over in this session
        # (function handle, kernel hash, config) -> _Binary, or None (runs as it was). The hash:
        # a handle freed with its kernel's module (Triton 3.7 and later unload it with its
        # CompiledKernel) may be another kernel's in a later session.
        self.binaries = {}


_patch = _Patch()


def install(config: str, max_shared, warn) -> None:
    """An instrumentation session started (Triton is imported): stand in front of Triton's
    CUDA launcher. warn(kernel, message) reports a kernel left uninstrumented."""
    _patch.config, _patch.warn, _patch.max_shared = config, warn, max_shared
    _patch.scanned = False
    if _patch.cls is not None:
        return
    try:
        import importlib

        cls = importlib.import_module(_DRIVER_MODULE).CudaLauncher
        call = cls.__dict__["__call__"]
    except Exception:  # noqa: BLE001 - another Triton's launcher: its launches run as they are
        return
    _patch.cls, _patch.call = cls, call

    def proton_call(self, gridX, gridY, gridZ, stream, function, *args):
        if getattr(self, "profile_scratch_size", 1):
            # Compiled in the session, or a Triton whose launches take no profile buffer.
            return call(self, gridX, gridY, gridZ, stream, function, *args)
        binary = _binary_of(self, function, args)
        if binary is None:
            return call(self, gridX, gridY, gridZ, stream, function, *args)
        metadata = (*args[0][:2], binary.shared, *args[0][3:])  # (warps, ctas, shared, ...)
        try:
            return call(binary.launcher, gridX, gridY, gridZ, stream, binary.function, metadata,
                        *args[1:])  # fmt: skip
        except RuntimeError as e:
            # The launch itself failed (its binary did not run): the plain binary runs. Any
            # other error is the program's own (a launch hook's, which may come after the
            # kernel ran): raised as without Proton, the kernel not run again.
            if _LAUNCH_ERROR not in str(e):
                raise
            _forget(function, f"its instrumented binary did not launch: {e}")
            return call(self, gridX, gridY, gridZ, stream, function, *args)

    cls.__call__ = proton_call
    _watch_loads()


def _watch_loads() -> None:
    """A kernel loaded in the session is known by its CompiledKernel too (the load hook gives
    its function handle and files only), so that its source can be compiled again."""
    try:
        from triton.compiler.compiler import CompiledKernel

        init_handles = CompiledKernel.__dict__["_init_handles"]
    except Exception:  # noqa: BLE001 - another Triton's: such kernels record their kernel scope
        return
    _patch.compiled_cls, _patch.init_handles = CompiledKernel, init_handles

    def proton_init_handles(self):
        init_handles(self)
        kernel = _patch.kernels.get(getattr(self, "function", None))
        if kernel is not None and kernel.compiled is None:
            kernel.compiled = weakref.ref(self)

    CompiledKernel._init_handles = proton_init_handles


def uninstall() -> None:
    """The last instrumentation session was finalized: Triton's launcher runs on its own."""
    if _patch.cls is not None:
        _patch.cls.__call__ = _patch.call
        _patch.cls = _patch.call = None
    if _patch.compiled_cls is not None:
        _patch.compiled_cls._init_handles = _patch.init_handles
        _patch.compiled_cls = _patch.init_handles = None
    _patch.kernels.clear()


def note_loaded(function, name, metadata_group, hash) -> None:
    """Triton loaded a kernel during the session (its load hook). A binary built for another
    kernel loaded under the same function handle before (Triton 3.7 and later unload a
    kernel's module with its CompiledKernel) is not this one's."""
    # list(): one step under the GIL, while another thread may add a binary.
    for key in [k for k in list(_patch.binaries) if k[0] == function]:
        _patch.binaries.pop(key, None)
    _note(function, name, metadata_group, hash, None)


def _note(function, name, metadata_group, hash, compiled) -> None:
    ptx = next((p for f, p in (metadata_group or {}).items() if str(f).endswith(".ptx")), None)
    reference = weakref.ref(compiled) if compiled is not None else None
    _patch.kernels[function] = _Kernel(name, hash, ptx, reference)


def _kernel_of(function):
    kernel = _patch.kernels.get(function)
    if kernel is None and not _patch.scanned:
        # Loaded before the session: one look over the live CompiledKernels finds them all
        # (those loaded later in the session pass through note_loaded).
        from triton.compiler.compiler import CompiledKernel

        for obj in gc.get_objects():
            # type(), not isinstance(): a weak proxy's __class__ raises once its object died.
            if issubclass(type(obj), CompiledKernel) and obj.module is not None:
                _note(obj.function, obj.name, obj.metadata_group, obj.hash, obj)
        # Only now: a thread that found it set before the scan ended would take a kernel
        # loaded before the session for one with no CompiledKernel.
        _patch.scanned = True
        kernel = _patch.kernels.get(function)
    return kernel


def _key(function):
    kernel = _kernel_of(function)
    return (function, kernel.hash if kernel is not None else None, _patch.config), kernel


def _binary_of(launcher, function, args):
    key, kernel = _key(function)
    if key in _patch.binaries:
        return _patch.binaries[key]
    binary = None
    try:
        if kernel is None:
            raise RuntimeError("no CompiledKernel of this process holds its binary")
        metadata = args[0] if args else None
        if not isinstance(metadata, tuple) or len(metadata) < 3:
            raise RuntimeError("its launcher takes metadata of another Triton's")
        binary = _build(launcher, kernel, metadata[2])
    except Exception as e:  # noqa: BLE001 - the kernel runs as it was, once warned
        _forget(function, str(e))
    _patch.binaries[key] = binary
    return binary


def _forget(function, reason: str) -> None:
    """The kernel runs its plain binary from now on in this configuration."""
    key, kernel = _key(function)
    _patch.binaries[key] = None
    name = kernel.name if kernel is not None else f"at function handle {function:#x}"
    _patch.warn(name, f"[PROTON] kernel {name} runs without instrumentation: {reason}")


def compile_with_scopes(compiled, config: str):
    """The CompiledKernel `compiled` compiled again from its source, with the options it was
    compiled with and the instrumentation configuration `config`; not loaded. None when its
    source uses nothing of proton.language (its PTX rewrite records all it can), or when it
    was compiled for another instrumentation (a sanitizer's, which the rewrite leaves be)."""
    src = getattr(compiled, "src", None)
    fn = getattr(src, "fn", None)
    if fn is None or not hasattr(src, "signature"):
        return None
    metadata = compiled.metadata
    if getattr(metadata, "instrumentation_mode", "") not in ("", None):
        return None
    if getattr(fn, "fn", True) is None:  # compiled in one of Inductor's worker processes
        live = _inductor_source.live_function(compiled)
        if live is None:
            return None
        src = copy.copy(src)
        src.fn = live
    if not _inductor_source.import_lines(src.fn):
        return None
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    target = metadata.target
    if isinstance(target, dict):  # metadata as JSON keeps it
        target = GPUTarget(**target)
    with warnings.catch_warnings():  # defaults' notices (FP fusion) are the compile's to give
        warnings.simplefilter("ignore")
        defaults = make_backend(target).parse_options({})
    names = [f.name for f in dataclasses.fields(defaults)]
    options = {n: _as_tuples(getattr(metadata, n)) for n in names if hasattr(metadata, n)}
    options["instrumentation_mode"] = config
    again = triton.compile(src, target=target, options=options)
    if not getattr(again.metadata, "profile_scratch_size", 0):
        raise RuntimeError("compiled again, it has no instrumentation")
    return again


def _as_tuples(value):
    """An option as Triton's options hold it: metadata read back from JSON has lists."""
    if isinstance(value, list):
        return tuple(_as_tuples(v) for v in value)
    return value


def _build(launcher, kernel, shared) -> _Binary:
    compiled = kernel.compiled() if kernel.compiled is not None else None
    try:
        again = compile_with_scopes(compiled, _patch.config)
        if again is not None:
            again._init_handles()  # loads it (the load hook registers its scope table)
            runner = again.run  # the launch code of its own metadata (buffer sizes included)
            if not isinstance(runner, _patch.cls):
                raise RuntimeError(f"its launcher is a {type(runner).__name__}")
            return _Binary(again.function, again.metadata.shared, runner, again)
    except Exception as e:  # noqa: BLE001 - its PTX rewrite still records its kernel scope
        _patch.warn(
            f"{kernel.name} (compiled again)",
            f"[PROTON] kernel {kernel.name} records its kernel scope only: its source did "
            f"not compile again with its scopes: {e}",
        )
    if kernel.ptx_path is not None:
        with open(kernel.ptx_path) as f:
            ptx = f.read()
    else:
        ptx = cached_ptx(kernel.hash, kernel.name)
    from triton.runtime import driver

    new_ptx, new_shared, slot_bytes, _table = instrument(
        ptx, _patch.config, shared, _patch.max_shared()
    )
    device = driver.active.get_current_device()
    _module, new_function, *_ = driver.active.utils.load_binary(
        kernel.name, new_ptx, new_shared, device
    )
    runner = copy.copy(launcher)  # the kernel's launch code, with a buffer to ask for
    runner.profile_scratch_size, runner.profile_scratch_align = slot_bytes, 256
    return _Binary(new_function, new_shared, runner)
