"""proton._triton_launcher on stand-ins for Triton's CUDA launcher, driver and CompiledKernel
(no GPU): which binary, metadata and profile buffer a launch of a binary loaded before the
session gets while an instrumentation session is live, and that everything is put back after."""

import sys
import types
import weakref
from pathlib import Path

import proton._triton_launcher as launcher_mod
import pytest

GOLDEN_PTX = Path(__file__).resolve().parents[1] / "golden" / "instrumentation_vadd.ptx"
CONFIG = "proton:tree:1:256:*:layout{}"


class FakeCudaLauncher:
    """Triton's CudaLauncher as a launch sees it: the profile buffer's size per CTA, and a call
    that would ask the profile allocator for grid * that many bytes."""

    def __init__(self, profile_scratch_size=0):
        self.profile_scratch_size, self.profile_scratch_align = profile_scratch_size, 1
        self.launches = []

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        if function == 0xBAD:
            # As driver.c reports a launch that failed.
            raise RuntimeError("Triton Error [CUDA]: CUDA_ERROR_OUT_OF_RESOURCES")
        self.launches.append(
            (function, (gridX, gridY, gridZ), stream, args, self.profile_scratch_size)
        )
        if function == 0xE1F:
            # Triton's launcher calls launch_exit_hook after the launch (driver.c): here the
            # program's hook raises, once the kernel ran.
            raise ValueError("the program's launch_exit_hook failed")


class FakeCompiledKernel:
    def __init__(self, name, function, ptx_path, launcher):
        self.name, self.hash, self.function = name, "h" + name, function
        self.module = object()
        self.metadata_group = {f"{name}.json": "/x.json", f"{name}.ptx": str(ptx_path)}
        self.run = launcher
        self.loads = 0

    def _init_handles(self):
        # As Triton's: loads the binary, then calls the load hook (function handle and files).
        self.loads += 1
        launcher_mod.note_loaded(self.function, self.name, self.metadata_group, self.hash)


@pytest.fixture
def fake_triton(monkeypatch, tmp_path):
    from proton import _C

    loaded = []

    def load_binary(name, ptx, shared, device):
        loaded.append((name, ptx, shared, device))
        return (object(), 0xF00 + len(loaded), 32, 0, 1024)

    driver = types.SimpleNamespace(
        active=types.SimpleNamespace(
            get_current_device=lambda: 0, utils=types.SimpleNamespace(load_binary=load_binary)
        )
    )
    modules = {
        "triton": types.ModuleType("triton"),
        "triton.runtime": types.ModuleType("triton.runtime"),
        "triton.compiler": types.ModuleType("triton.compiler"),
        "triton.compiler.compiler": types.ModuleType("triton.compiler.compiler"),
        launcher_mod._DRIVER_MODULE: types.ModuleType(launcher_mod._DRIVER_MODULE),
    }
    modules["triton.runtime"].driver = driver
    modules["triton.compiler.compiler"].CompiledKernel = FakeCompiledKernel
    modules[launcher_mod._DRIVER_MODULE].CudaLauncher = FakeCudaLauncher
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    ptx = tmp_path / "vadd.ptx"
    ptx.write_text(GOLDEN_PTX.read_text())
    warned = []
    config = CONFIG.format(_C.INSTRUMENTATION_LAYOUT)
    yield types.SimpleNamespace(
        loaded=loaded,
        ptx=ptx,
        warned=warned,
        install=lambda: launcher_mod.install(config, lambda: 0, lambda k, m: warned.append(m)),
    )
    launcher_mod.uninstall()
    launcher_mod._patch.binaries.clear()


def launch(kernel, grid=8, metadata=(4, 1, 0)):
    # As Triton's JIT, a CompiledKernel's [grid] and Inductor's launchers call it.
    kernel.run(grid, 1, 1, 7, kernel.function, metadata, None, None, None, "x", "y", "out", 8)


def test_a_binary_loaded_before_the_session_runs_rewritten_with_a_buffer(fake_triton):
    # Loaded before the session: found by the one look over live CompiledKernels, which
    # passes over a weak proxy whose object died (isinstance() on it raises ReferenceError).
    kernel = FakeCompiledKernel("add_kernel", 0x1, fake_triton.ptx, FakeCudaLauncher())
    dead = FakeCudaLauncher()
    proxies = [weakref.proxy(dead)]
    del dead
    fake_triton.install()
    launch(kernel)
    launch(kernel)
    ((name, ptx, shared, device),) = fake_triton.loaded  # built once, on the first launch
    assert name == "add_kernel" and shared == 0 and device == 0
    assert "proton: instrumentation prologue" in ptx  # the rewrite, not the plain PTX
    # The kernel's launch code (its copy shares the launch list) with a buffer to ask for.
    ours = launcher_mod._patch.binaries[launcher_mod._key(0x1)[0]].launcher
    assert ours.profile_scratch_align == 256 and kernel.run.profile_scratch_size == 0
    assert len(kernel.run.launches) == 2
    for function, grid, stream, args, per_cta in kernel.run.launches:
        # The instrumented function, with the kernel's own metadata, hooks and arguments; the
        # launcher asks Triton's profile allocator for one record per warp (4 x 32 bytes).
        assert function == 0xF01 and grid == (8, 1, 1) and stream == 7 and per_cta == 128
        assert args == ((4, 1, 0), None, None, None, "x", "y", "out", 8)
    assert fake_triton.warned == [] and len(proxies) == 1


