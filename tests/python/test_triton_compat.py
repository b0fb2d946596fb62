"""triton.profiler behaviours without Triton or a GPU (fake Triton modules): the launch hook as
an object (`start(hook=LaunchHook())`, `hooks.launch.id`), and Triton's `triton.knobs.proton`
settings read at start(). The GPU side is tests/gpu/test_compat.py."""

import os
import sys
import threading
import types

import proton
import pytest
from proton import _C, hooks, triton_knobs
from proton.hooks import Hook
from proton.hooks import launch as launch_module
from proton_test_utils import run_python

profile_module = sys.modules["proton.profile"]


class FakeLazyDict:
    """Triton's LazyDict: `data` holds the name; get() evaluates launch_metadata once."""

    def __init__(self, name, fn=None):
        self.data = {"name": name, "function": 0xF00, "stream": 7}
        self.fn = fn

    def get(self):
        if self.fn is not None:
            self.data = self.data | self.fn((1, 1, 1), None, {})
            self.fn = None
        return self.data


@pytest.fixture
def fake_triton(monkeypatch):
    """A Triton module with knobs.runtime launch hooks and knobs.proton settings."""

    class RuntimeKnobs:
        launch_enter_hook = None
        launch_exit_hook = None

    class ProtonKnobs:  # class attributes are Triton's defaults; setting one makes it count
        disable = False
        cupti_lib_dir = "/triton/backends/nvidia/lib/cupti"
        enable_nvtx = True

    triton = types.ModuleType("triton")
    triton.__version__ = "3.6.0"
    knobs = types.ModuleType("triton.knobs")
    knobs.runtime = RuntimeKnobs()
    knobs.proton = ProtonKnobs()
    triton.knobs = knobs
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", knobs)
    for knob in triton_knobs.KNOBS:
        monkeypatch.delenv(knob.triton_env, raising=False)
        if knob.proton_env:
            monkeypatch.delenv(knob.proton_env, raising=False)
    monkeypatch.setattr(triton_knobs, "_warned", set())
    yield knobs
    hooks.registry.unregister(None)
    launch_module.LaunchHook().configure()


def launch(runtime, name, fn=None):
    """What Triton does around one kernel launch."""
    metadata = FakeLazyDict(name, fn)
    runtime.launch_enter_hook(metadata)
    runtime.launch_exit_hook(metadata)


# ---- the launch hook as an object -----------------------------------------------------------


def test_launch_hook_is_one_instance_reachable_as_in_triton():
    assert launch_module.LaunchHook() is launch_module.LaunchHook()
    assert proton.hooks.launch.LaunchHook is hooks.LaunchHook
    assert launch_module.id.name == "id" and launch_module.op_name.name == "op_name"


def test_start_with_the_configured_hook_object_filters_launches(fake_triton, pushed):
    hook = proton.hooks.launch.LaunchHook()
    hook.configure(include="matmul_", exclude=".*_bwd$")
    session = proton.start("as_object", hook=hook)
    runtime = fake_triton.runtime
    assert hooks.registry.active_hooks == (hook,)
    for name in ("vadd", "matmul_fwd", "matmul_bwd"):
        launch(runtime, name, lambda g, m, a: {"flops": 2})
    assert pushed == [("matmul_fwd", {"flops": 2})]
    proton.finalize(session)
    assert runtime.launch_enter_hook is None and runtime.launch_exit_hook is None


def test_hook_object_and_hook_triton_are_one_hook(fake_triton):
    a = proton.start("by_name", hook="triton")
    b = proton.start("by_object", hook=launch_module.LaunchHook())
    assert hooks.registry.active_hooks == (launch_module.LaunchHook(),)
    proton.finalize(a)
    assert hooks.registry.active_hooks == (launch_module.LaunchHook(),)  # b still uses it
    proton.finalize(b)
    assert hooks.registry.active_hooks == ()


def test_custom_hook_objects_run_by_priority_even_without_subclassing(fake_triton):
    log = []

    class Subclassed(Hook):
        priority = 5

        def enter(self, metadata):
            log.append(("enter sub", metadata.data["name"]))

        def exit(self, metadata):
            log.append(("exit sub", metadata.data["name"]))

    class DuckTyped:  # a triton.profiler hook is not a proton Hook
        priority = 10

        def enter(self, metadata):
            log.append(("enter duck", metadata.data["name"]))

        def exit(self, metadata):
            log.append(("exit duck", metadata.data["name"]))

    proton.start("custom_a", hook=Subclassed())
    proton.start("custom_b", hook=DuckTyped())
    launch(fake_triton.runtime, "k")
    assert log == [("enter duck", "k"), ("enter sub", "k"), ("exit sub", "k"), ("exit duck", "k")]


