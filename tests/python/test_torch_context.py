"""context="torch" on the CPU: module and operator frames, backward frames tied to their
forward module, backward attribution of engine threads, and the combinations with python."""

import ctypes
import json
import threading

import proton
import pytest
from proton import _C
from proton_test_utils import find, run_interpreter
from torch_support import all_paths, import_torch, node_names, path_to

torch = import_torch()


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 4)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Timed(torch.nn.Module):
    """A module whose forward records a CPU-timed scope, so its frame holds a metric."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(2, 2)

    def forward(self, x):
        with proton.cpu_timed_scope("work"):
            return self.inner(x)


# Module frames come from sys.monitoring's events on Module._call_impl (CPython 3.12 and
# later) or from global module hooks (PROTON_TORCH_MODULE_EVENTS=hooks, and older Pythons):
# every test here runs on each route this interpreter has, and must see the same frames.
ROUTES = ["events", "hooks"] if _C.module_events_supported else ["hooks"]


@pytest.fixture(autouse=True, params=ROUTES)
def module_route(request, monkeypatch):
    if request.param == "hooks":
        monkeypatch.setenv("PROTON_TORCH_MODULE_EVENTS", "hooks")
    else:
        monkeypatch.delenv("PROTON_TORCH_MODULE_EVENTS", raising=False)
    return request.param


def _global_hooks():
    modules = torch.nn.modules.module
    return len(modules._global_forward_pre_hooks) + len(modules._global_forward_hooks)


def _root(session):
    return proton.data.get(session)[0]


def _step(model, x):
    loss = model(x).sum()
    loss.backward()


def test_module_and_operator_frames_nest_under_the_scope():
    model, x = MLP(), torch.randn(3, 4)
    s = proton.start("torchctx", context="torch")
    with proton.scope("step"):
        model(x)
    root = _root(s)
    mlp = find(root, "step", "MLP")
    assert node_names(mlp) == ["fc1 (Linear)", "act (GELU)", "fc2 (Linear)"]
    linear = find(mlp, "fc1 (Linear)", "aten::linear")
    assert "aten::addmm" in node_names(linear)
    assert node_names(find(mlp, "act (GELU)")) == ["aten::gelu"]
    proton.finalize(s)


def test_a_scope_inside_a_module_lands_under_its_module_path_with_its_time():
    model = torch.nn.Sequential(Timed())
    s = proton.start("torchscope", context="torch")
    with torch.no_grad():
        model(torch.randn(1, 2))
        model(torch.randn(1, 2))
    work = find(_root(s), "Sequential", "0 (Timed)", "work")
    assert work["metrics"]["cpu_time (ns)"] > 0
    assert node_names(find(work, "inner (Linear)")) == ["aten::linear"]
    proton.finalize(s)


def test_module_and_operator_frames_of_each_phase_go_into_that_phases_tree():
    # Frames' nodes are cached per thread: a new phase (a new tree) or a new session must not
    # get the nodes of the one before.
    class Counted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(2, 2)

        def forward(self, x, n):
            with proton.scope("work", metrics={"n": n}):
                return self.inner(x)

    counted, x = Counted(), torch.randn(1, 2)
    for first in (1, 7):  # a second session after the first: its own tree
        s = proton.start("phases", context="torch")
        with torch.no_grad():
            counted(x, first)
            proton.data.advance_phase(s)
            counted(x, 2)
            counted(x, 3)
        for phase, expected in ((0, first), (1, 2 + 3)):
            work = find(proton.data.get(s, phase)[0], "Counted", "work")
            assert work["metrics"]["n"] == expected, (phase, work)
            assert node_names(find(work, "inner (Linear)")) == ["aten::linear"]
        proton.finalize(s)


def test_backward_nodes_go_under_the_forward_module_then_backward_operator():
    model, x = MLP(), torch.randn(3, 4)
    s = proton.start("torchbwd", context="torch")
    with proton.scope("step"):
        _step(model, x)
    mlp = find(_root(s), "step", "MLP")
    fc1 = node_names(find(mlp, "fc1 (Linear)"))
    assert fc1 == ["aten::linear", "backward: aten::addmm"]
    assert "aten::mm" in node_names(find(mlp, "fc1 (Linear)", "backward: aten::addmm"))
    assert node_names(find(mlp, "act (GELU)")) == ["aten::gelu", "backward: aten::gelu"]
    assert "backward: aten::sum" in node_names(find(_root(s), "step"))
    proton.finalize(s)


def test_frames_leave_the_tree_of_a_shadow_session_alone():
    model, x = MLP(), torch.randn(3, 4)
    shadow = proton.start("plain")
    torchs = proton.start("withtorch", context="torch")
    with proton.cpu_timed_scope("step"):
        _step(model, x)
    assert node_names(_root(shadow)) == ["step"]
    assert node_names(find(_root(shadow), "step")) == []
    assert "MLP" in node_names(find(_root(torchs), "step"))
    proton.finalize()
    # Once the last torch session ends, the hooks and the observer are gone.
    s = proton.start("after", context="shadow")
    model(x)
    assert node_names(_root(s)) == []
    proton.finalize(s)


def test_python_torch_splices_module_frames_below_the_line_that_called_them():
    model = torch.nn.Sequential(Timed())
    s = proton.start("pytorch", context="python,torch")

    def call_model():
        with torch.no_grad():
            model(torch.randn(1, 2))

    call_model()
    path = path_to(_root(s), "work")
    # ... call_model's line, the outer module, torch's module machinery, Sequential's forward
    # line, the inner module, Timed.forward's line, then the scope entered there.
    i = path.index("Sequential")
    assert path[i - 1].endswith("@call_model")
    j = path.index("0 (Timed)")
    assert path[j - 1].endswith("@forward") and "container.py" in path[j - 1]
    assert all("module.py" in p for p in path[i + 1 : j - 1])
    assert path[-2].endswith("@forward") and "test_torch_context.py" in path[-2]
    assert all("module.py" in p for p in path[j + 1 : -2])
    assert path[-1] == "work"
    assert proton.data.get(s)[0]["proton_metadata"]["context"] == "python,torch"
    proton.finalize(s)


def _slice_names(path):
    """Names of the X slices of a chrome trace, in file order."""
    events = json.load(open(path))["traceEvents"]
    return [e["name"] for e in events if e.get("ph") == "X"]


def test_trace_data_has_modules_and_operators_as_cpu_slices(tmp_path):
    model, x = MLP(), torch.randn(3, 4)
    s = proton.start("torchtrace", context="torch", data="trace")
    with torch.no_grad():
        model(x)
    proton.finalize(s)
    slices = _slice_names(tmp_path / "torchtrace.chrome_trace")
    assert slices.count("fc1 (Linear)") == 1
    assert slices.count("aten::addmm") == 2
    assert slices.count("MLP") == 1


def test_views_get_no_tree_frame_but_stay_trace_slices(tmp_path):
    # aten::linear transposes its weight (aten::t -> aten::transpose -> aten::as_strided) and
    # its backward node TBackward0 transposes back: views launch nothing, so a tree leaves
    # them out (half of an eager step's operators), while a trace keeps every operator.
    model, x = MLP(), torch.randn(3, 4)
    tree = proton.start("viewtree", context="torch")
    _step(model, x)
    linear = find(_root(tree), "MLP", "fc1 (Linear)", "aten::linear")
    assert node_names(linear) == ["aten::addmm"]
    every = {name for path, _ in all_paths(_root(tree)) for name in path}
    assert not every & {"aten::t", "aten::transpose", "aten::as_strided", "backward: aten::t"}
    assert "backward: aten::addmm" in every
    proton.finalize(tree)

    trace = proton.start("viewtrace", context="torch", data="trace")
    _step(model, x)
    proton.finalize(trace)
    slices = _slice_names(tmp_path / "viewtrace.chrome_trace")
    # One step transposes 9 times: each aten::linear, each TBackward0, and AddmmBackward0 for
    # the gradients it computes.
    assert slices.count("backward: aten::t") == 2
    assert slices.count("aten::t") == 9
    assert slices.count("aten::linear") == 2


def _name_this_thread(name: bytes) -> None:
    libc = ctypes.CDLL(None)
    libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME


class _OnEngineThread(torch.autograd.Function):
    """Runs its backward's work on a thread named as autograd's engine threads are, as the
    engine does for CUDA tensors: what that thread records must go under the caller."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        def work():
            _name_this_thread(b"pt_autograd_0")
            with proton.cpu_timed_scope("engine work"):
                pass

        t = threading.Thread(target=work)
        t.start()
        t.join()
        return grad * 2