def test_a_kernel_compiled_in_the_session_runs_as_it_is(fake_triton):
    fake_triton.install()
    own = FakeCudaLauncher(profile_scratch_size=128)  # the session's compile step sized it
    kernel = FakeCompiledKernel("add_kernel", 0x2, fake_triton.ptx, own)
    launch(kernel)
    assert [f for f, *_ in own.launches] == [0x2] and fake_triton.loaded == []


def test_a_kernel_loaded_in_the_session_is_known_by_its_load_hook(fake_triton):
    fake_triton.install()
    ptx = fake_triton.ptx
    launcher_mod.note_loaded(0x3, "add_kernel", {"add_kernel.ptx": str(ptx)}, "h")
    kernel = types.SimpleNamespace(function=0x3, run=FakeCudaLauncher())  # no CompiledKernel
    launch(kernel)
    assert not launcher_mod._patch.scanned and len(fake_triton.loaded) == 1


def test_a_kernel_nobody_holds_runs_as_it_was_once_warned(fake_triton):
    fake_triton.install()
    kernel = types.SimpleNamespace(function=0x77, run=FakeCudaLauncher())
    for _ in range(3):
        launch(kernel)
    assert [f for f, *_ in kernel.run.launches] == [0x77] * 3
    assert len(fake_triton.warned) == 1 and "0x77" in fake_triton.warned[0]
    assert "runs without instrumentation" in fake_triton.warned[0]


