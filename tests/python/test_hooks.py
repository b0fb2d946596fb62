"""hook="triton" without Triton or a GPU: the hook registry (priority, chaining, removal),
installing into a Triton-like object, launch-metadata evaluation on a fake launch, the
kernel-name filter, and the clear error when Triton cannot be imported."""

import sys
import types

import proton
import pytest
from proton import _C, hooks
from proton.hooks import Hook, HookRegistry, LaunchHook, LaunchHookInstaller, metrics_of
from proton.hooks import launch as launch_module
from proton_test_utils import find, run_python, tree


class FakeLazyDict:
    """Triton's LazyDict: `data` holds name/function/stream; get() evaluates launch_metadata."""

    def __init__(self, name, fn=None, args=None):
        self.data = {"name": name, "function": 0xF00, "stream": 7}
        self.fn, self.args, self.calls = fn, args or {}, 0

    def get(self):
        if self.fn is not None:
            self.calls += 1
            self.data = self.data | self.fn((4, 1, 1), None, self.args)
            self.fn = None
        return self.data


class FakeHookChain:
    """Newest Triton's HookChain."""

    def __init__(self, reversed=False):
        self.calls, self.reversed = [], reversed

    def add(self, fn):
        if fn not in self.calls:
            self.calls.append(fn)

    def remove(self, fn):
        if fn in self.calls:
            self.calls.remove(fn)

    def __call__(self, metadata):
        for fn in reversed(self.calls) if self.reversed else self.calls:
            fn(metadata)


class Recorder(Hook):
    def __init__(self, name, log, priority=0):
        self.name, self.log, self.priority = name, log, priority

    def enter(self, metadata):
        self.log.append(("enter", self.name))

    def exit(self, metadata):
        self.log.append(("exit", self.name))

    def activate(self):
        self.log.append(("activate", self.name))

    def deactivate(self):
        self.log.append(("deactivate", self.name))


class CountingInstaller:
    def __init__(self):
        self.installed = None
        self.installs = self.uninstalls = 0

    def install(self, enter, exit):
        self.installed = (enter, exit)
        self.installs += 1

    def uninstall(self):
        self.installed = None
        self.uninstalls += 1


# ---- registry ------------------------------------------------------------------------------


def test_hooks_run_by_priority_and_exit_in_reverse():
    log = []
    registry = HookRegistry(CountingInstaller())
    low, high, mid = Recorder("low", log, 0), Recorder("high", log, 100), Recorder("mid", log, 50)
    registry.register(low, session=0)
    registry.register(high, session=0)
    registry.register(mid, session=1)
    log.clear()
    registry.enter(None)
    registry.exit(None)
    assert log == [
        ("enter", "high"),
        ("enter", "mid"),
        ("enter", "low"),
        ("exit", "low"),
        ("exit", "mid"),
        ("exit", "high"),
    ]


def test_a_single_running_hook_is_installed_itself_and_several_go_through_the_registry():
    log = []
    installer = CountingInstaller()
    registry = HookRegistry(installer)
    first, second = Recorder("first", log, 10), Recorder("second", log, 0)
    registry.register(first, session=0)
    assert installer.installed == (first.enter, first.exit) and installer.installs == 1
    registry.register(second, session=1)
    assert installer.installed == (registry.enter, registry.exit)
    log.clear()
    installer.installed[0](None)
    installer.installed[1](None)
    assert log == [("enter", "first"), ("enter", "second"), ("exit", "second"), ("exit", "first")]
    registry.unregister(0)
    assert installer.installed == (second.enter, second.exit)
    assert (installer.installs, installer.uninstalls) == (3, 2)
    registry.unregister(1)
    assert installer.installed is None and not registry.installed


def test_dispatchers_stay_installed_until_the_last_session_goes():
    log = []
    installer = CountingInstaller()
    registry = HookRegistry(installer)
    shared = Recorder("shared", log)
    registry.register(shared, session=0)
    registry.register(shared, session=1)
    assert installer.installs == 1 and registry.installed
    assert registry.active_hooks == (shared,)
    registry.unregister(0)
    assert registry.installed and registry.active_hooks == (shared,)
    assert ("deactivate", "shared") not in log
    registry.unregister(1)
    assert not registry.installed and installer.uninstalls == 1
    assert registry.active_hooks == ()
    assert log == [("activate", "shared"), ("deactivate", "shared")]


def test_a_hook_runs_while_any_active_session_needs_it():
    log = []
    registry = HookRegistry(CountingInstaller())
    h = Recorder("h", log)
    registry.register(h, session=0)
    registry.register(h, session=1)
    registry.deactivate(0)
    assert registry.active_hooks == (h,)
    registry.deactivate(1)
    assert registry.active_hooks == ()
    registry.enter(None)
    assert ("enter", "h") not in log
    registry.activate(None)
    assert registry.active_hooks == (h,)
    assert log == [("activate", "h"), ("deactivate", "h"), ("activate", "h")]
    registry.unregister(None)
    assert not registry.installed