@pytest.mark.parametrize("context", ["shadow", "python"])
def test_engine_thread_work_is_filed_under_the_caller_of_backward(context):
    x = torch.randn(3, requires_grad=True)
    s = proton.start("borrow", context=context)

    def train_step():
        with proton.scope("train"):
            _OnEngineThread.apply(x).sum().backward()

    train_step()
    assert _C.backwards_in_flight() == 0
    paths = [p for p, n in all_paths(_root(s)) if p[-1] == "engine work"]
    assert len(paths) == 1
    path = paths[0]
    assert "train" in path
    if context == "python":
        i = next(k for k, p in enumerate(path) if p.endswith("@train_step"))
        assert any(p.endswith("@backward") for p in path[i + 1 :]), path
    proton.finalize(s)


def test_a_thread_with_another_name_keeps_its_own_context():
    x = torch.randn(3, requires_grad=True)

    class Other(_OnEngineThread):
        @staticmethod
        def backward(ctx, grad):
            def work():
                _name_this_thread(b"loader")
                with proton.cpu_timed_scope("other work"):
                    pass

            t = threading.Thread(target=work)
            t.start()
            t.join()
            return grad

    s = proton.start("noborrow")
    with proton.scope("train"):
        Other.apply(x).sum().backward()
    # A Python thread adopts the scopes of the thread that started it: "train" through that
    # route, never twice.
    path = path_to(_root(s), "other work")
    assert path.count("train") == 1
    proton.finalize(s)


