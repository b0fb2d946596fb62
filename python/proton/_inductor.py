"""Kernels that torch.compile (Inductor) generates, in instrumentation sessions.

Inductor compiles its Triton kernels itself (in worker processes, with options of its own,
outside the compile step an instrumentation session adds) and launches them from C++ through
torch's static CUDA launcher, with the profile scratch pointer null. While an instrumentation
session is live, Proton stands in front of that launcher:
- the first launch of a kernel on a device takes the kernel's PTX from Triton's cache (Inductor
  keeps its kernels there, by hash), rewrites it with the session's configuration (the implicit
  kernel scope: Inductor's kernels carry no scope markers) and has the driver load it;
- every launch then runs that binary with its slice of Proton's buffer, as Triton's launcher
  does for a kernel compiled in the session (the kernel's C launcher is wrapped, see
  _Launcher: Inductor's own launchers call the kernel's run(), bound before any session);
- a kernel whose PTX cannot be found, rewritten or loaded runs as it was, with one warning.
The binaries are kept per configuration and device (as long as the kernel object lives), so
later sessions reuse them; finalize() puts the launcher back, and the plain binaries run again.

Inductor launches through Triton's own launcher instead for kernels compiled while launch hooks
are installed (hook="triton"), user kernels and with its static launcher off: those launches
are _triton_launcher's.
Thread-safety: the launcher's callers hold the GIL; a kernel's binary may be built twice by two
threads racing on its first launch, and one of the two is kept.
"""

import os
import tempfile
import weakref

from . import _C, _import_hooks, _triton_launcher

_LAUNCHER_MODULE = "torch._inductor.runtime.static_triton_launcher"


class _Binary:
    """An instrumented binary of one kernel, for one configuration on one device."""

    __slots__ = ("function", "shared", "slot_bytes")

    def __init__(self, function, shared, slot_bytes):
        self.function, self.shared, self.slot_bytes = function, shared, slot_bytes


class _Patch:
    def __init__(self):
        self.cls = None  # the launcher class patched, while a session is live
        self.c_impl = None  # its own C_impl (a cached property: the C launcher)
        self.config = ""
        self.trace = False
        self.warn = None
        self.max_shared = None
        # kernel object -> {(config, device): _Binary or None (cannot)}; weak, so that the
        # launcher objects Inductor pickles never carry a function handle of ours.
        self.binaries = weakref.WeakKeyDictionary()
        self.launchers = weakref.WeakKeyDictionary()  # kernel object -> its _Launcher


_patch = _Patch()


class _Launcher:
    """What a kernel's C_impl is while a session is live: torch's C launcher, with a launch of
    the kernel's own plain binary turned into a launch of its instrumented one. Inductor's
    launchers hold the kernel's bound run() (made before any session), and run() looks C_impl
    up at every launch: this is where a session can step in."""

    __slots__ = ("kernel", "real")

    def __init__(self, kernel, real):
        self.kernel, self.real = weakref.ref(kernel), real  # not strong: it keys launchers

    def __getattr__(self, name):
        return getattr(self.real, name)

    def _launch_kernel(self, function, gx, gy, gz, warps, shared, arg_types, args, stream):
        kernel = self.kernel()
        binary = None
        if (
            kernel is not None
            and function == kernel.function
            and kernel.has_profile_scratch
            and args[-1] is None
        ):
            binary = _binary_of(kernel)
        if binary is None:
            return self.real._launch_kernel(
                function, gx, gy, gz, warps, shared, arg_types, args, stream
            )
        try:
            ptr = _C.instrumentation_alloc(gx * gy * gz * binary.slot_bytes, _patch.trace, stream)
        except Exception:  # noqa: BLE001 - a launch with no buffer records nothing, counted
            ptr = 0
        if not ptr:
            # No buffer to be had (counted): the plain binary. A launch being captured into a
            # CUDA graph gets a slot of its graph's, which every replay records into.
            return self.real._launch_kernel(
                function, gx, gy, gz, warps, shared, arg_types, args, stream
            )
        try:
            return self.real._launch_kernel(
                binary.function,
                gx,
                gy,
                gz,
                warps,
                binary.shared,
                arg_types,
                (*args[:-1], ptr),  # the last one is the profile scratch: Proton's buffer
                stream,
            )
        except Exception as e:  # noqa: BLE001 - never the program's failure: the plain binary
            _forget(kernel, f"its instrumented binary did not launch: {e}")
            return self.real._launch_kernel(
                function, gx, gy, gz, warps, shared, arg_types, args, stream
            )