# ---- installing into Triton-like objects ---------------------------------------------------


def test_plain_hook_attributes_are_chained_and_restored():
    log = []

    def theirs_enter(m):
        log.append("theirs enter")

    def theirs_exit(m):
        log.append("theirs exit")

    runtime = types.SimpleNamespace(launch_enter_hook=theirs_enter, launch_exit_hook=theirs_exit)
    installer = LaunchHookInstaller(runtime)
    installer.install(lambda m: log.append("ours enter"), lambda m: log.append("ours exit"))
    runtime.launch_enter_hook("md")
    runtime.launch_exit_hook("md")
    assert log == ["theirs enter", "ours enter", "ours exit", "theirs exit"]
    installer.uninstall()
    assert runtime.launch_enter_hook is theirs_enter
    assert runtime.launch_exit_hook is theirs_exit


def test_hook_installed_on_top_of_ours_keeps_working_after_we_leave():
    log = []
    runtime = types.SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    installer = LaunchHookInstaller(runtime)
    installer.install(lambda m: log.append("ours"), lambda m: None)
    below = runtime.launch_enter_hook

    def on_top(m):  # another library chaining to whatever was there
        log.append("top")
        below(m)

    runtime.launch_enter_hook = on_top
    installer.uninstall()
    assert runtime.launch_enter_hook is on_top  # theirs is not removed
    runtime.launch_enter_hook("md")
    assert log == ["top"]  # and ours no longer runs


def test_hook_chain_gets_our_dispatchers_added_and_removed():
    runtime = types.SimpleNamespace(
        launch_enter_hook=FakeHookChain(), launch_exit_hook=FakeHookChain(reversed=True)
    )
    runtime.launch_enter_hook.add(print)
    installer = LaunchHookInstaller(runtime)
    log = []
    installer.install(lambda m: log.append("enter"), lambda m: log.append("exit"))
    assert len(runtime.launch_enter_hook.calls) == 2
    assert runtime.launch_enter_hook.calls[0] is print
    runtime.launch_exit_hook("md")
    assert log == ["exit"]
    installer.uninstall()
    assert runtime.launch_enter_hook.calls == [print]
    assert runtime.launch_exit_hook.calls == []


@pytest.fixture
def fake_triton(monkeypatch):
    """A Triton with knobs.runtime.launch_enter_hook (Triton 3.4 and 3.5)."""

    class RuntimeKnobs:
        launch_enter_hook = None
        launch_exit_hook = None

    triton = types.ModuleType("triton")
    triton.__version__ = "3.5.0"
    knobs = types.ModuleType("triton.knobs")
    knobs.runtime = RuntimeKnobs()
    triton.knobs = knobs
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.knobs", knobs)
    yield knobs.runtime
    hooks.registry.unregister(None)


def test_start_with_hook_installs_into_triton_and_finalize_removes(fake_triton):
    a = proton.start("hooked_a", hook="triton")
    b = proton.start("hooked_b", hook="triton")
    assert fake_triton.launch_enter_hook is not None
    assert hooks.registry.active_hooks == (LaunchHook(),)
    proton.finalize(a)
    assert fake_triton.launch_enter_hook is not None  # b still needs it
    proton.finalize(b)
    assert fake_triton.launch_enter_hook is None
    assert fake_triton.launch_exit_hook is None


def test_deactivated_sessions_do_not_evaluate_metadata(fake_triton):
    s = proton.start("paused", hook="triton")
    calls = []
    proton.deactivate(s)
    fake_triton.launch_enter_hook(FakeLazyDict("k", lambda g, m, a: calls.append(1) or {}))
    assert calls == []
    proton.activate(s)
    fake_triton.launch_enter_hook(FakeLazyDict("k", lambda g, m, a: calls.append(1) or {}))
    fake_triton.launch_exit_hook(None)
    assert calls == [1]


def test_hook_triton_without_triton_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
    with pytest.raises(proton.BackendUnavailableError) as info:
        proton.start("no_triton", hook="triton")
    message = str(info.value)
    assert message.startswith("[PROTON] hook='triton' needs Triton, which could not be imported")
    assert "pip install triton" in message
    assert _C.live_sessions() == []
    assert not hooks.registry.installed


# ---- launch metadata -----------------------------------------------------------------------


def test_metadata_numbers_become_metrics_and_name_renames(pushed):
    proton.start("meta")
    hook = LaunchHook()

    def metadata(grid, kernel_metadata, args):
        n = args["n"]
        return {"name": f"vadd_{n}", "flops32": 2 * n, "bytes": 12.0 * n, "note": "text"}

    launch = FakeLazyDict("vadd_kernel", metadata, {"n": 1024})
    hook.enter(launch)
    hook.exit(launch)
    assert pushed == [("vadd_1024", {"flops32": 2048, "bytes": 12288.0})]