def test_combined_contexts_that_cannot_run_together_are_refused():
    s = proton.start("py", context="python")
    with pytest.raises(proton.ConfigError, match="context='python,native' session cannot run"):
        proton.start("pn", context="python,native")
    proton.finalize(s)


def test_without_a_compiler_module_frames_stay_and_a_warning_says_why(tmp_path):
    script = tmp_path / "nocc.py"
    script.write_text(
        "import warnings, torch, proton\n"
        "m = torch.nn.Sequential(torch.nn.Linear(2, 2))\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    s = proton.start('nocc', context='torch')\n"
        "print([str(x.message) for x in w if 'operator' in str(x.message)])\n"
        "m(torch.randn(1, 2))\n"
        "root = proton.data.get(s)[0]\n"
        "print([c['frame']['name'] for c in root['children'][0]['children']])\n"
        "proton.finalize()\n"
    )
    result = run_interpreter(
        [str(script)],
        tmp_path,
        env={"CXX": str(tmp_path / "no-such-compiler"), "PROTON_CACHE_DIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    warned, children = result.stdout.strip().splitlines()[-2:]
    assert "PyTorch's operators are not recorded" in warned
    assert children == "['0 (Linear)']"


def test_torch_context_without_torch_is_a_config_error(tmp_path):
    script = tmp_path / "notorch.py"
    script.write_text(
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "import proton\n"
        "try:\n"
        "    proton.start('x', context='python,torch')\n"
        "except proton.ConfigError as e:\n"
        "    print('ConfigError', e)\n"
        "s = proton.start('y', context='python')\n"
        "proton.finalize()\n"
    )
    result = run_interpreter([str(script)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ConfigError [PROTON] context='torch' needs PyTorch" in result.stdout


def test_compiled_graph_nodes_carry_the_module_frames_inductor_kernels_get():
    from proton.frameworks import _inductor_frames

    seen = []

    def backend(graph_module, example_inputs):
        nodes = [n for n in graph_module.graph.nodes if n.op == "call_function"]
        seen.append(_inductor_frames.kernel_frames(nodes[:1], backward=False))
        return graph_module.forward

    model = torch.nn.Sequential(MLP())
    torch.compile(model, backend=backend)(torch.randn(2, 4))
    assert seen and seen[0][:2] == ("0 (MLP)", "fc1 (Linear)")


def test_torch_native_puts_module_frames_before_the_native_ones():
    model = torch.nn.Sequential(Timed())
    s = proton.start("torchnative", context="torch,native")
    with torch.no_grad():
        model(torch.randn(1, 2))
    path = path_to(_root(s), "work")
    assert path[:2] == ("Sequential", "0 (Timed)"), path
    assert all("+0x" in f for f in path[2:-1]), path  # C/C++ frames below the interpreter
    assert not any("_PyEval_EvalFrame" in f for f in path), path
    proton.finalize(s)


def test_each_route_registers_its_own_and_removes_it_at_finalize(module_route):
    import sys

    hooks_before = _global_hooks()
    s = proton.start("route", context="torch")
    if module_route == "events":
        # No hook: module calls keep PyTorch's fast path; a monitoring tool named proton.
        assert _global_hooks() == hooks_before
        tools = [sys.monitoring.get_tool(t) for t in range(6)]
        assert tools.count("proton") == 1
    else:
        assert _global_hooks() == hooks_before + 2
    proton.finalize(s)
    assert _global_hooks() == hooks_before
    if module_route == "events":
        assert "proton" not in [sys.monitoring.get_tool(t) for t in range(6)]


class Raises(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.bad = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.bad(self.fc(x))  # 4 features into a Linear of 3: raises


def test_a_module_that_raises_closes_its_frames_and_the_next_call_nests_right():
    model, x = Raises(), torch.randn(2, 4)
    s = proton.start("raises", context="torch")
    with proton.scope("first"):
        with pytest.raises(RuntimeError):
            model(x)
    with proton.scope("second"):
        model.fc(x)
    root = _root(s)
    assert node_names(root) == ["first", "second"]
    assert node_names(find(root, "first", "Raises")) == ["fc (Linear)", "bad (Linear)"]
    assert node_names(find(root, "second")) == ["Linear"]
    assert _C.open_module_calls() == 0
    proton.finalize(s)


def test_a_session_started_inside_a_module_call_pairs_the_calls_it_saw():
    class Starts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.session = None

        def forward(self, x):
            self.session = proton.start("inside", context="torch")
            return self.fc(x)

    model, x = Starts(), torch.randn(1, 2)
    with torch.no_grad():
        model(x)  # its own call began before the session: no frame, no exit
        model.fc(x)
    root = _root(model.session)
    # Both calls of fc: the one inside the call that began before the session has no
    # enclosing module frame, so it is named as an outermost module, as the direct call is.
    assert node_names(root) == ["Linear"]
    assert node_names(find(root, "Linear")) == ["aten::linear"]
    assert _C.open_module_calls() == 0
    proton.finalize(model.session)


@pytest.mark.skipif(not _C.module_events_supported, reason="needs sys.monitoring (Python 3.12+)")
def test_with_every_monitoring_tool_id_taken_the_hooks_give_the_frames(module_route):
    import sys

    taken = [t for t in range(6) if sys.monitoring.get_tool(t) is None]
    for t in taken:
        sys.monitoring.use_tool_id(t, "someone else")
    try:
        hooks_before = _global_hooks()
        model, x = MLP(), torch.randn(3, 4)
        s = proton.start("taken", context="torch")
        assert _global_hooks() == hooks_before + 2
        with torch.no_grad():
            model(x)
        assert node_names(find(_root(s), "MLP")) == ["fc1 (Linear)", "act (GELU)", "fc2 (Linear)"]
        proton.finalize(s)
    finally:
        for t in taken:
            sys.monitoring.free_tool_id(t)