@pytest.mark.parametrize("bad", ["torch", "TRITON", 42, object()])
def test_unsupported_hooks_raise_value_error_and_start_nothing(fake_triton, bad):
    with pytest.raises(ValueError, match="Unsupported hook"):
        proton.start("bad_hook", hook=bad)
    assert _C.live_sessions() == []
    assert not hooks.registry.installed


def test_launch_id_is_the_current_launch_inside_metadata_and_after_it(fake_triton, pushed):
    proton.start("ids", hook="triton")
    runtime = fake_triton.runtime
    seen = []

    def metadata(grid, kernel_metadata, args):
        seen.append((launch_module.id.get(), launch_module.op_name.get()))
        return {"name": "renamed", "flops": 1}

    launch(runtime, "first", metadata)
    after_first = launch_module.id.get()
    launch(runtime, "second", metadata)
    after_second = launch_module.id.get()
    assert [s[0] for s in seen] == [after_first, after_second]
    assert [s[1] for s in seen] == ["first", "second"]  # the name Triton gave, before renaming
    assert launch_module.op_name.get() == "renamed"
    assert isinstance(after_first, int) and after_second > after_first


def test_a_launch_inside_a_metadata_function_keeps_the_outer_launch_id(fake_triton, pushed):
    proton.start("nested_ids", hook="triton")
    runtime = fake_triton.runtime
    inside = []

    def outer_metadata(grid, kernel_metadata, args):
        before = launch_module.id.get()
        launch(runtime, "helper", lambda g, m, a: {"flops": 9})
        inside.append((before, launch_module.id.get()))
        return {"flops": 1}

    launch(runtime, "outer", outer_metadata)
    assert inside == [(launch_module.id.get(), launch_module.id.get())]
    assert pushed == [("outer", {"flops": 1})]


def test_launch_id_belongs_to_the_launching_thread(fake_triton, pushed):
    proton.start("thread_ids", hook="triton")
    runtime = fake_triton.runtime
    launch(runtime, "main_thread_kernel", lambda g, m, a: {})
    mine = launch_module.id.get()
    other = {}

    def worker():
        other["before"] = launch_module.id.get()
        launch(runtime, "worker_kernel", lambda g, m, a: {})
        other["after"] = launch_module.id.get()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert other["before"] is None
    assert other["after"] not in (None, mine)
    assert launch_module.id.get() == mine


CLI_HOOK_OBJECT_PROGRAM = """
import sys, types
class RuntimeKnobs:
    launch_enter_hook = None
    launch_exit_hook = None
triton = types.ModuleType("triton"); knobs = types.ModuleType("triton.knobs")
knobs.runtime = RuntimeKnobs(); triton.knobs = knobs
sys.modules["triton"] = triton; sys.modules["triton.knobs"] = knobs
import proton
from proton.flags import flags
assert proton.start("cli_session") == 0   # what the command line does first
flags.command_line = True
hook = proton.hooks.launch.LaunchHook()
assert proton.start("ignored", hook=hook) is None   # the program's own start()
print("HOOKED", proton.hooks.registry.active_hooks == (hook,))
flags.command_line = False
proton.finalize()
print("UNHOOKED", knobs.runtime.launch_enter_hook is None)
"""