def test_metrics_of_keeps_numbers_only_and_never_reserved_keys():
    import fractions

    data = {
        "name": "k",
        "function": 123,
        "stream": 7,
        "flops16": 10,
        "util": 0.5,
        "flag": True,
        "ratio": fractions.Fraction(1, 4),
        "shape": (1, 2),
        "label": "x",
        "none": None,
    }
    assert metrics_of(data) == {"flops16": 10, "util": 0.5, "flag": 1, "ratio": 0.25}


def test_metrics_of_converts_numpy_scalars():
    np = pytest.importorskip("numpy")
    data = {"flops": np.int64(7), "util": np.float32(0.5), "big": 1 << 70, "name": "k"}
    metrics = metrics_of(data)
    assert metrics == {"flops": 7, "util": 0.5}
    assert type(metrics["flops"]) is int and type(metrics["util"]) is float


def test_kernels_launched_inside_the_metadata_function_go_under_the_metadata_state(pushed):
    s = proton.start("inside")
    hook = LaunchHook()
    inner_calls = []

    def inner_metadata(grid, kernel_metadata, args):
        inner_calls.append(1)
        return {"flops": 1}

    def metadata(grid, kernel_metadata, args):
        # A kernel launched here (the hook sees its launch) gets no metadata of its own ...
        inner = FakeLazyDict("helper_kernel", inner_metadata)
        hook.enter(inner)
        hook.exit(inner)
        # ... and work recorded here is filed under the metadata state and the name of the
        # kernel whose metadata this is (issue 13, item 4).
        with proton.scope("size_probe", {"probes": 1}):
            pass
        return {"flops": 5}

    with proton.state("user_state"):
        launch = FakeLazyDict("outer_kernel", metadata)
        hook.enter(launch)
        with proton.scope("after", {"n": 1}):  # the user's state is back
            pass
        hook.exit(launch)
    assert inner_calls == []
    assert pushed == [("outer_kernel", {"flops": 5})]
    root = proton.data.get(s)[0]
    probe = find(root, "size_probe", "__proton_launch_metadata", "outer_kernel")
    assert probe["metrics"]["probes"] == 1
    assert find(root, "size_probe", "__proton_launch_metadata")["metrics"] == {}
    assert find(root, "after", "user_state")["metrics"]["n"] == 1
    assert tree(s)[2][0][0] == "size_probe"


def test_a_raising_metadata_function_propagates_and_leaves_no_state_behind(pushed):
    s = proton.start("raising")
    hook = LaunchHook()

    def bad(grid, kernel_metadata, args):
        raise KeyError("no such argument")

    launch = FakeLazyDict("broken_kernel", bad)
    with pytest.raises(KeyError, match="no such argument"):
        hook.enter(launch)
    hook.exit(launch)
    with proton.scope("after_failure", {"n": 1}):  # not under __proton_launch_metadata
        pass
    good = FakeLazyDict("good_kernel", lambda g, m, a: {"flops": 3})
    hook.enter(good)  # the next launch is evaluated again
    hook.exit(good)
    assert pushed == [("good_kernel", {"flops": 3})]
    assert [child["frame"]["name"] for child in proton.data.get(s)[0]["children"]] == [
        "after_failure"
    ]


def test_plain_dict_metadata_is_taken_as_evaluated(pushed):
    proton.start("plain")
    hook = LaunchHook()
    data = {"name": "direct_kernel", "bytes": 64}
    hook.enter(data)
    hook.exit(data)
    assert pushed == [("direct_kernel", {"bytes": 64})]


def test_filter_skips_metadata_evaluation_for_other_kernels(pushed):
    proton.start("filtered")
    hook = LaunchHook()
    hooks.configure_launch_filter(include="matmul_", exclude=".*_bwd$")
    evaluated = []

    def metadata(grid, kernel_metadata, args):
        evaluated.append(args["k"])
        return {"flops": 1}

    for name in ("vadd_kernel", "matmul_fwd", "matmul_bwd", "xmatmul_fwd"):
        launch = FakeLazyDict(name, metadata, {"k": name})
        hook.enter(launch)
        hook.exit(launch)
    assert evaluated == ["matmul_fwd"]  # re.match: anchored at the start
    assert pushed == [("matmul_fwd", {"flops": 1})]


def test_renamed_kernel_that_no_longer_matches_is_not_pushed(pushed):
    proton.start("renamed_out")
    hooks.configure_launch_filter(exclude="hidden_")
    launch = FakeLazyDict("visible", lambda g, m, a: {"name": "hidden_x", "flops": 1})
    LaunchHook().enter(launch)
    LaunchHook().exit(launch)
    assert launch.calls == 1
    assert pushed == []


CLI_PROGRAM = """
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
assert proton.start("ignored", hook="triton") is None   # the program's own start()
print("HOOKED", knobs.runtime.launch_enter_hook is not None)
flags.command_line = False
proton.finalize()
print("UNHOOKED", knobs.runtime.launch_enter_hook is None)
"""


def test_programs_hook_request_applies_to_the_command_line_session(tmp_path):
    r = run_python(CLI_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "HOOKED True" in r.stdout and "UNHOOKED True" in r.stdout