def test_an_instrumented_binary_that_fails_to_launch_gives_way_to_the_plain_one(fake_triton):
    kernel = FakeCompiledKernel("add_kernel", 0x4, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    launcher_mod._patch.binaries[launcher_mod._key(0x4)[0]] = launcher_mod._Binary(
        0xBAD, 0, FakeCudaLauncher(128)
    )
    launch(kernel)
    launch(kernel)
    # Both launches ran the plain binary; the second did not try the instrumented one again.
    assert [f for f, *_ in kernel.run.launches] == [0x4, 0x4]
    assert len(fake_triton.warned) == 1 and "OUT_OF_RESOURCES" in fake_triton.warned[0]


def test_after_the_session_the_launcher_is_triton_s_own(fake_triton):
    own = FakeCudaLauncher.__dict__["__call__"]
    kernel = FakeCompiledKernel("add_kernel", 0x5, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    assert FakeCudaLauncher.__dict__["__call__"] is not own
    launcher_mod.uninstall()
    assert FakeCudaLauncher.__dict__["__call__"] is own
    launch(kernel)
    assert [f for f, *_ in kernel.run.launches] == [0x5] and fake_triton.loaded == []


class Recompiled:
    """What compile_with_scopes gives for a kernel whose source has scopes: a CompiledKernel
    compiled in the session, loaded by _init_handles."""

    def __init__(self):
        self.function = self.run = None
        self.metadata = types.SimpleNamespace(shared=1024)

    def _init_handles(self):
        # Loaded, with its own launch code (sized for its profile buffer).
        self.function, self.run = 0xC0DE, FakeCudaLauncher(profile_scratch_size=192)


def test_a_kernel_with_scopes_runs_compiled_again_from_its_source(fake_triton, monkeypatch):
    # Loaded in the session: the load hook gives its handle and files, CompiledKernel's
    # _init_handles (patched while the session is live) the CompiledKernel, whose source is
    # compiled again with the session's configuration.
    sources = []

    def compile_with_scopes(compiled, config):
        sources.append((compiled, config))
        return Recompiled()

    monkeypatch.setattr(launcher_mod, "compile_with_scopes", compile_with_scopes)
    own = FakeCompiledKernel.__dict__["_init_handles"]
    fake_triton.install()
    kernel = FakeCompiledKernel("scoped_kernel", 0x6, fake_triton.ptx, FakeCudaLauncher())
    kernel._init_handles()
    launch(kernel, metadata=(4, 1, 0, "rest"))
    launch(kernel, metadata=(4, 1, 0, "rest"))
    assert sources == [(kernel, launcher_mod._patch.config)] and kernel.loads == 1
    assert fake_triton.loaded == [] and fake_triton.warned == []  # no PTX rewrite
    binary = launcher_mod._patch.binaries[launcher_mod._key(0x6)[0]]
    assert binary.launcher is binary.compiled.run and kernel.run.launches == []
    assert len(binary.launcher.launches) == 2
    for function, _grid, _stream, args, per_cta in binary.launcher.launches:
        # Its binary, its shared memory, the kernel's other metadata and arguments.
        assert function == 0xC0DE and per_cta == 192
        assert args == ((4, 1, 1024, "rest"), None, None, None, "x", "y", "out", 8)
    launcher_mod.uninstall()
    assert FakeCompiledKernel.__dict__["_init_handles"] is own


def test_a_kernel_whose_source_does_not_compile_again_records_its_kernel_scope(
    fake_triton, monkeypatch
):
    def compile_with_scopes(compiled, config):
        raise RuntimeError("ptxas error")

    monkeypatch.setattr(launcher_mod, "compile_with_scopes", compile_with_scopes)
    kernel = FakeCompiledKernel("scoped_kernel", 0x7, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    launch(kernel)
    ((name, ptx, _shared, _device),) = fake_triton.loaded  # its PTX rewritten instead
    assert name == "scoped_kernel" and "proton: instrumentation prologue" in ptx
    assert [f for f, *_ in kernel.run.launches] == [0xF01]
    (message,) = fake_triton.warned
    assert "scoped_kernel records its kernel scope only" in message and "ptxas error" in message


def test_a_kernel_loaded_anew_under_a_handle_seen_before_gets_its_own_binary(fake_triton):
    # Triton 3.7 and later unload a kernel's module with its CompiledKernel: a kernel loaded
    # later may get the same function handle, and must not run the other kernel's binary.
    fake_triton.install()
    ptx = str(fake_triton.ptx)
    launcher_mod.note_loaded(0x8, "first_kernel", {"first_kernel.ptx": ptx}, "h1")
    launch(types.SimpleNamespace(function=0x8, run=FakeCudaLauncher()))
    launcher_mod.note_loaded(0x8, "second_kernel", {"second_kernel.ptx": ptx}, "h2")
    launch(types.SimpleNamespace(function=0x8, run=FakeCudaLauncher()))
    assert [name for name, *_ in fake_triton.loaded] == ["first_kernel", "second_kernel"]


def test_a_handle_reused_between_sessions_gets_its_own_kernels_binary(fake_triton):
    # Triton 3.7 and later unload a kernel's module with its CompiledKernel, so between two
    # sessions another kernel can be loaded under the same function handle. (Before, binaries
    # were kept by handle and configuration, and the second kernel ran the first's.)
    first = FakeCompiledKernel("first_kernel", 0x9, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    launch(first)
    launcher_mod.uninstall()
    del first
    second = FakeCompiledKernel("second_kernel", 0x9, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    launch(second)
    assert [name for name, *_ in fake_triton.loaded] == ["first_kernel", "second_kernel"]


def test_an_error_of_the_programs_launch_hook_is_raised_and_the_kernel_not_run_again(
    fake_triton,
):
    # Before, any error of the instrumented launch ran the plain binary too: a kernel that had
    # run ran twice, and the program's error was swallowed.
    kernel = FakeCompiledKernel("add_kernel", 0xA, fake_triton.ptx, FakeCudaLauncher())
    fake_triton.install()
    ours = FakeCudaLauncher(128)
    launcher_mod._patch.binaries[launcher_mod._key(0xA)[0]] = launcher_mod._Binary(0xE1F, 0, ours)
    with pytest.raises(ValueError, match="launch_exit_hook"):
        launch(kernel)
    assert [f for f, *_ in ours.launches] == [0xE1F] and kernel.run.launches == []
    assert fake_triton.warned == []


def test_a_load_while_another_thread_adds_binaries_does_not_raise(fake_triton):
    # Triton's load hook (note_loaded) looks over the binaries while a launch on another
    # thread may add one. (Before: "dictionary changed size during iteration", raised into the
    # program's kernel load.)
    import sys
    import threading

    fake_triton.install()
    for i in range(20000):
        launcher_mod._patch.binaries[(0x100000 + i, "h", "c")] = None
    errors, stop = [], threading.Event()

    def launches():
        i = 0
        while not stop.is_set():
            launcher_mod._patch.binaries[(0x200000 + i, "h", "c")] = None
            i += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=launches)
    thread.start()
    try:
        for _ in range(50):
            try:
                launcher_mod.note_loaded(0x42, "k", {}, "h")
            except RuntimeError as e:
                errors.append(e)
                break
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert errors == []
