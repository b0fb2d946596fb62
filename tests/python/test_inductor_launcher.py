"""proton._inductor on a stand-in for torch's static CUDA launcher (no GPU, no PyTorch):
which binary, shared memory, argument types and buffer an Inductor kernel is launched with
while an instrumentation session is live, and that everything is put back after it."""

import functools
import sys
import types
from pathlib import Path

import proton._inductor as inductor
import pytest
from proton import _C

GOLDEN_PTX = Path(__file__).resolve().parents[1] / "golden" / "instrumentation_vadd.ptx"
CONFIG = f"proton:tree:1:256:*:layout{_C.INSTRUMENTATION_LAYOUT}"


class FakeCImpl:
    def __init__(self):
        self.loaded, self.launches = [], []

    def _load_kernel(self, path, name, shared, device):
        self.loaded.append((Path(path).read_text(), name, shared, device))
        return (0xF00 + len(self.loaded), 32, 0)

    def _launch_kernel(self, function, gx, gy, gz, warps, shared, arg_types, args, stream):
        self.launches.append((function, (gx, gy, gz), warps, shared, arg_types, args, stream))


class FakeKernel:
    """The attributes of torch's StaticallyLaunchedCudaKernel that a launch reads."""

    c_launcher = FakeCImpl()

    @functools.cached_property
    def C_impl(self):
        return FakeKernel.c_launcher

    def __init__(self, name="add_kernel", hash="abc123"):
        self.name, self.hash, self.function = name, hash, 0x1
        self.num_warps, self.shared = 4, 0
        self.arg_tys = "OOOi"
        self.has_global_scratch = self.has_profile_scratch = True

    def run(self, grid_x, grid_y, grid_z, stream, *args):  # as torch's: C_impl at each call
        tys = self.arg_tys + "OO"
        self.C_impl._launch_kernel(
            self.function, grid_x, grid_y, grid_z, 4, self.shared, tys, (*args, None, None), stream
        )


@pytest.fixture
def fake_torch(monkeypatch, tmp_path):
    """A process with 'PyTorch' (its launcher module) and 'Triton's cache' holding the PTX."""
    FakeKernel.c_launcher = FakeCImpl()
    launcher = types.ModuleType(inductor._LAUNCHER_MODULE)
    launcher.StaticallyLaunchedCudaKernel = FakeKernel
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, inductor._LAUNCHER_MODULE, launcher)
    cache = {"abc123": tmp_path / "add_kernel.ptx"}
    cache["abc123"].write_text(GOLDEN_PTX.read_text())

    class Manager:
        def __init__(self, key):
            self.key = key

        def get_file(self, name):
            path = cache.get(self.key)
            return str(path) if path and path.name == name else None

    cache_module = types.ModuleType("triton.runtime.cache")
    cache_module.get_cache_manager = Manager
    monkeypatch.setitem(sys.modules, "triton.runtime.cache", cache_module)
    monkeypatch.setattr(inductor, "_C", _FakeCore())
    monkeypatch.setattr(inductor.tempfile, "tempdir", str(tmp_path))
    yield
    inductor.uninstall()


class _FakeCore:
    """proton._C with the device buffer's allocation stood in for (no GPU here)."""

    def __init__(self):
        self.allocs = []
        self.instrument_ptx = _C.instrument_ptx
        self.register_instrumentation_table = _C.register_instrumentation_table

    def instrumentation_alloc(self, size, trace, stream):
        self.allocs.append((size, trace, stream))
        return 0xB0000


def test_a_session_launches_the_rewritten_binary_with_its_buffer(fake_torch, tmp_path):
    warned = []
    kernel = FakeKernel()
    bound_run = kernel.run  # Inductor's launcher holds this, made before the session
    assert kernel.C_impl is FakeKernel.c_launcher  # now cached in the kernel's __dict__
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: warned.append(m))
    bound_run(8, 1, 1, 7, "x", "y", "out", 4096)
    ((ptx, name, shared, device),) = FakeKernel.c_launcher.loaded
    assert name == "add_kernel" and device == 0 and shared == 0
    assert "proton: instrumentation prologue" in ptx  # the rewrite, not the plain PTX
    ((function, grid, warps, shared, tys, args, stream),) = FakeKernel.c_launcher.launches
    assert function == 0xF01 and grid == (8, 1, 1) and warps == 4 and stream == 7
    # The kernel's own arguments, Triton's global scratch (null), then Proton's buffer.
    assert tys == "OOOiOO" and args == ("x", "y", "out", 4096, None, 0xB0000)
    # One record per warp of each of the 8 CTAs: 4 x (16 + 16) bytes per CTA.
    assert inductor._C.allocs == [(8 * 4 * 32, False, 7)]
    assert warned == [] and list(tmp_path.glob("proton-inductor-*")) == []  # loaded, removed
    kernel.run(8, 1, 1, 7, "x", "y", "out", 4096)
    assert len(FakeKernel.c_launcher.loaded) == 1  # built once, on the first launch