def test_programs_hook_object_applies_to_the_command_line_session(tmp_path):
    r = run_python(CLI_HOOK_OBJECT_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "HOOKED True" in r.stdout and "UNHOOKED True" in r.stdout


# ---- triton.knobs.proton ----------------------------------------------------------------------


@pytest.fixture
def core_start(monkeypatch):
    """The PROTON_* variables the core sees while it starts a session."""
    seen = []

    class Spy:
        def __getattr__(self, name):
            return getattr(_C, name)

        def start(self, *args):
            seen.append({k: v for k, v in os.environ.items() if k.startswith("PROTON_")})
            return _C.start(*args)

        def set_library_search_dirs(self, dirs):
            seen.append({"search_dirs": list(dirs)})
            _C.set_library_search_dirs(dirs)

    monkeypatch.setattr(profile_module, "_C", Spy())
    return seen


def test_knob_disable_turns_start_into_a_no_op(fake_triton):
    fake_triton.proton.disable = True
    assert proton.start("disabled_by_knob") is None
    assert _C.live_sessions() == []
    fake_triton.proton.disable = False
    assert isinstance(proton.start("enabled_again"), int)


def test_knob_enable_nvtx_reaches_the_core_at_start_and_only_then(fake_triton, core_start):
    fake_triton.proton.enable_nvtx = False
    proton.start("no_nvtx")
    assert core_start[-1].get("PROTON_ENABLE_NVTX") == "0"
    assert "PROTON_ENABLE_NVTX" not in os.environ  # restored once the core has started


def test_proton_variable_wins_over_the_knob(fake_triton, core_start, monkeypatch):
    monkeypatch.setenv("PROTON_ENABLE_NVTX", "1")
    monkeypatch.setenv("PROTON_DISABLE", "0")
    fake_triton.proton.enable_nvtx = False
    fake_triton.proton.disable = True
    assert isinstance(proton.start("proton_wins"), int)
    assert core_start[-1]["PROTON_ENABLE_NVTX"] == "1"
    assert os.environ["PROTON_ENABLE_NVTX"] == "1"


def test_knobs_left_at_triton_defaults_change_nothing(fake_triton, core_start):
    proton.start("defaults")
    search_dirs, environment = core_start
    assert "PROTON_ENABLE_NVTX" not in environment
    assert "PROTON_CUPTI_LIB_PATH" not in environment
    assert "/triton/backends/nvidia/lib/cupti" not in search_dirs["search_dirs"]


def test_knob_cupti_paths_choose_the_library(fake_triton, core_start, tmp_path):
    fake_triton.proton.cupti_lib_dir = str(tmp_path / "my_cupti")
    fake_triton.proton.cupti_lib_blackwell_dir = str(tmp_path / "bw")
    proton.start("cupti_paths")
    search_dirs, environment = core_start
    assert environment["PROTON_CUPTI_LIB_PATH"] == str(tmp_path / "my_cupti")
    assert search_dirs["search_dirs"][0] == str(tmp_path / "bw")


def test_knobs_proton_cannot_honour_warn_once(fake_triton):
    fake_triton.proton.profile_buffer_size = 1 << 20
    with pytest.warns(RuntimeWarning, match=r"profile_buffer_size \(TRITON_PROFILE_BUFFER_SIZE\)"):
        s = proton.start("buffer_knob")
    proton.finalize(s)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proton.start("buffer_knob_again")


def test_triton_variables_count_when_triton_is_installed_but_not_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton.knobs", raising=False)
    monkeypatch.setattr(triton_knobs, "_triton_installed", lambda: True)
    monkeypatch.delenv("PROTON_ENABLE_NVTX", raising=False)
    monkeypatch.delenv("PROTON_CUPTI_LIB_PATH", raising=False)
    monkeypatch.setenv("TRITON_ENABLE_NVTX", "Off")
    monkeypatch.setenv("TRITON_CUPTI_LIB_PATH", "/opt/cupti")
    monkeypatch.setenv("TRITON_PROTON_DISABLE", "on")  # Triton's spelling of true
    settings = triton_knobs.read()
    assert settings.disable is True
    assert settings.env == {"PROTON_ENABLE_NVTX": "0", "PROTON_CUPTI_LIB_PATH": "/opt/cupti"}
    assert proton.start("disabled_by_variable") is None


def test_triton_variables_do_nothing_without_triton(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
    monkeypatch.delitem(sys.modules, "triton.knobs", raising=False)
    monkeypatch.setenv("TRITON_PROTON_DISABLE", "1")
    assert triton_knobs.read() == triton_knobs.Settings()
    s = proton.start("no_triton_here")
    assert isinstance(s, int)
    proton.finalize(s)
    assert os.path.exists("no_triton_here.hatchet")


def test_a_bad_integer_knob_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton.knobs", raising=False)
    monkeypatch.setattr(triton_knobs, "_triton_installed", lambda: True)
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", "lots")
    with pytest.raises(ValueError, match=r"TRITON_PROFILE_BUFFER_SIZE='lots': expected an integer"):
        proton.start("bad_int")
    assert _C.live_sessions() == []


AFTER_TRITONS_PROFILER = """
import json, sys
try:
    import triton.profiler  # loads Triton's own libproton.so
except ImportError:
    print("no triton.profiler"); sys.exit(0)
import proton
proton.start("after_triton")
with proton.scope("outer"):
    pass
proton.finalize()
root = json.load(open("after_triton.hatchet"))[0]
print([c["frame"]["name"] for c in root["children"]])
"""


def test_proton_imports_and_profiles_after_tritons_profiler(tmp_path):
    # Both packages ship a shared library; with the same SONAME the loader bound proton._C to
    # Triton's, and `import proton` failed with an undefined symbol.
    r = run_python(AFTER_TRITONS_PROFILER, tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    if "no triton.profiler" in r.stdout:
        pytest.skip("triton.profiler is not installed")
    assert r.stdout.strip().splitlines()[-1] == "['outer']"


def test_hook_manager_reads_and_drives_the_hooks_of_sessions(fake_triton):
    from proton.hooks.hook import HookManager

    class Low(Hook):
        priority = 1

    class High(Hook):
        priority = 9

    low, high = Low(), High()
    a = proton.start("manager_a", hook=low)
    assert HookManager.active_hooks == [low]
    b = proton.start("manager_b")
    HookManager.register(high, b)  # as start(hook=...) would have
    assert HookManager.active_hooks == [high, low]  # by descending priority
    assert HookManager.session_hooks == {a: {low: True}, b: {high: True}}
    HookManager.deactivate(a)
    assert HookManager.active_hooks == [high]
    assert HookManager.session_hooks[a] == {low: False}
    HookManager.activate(a)
    HookManager.unregister(b)
    assert HookManager.active_hooks == [low]
    proton.finalize(a)
    proton.finalize(b)
    assert HookManager.active_hooks == [] and HookManager.session_hooks == {}


def test_transform_tensor_metrics_splits_scalars_from_device_tensors():
    from proton.metric import TensorMetric, transform_tensor_metrics

    class CpuTensor:
        dtype = "torch.float32"

        class device:  # noqa: N801 (torch's attribute name)
            type = "cpu"
            index = None

        def dim(self):
            return 1

        def numel(self):
            return 1

        def tolist(self):
            return [8.0]

        def data_ptr(self):
            return 0

    scalars, tensors = transform_tensor_metrics({"bytes": 8, "note": "x", "t": CpuTensor()})
    assert scalars == {"bytes": 8, "note": "x", "t": 8.0}  # a host tensor's value, as a scalar
    assert tensors == {}
    # triton.profiler's types: flops* floats, bytes ints, lists element-wise; others as given.
    scalars, _ = transform_tensor_metrics(
        {"flops": 1, "flops32": [5, 6], "bytes": 3.0, "custom": 4, "bytes_list": [1.5]}
    )
    assert scalars == {
        "flops": 1.0,
        "flops32": [5.0, 6.0],
        "bytes": 3,
        "custom": 4,
        "bytes_list": [1.5],
    }
    assert [type(scalars[k]) for k in ("flops", "bytes", "custom")] == [float, int, int]
    assert transform_tensor_metrics({"bytes": [9.0, 10.0]})[0]["bytes"] == [9, 10]
    assert TensorMetric._fields == ("data_ptr", "numel", "dtype", "is_list", "device", "stream")


def test_instrumentation_hook_carries_tritons_switches():
    from proton.hooks.instrumentation import InstrumentationHook

    assert InstrumentationHook.active_count == 0
    assert InstrumentationHook.enable_host_buffer is False
    assert InstrumentationHook.host_buffer is None  # no copy unless asked for
    InstrumentationHook.host_buffer = None  # what triton.profiler's scripts do to reset it
    with pytest.raises(ValueError, match="read-only"):
        InstrumentationHook.host_buffer = b"x"
    assert InstrumentationHook().mode == proton.mode.Default()


def test_instrumentation_hook_is_reachable_as_proton_hooks_attribute():
    from proton.hooks.instrumentation import InstrumentationHook

    assert proton.hooks.InstrumentationHook is InstrumentationHook  # as scripts reach it