def install(config: str, trace: bool, max_shared, warn) -> None:
    """An instrumentation session started: stand in front of Inductor's static launcher, now
    if PyTorch has loaded it, else as soon as it does (nothing of Inductor's is imported for
    it). warn(kernel, message) reports a kernel left uninstrumented."""
    _patch.config, _patch.trace, _patch.warn = config, trace, warn
    _patch.max_shared = max_shared
    _finder.install(_LAUNCHER_MODULE)


def uninstall() -> None:
    """The last instrumentation session was finalized: Inductor's launcher runs on its own."""
    _finder.remove()
    if _patch.cls is not None:
        _patch.cls.C_impl = _patch.c_impl
        _patch.cls = _patch.c_impl = None
        _patch.launchers = weakref.WeakKeyDictionary()


def _patch_launcher(module) -> None:
    if _patch.cls is not None:
        return
    try:
        cls = module.StaticallyLaunchedCudaKernel
        c_impl = cls.__dict__["C_impl"]
        real_of = c_impl.func  # functools.cached_property: the C launcher of a kernel
    except Exception:  # noqa: BLE001 - another PyTorch's launcher: its kernels run as they are
        return
    _patch.cls, _patch.c_impl = cls, c_impl

    def launcher_of(kernel):
        launcher = _patch.launchers.get(kernel)
        if launcher is None:
            launcher = _patch.launchers[kernel] = _Launcher(kernel, real_of(kernel))
        return launcher

    # A property is a data descriptor: it wins over the value cached_property left in the
    # instance's __dict__, so kernels loaded before the session go through it too.
    cls.C_impl = property(launcher_of)


# Patches Inductor's launcher module right after it is first imported in a session.
_finder = _import_hooks.AfterImport(_patch_launcher)


def _binary_of(kernel):
    """The instrumented binary for the session's configuration on the current device, built on
    the kernel's first launch; None where the kernel runs as it was."""
    import torch

    device = torch.cuda.current_device()
    per_kernel = _patch.binaries.get(kernel)
    if per_kernel is None:
        per_kernel = _patch.binaries[kernel] = {}
    key = (_patch.config, device)
    if key not in per_kernel:
        try:
            per_kernel[key] = _build(kernel, device)
        except Exception as e:  # noqa: BLE001 - the kernel runs as it was, once warned
            per_kernel[key] = None
            _warn(kernel, str(e))
    return per_kernel[key]


def _forget(kernel, reason: str) -> None:
    """The kernel runs its plain binary from now on in this configuration."""
    import torch

    _patch.binaries.setdefault(kernel, {})[(_patch.config, torch.cuda.current_device())] = None
    _warn(kernel, reason)


def _warn(kernel, reason: str) -> None:
    name = getattr(kernel, "name", "?")
    _patch.warn(
        name, f"[PROTON] kernel {name} (torch.compile) runs without instrumentation: {reason}"
    )


def _ptx_of(kernel, device) -> str:
    """The kernel's PTX from Triton's cache, or from the folder Inductor keeps Triton's files in
    when TRITON_CACHE_DIR is unset: a graph from Inductor's own cache puts its kernels' files
    back there, and Triton's cache (~/.triton/cache) may never have seen them."""
    try:
        return _triton_launcher.cached_ptx(kernel.hash, kernel.name)
    except RuntimeError as e:
        missing = e
    try:
        from torch._inductor.runtime.cache_dir_utils import triton_cache_dir
        from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key

        folder = os.path.join(triton_cache_dir(device), triton_hash_to_path_key(kernel.hash))
        with open(os.path.join(folder, f"{kernel.name}.ptx")) as f:
            return f.read()
    except (ImportError, OSError):
        raise missing from None


def _build(kernel, device) -> _Binary:
    if not getattr(kernel, "has_profile_scratch", False):
        raise RuntimeError("its binary takes no profile buffer (a Triton without one)")
    ptx = _ptx_of(kernel, device)
    new_ptx, shared, slot_bytes, _table = _triton_launcher.instrument(
        ptx, _patch.config, kernel.shared, _patch.max_shared()
    )
    # torch's loader takes a file (and opts in past 48 KB of shared memory as Triton's
    # launcher does); the driver reads it whole as it loads it, so the file goes at once. A
    # private one, made afresh: a file found in a shared folder is never what gets loaded.
    fd, path = tempfile.mkstemp(prefix="proton-inductor-", suffix=".ptx")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(new_ptx)
        function, _regs, _spills = kernel.C_impl._load_kernel(path, kernel.name, shared, device)
    finally:
        os.unlink(path)
    return _Binary(function, shared, slot_bytes)