def test_after_the_session_the_plain_binary_runs_again(fake_torch):
    own = FakeKernel.__dict__["C_impl"]
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: None)
    assert FakeKernel.__dict__["C_impl"] is not own
    kernel = FakeKernel()
    kernel.run(2, 1, 1, 0, "x", "y", "out", 8)
    assert FakeKernel.c_launcher.launches[-1][0] == 0xF01
    inductor.uninstall()
    assert FakeKernel.__dict__["C_impl"] is own
    kernel.run(2, 1, 1, 0, "x", "y", "out", 8)
    plain = FakeKernel.c_launcher.launches[-1]
    assert plain[0] == 0x1 and plain[5] == ("x", "y", "out", 8, None, None)


def test_a_kernel_without_ptx_in_the_cache_runs_as_it_was_once_warned(fake_torch):
    warned = []
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: warned.append((k, m)))
    kernel = FakeKernel(name="triton_poi_fused_add_0", hash="not-cached")
    for _ in range(3):
        kernel.run(1, 1, 1, 0, "x", "y", "out", 8)
    assert [k for k, _ in warned] == ["triton_poi_fused_add_0"]
    assert "no PTX" in warned[0][1] and "torch.compile" in warned[0][1]
    assert [launch[0] for launch in FakeKernel.c_launcher.launches] == [0x1] * 3
    assert inductor._C.allocs == []


def test_a_kernel_from_inductor_s_own_cache_is_found_in_its_folder(
    fake_torch, monkeypatch, tmp_path
):
    # A graph from Inductor's cache, TRITON_CACHE_DIR unset: Inductor puts its kernels' files
    # back into a folder of its own, which Triton's cache (~/.triton/cache) never saw.
    folder = tmp_path / "inductor" / "triton" / "0"
    (folder / "KEY-feed").mkdir(parents=True)
    (folder / "KEY-feed" / "triton_poi_fused_0.ptx").write_text(GOLDEN_PTX.read_text())
    names = {
        "torch._inductor": {},
        "torch._inductor.runtime": {},
        "torch._inductor.runtime.cache_dir_utils": {"triton_cache_dir": lambda d: str(folder)},
        "torch._inductor.runtime.runtime_utils": {"triton_hash_to_path_key": "KEY-{}".format},
    }
    for name, attrs in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    warned = []
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: warned.append(m))
    FakeKernel(name="triton_poi_fused_0", hash="feed").run(2, 1, 1, 0, "x", "y", "out", 8)
    assert warned == [] and FakeKernel.c_launcher.launches[-1][0] == 0xF01
    assert "proton: instrumentation prologue" in FakeKernel.c_launcher.loaded[0][0]


def test_a_launcher_imported_during_the_session_is_patched_as_it_loads(monkeypatch, tmp_path):
    # Nothing of Inductor's is imported for the session: the launcher module is patched when
    # PyTorch first imports it (torch.compile's first call inside the session).
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launcher.py").write_text(
        "import functools\n"
        "class StaticallyLaunchedCudaKernel:\n"
        "    @functools.cached_property\n"
        "    def C_impl(self):\n"
        "        return 'torch C launcher'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(inductor, "_LAUNCHER_MODULE", "fakepkg.launcher")
    monkeypatch.delitem(sys.modules, "fakepkg.launcher", raising=False)
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: None)
    try:
        from fakepkg import launcher

        kernel = launcher.StaticallyLaunchedCudaKernel()
        assert isinstance(kernel.C_impl, inductor._Launcher)
        assert kernel.C_impl.real == "torch C launcher"
    finally:
        inductor.uninstall()
    assert inductor._finder not in sys.meta_path
    assert kernel.C_impl == "torch C launcher"


def test_an_instrumented_binary_that_fails_to_launch_gives_way_to_the_plain_one(fake_torch):
    warned = []
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: warned.append(m))
    launcher = FakeKernel.c_launcher
    real_launch = launcher._launch_kernel

    def refuse_ours(function, *rest):
        if function != 0x1:
            raise RuntimeError("CUDA_ERROR_OUT_OF_RESOURCES")
        return real_launch(function, *rest)

    launcher._launch_kernel = refuse_ours
    kernel = FakeKernel()
    kernel.run(4, 1, 1, 0, "x", "y", "out", 8)
    kernel.run(4, 1, 1, 0, "x", "y", "out", 8)
    # Both launches ran the plain binary; the second did not try the instrumented one again.
    assert [launch[0] for launch in launcher.launches] == [0x1, 0x1]
    assert len(warned) == 1 and "OUT_OF_RESOURCES" in warned[0]


def test_a_launch_with_no_buffer_runs_the_plain_binary(fake_torch):
    # No buffer to be had (the ring could not be drained, or a trace launch being captured):
    # the kernel runs as it would without the session.
    inductor.install(CONFIG, False, lambda: 0, lambda k, m: None)
    inductor._C.instrumentation_alloc = lambda size, trace, stream: 0
    FakeKernel().run(4, 1, 1, 0, "x", "y", "out", 8)
    (launch,) = FakeKernel.c_launcher.launches
    assert launch[0] == 0x1 and launch[5] == ("x", "y", "out", 8, None, None)
