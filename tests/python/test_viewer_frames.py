"""proton-viewer shows Python frames shortened and folded (frames.py): paths relative to
site-packages, the standard library, the working directory or the script's directory, runs
of library frames folded into their first frame with '(+N)', metrics added where paths
merge; `--frames all` shows the profile as written."""

import copy
import json
import os

import pytest
from proton import viewer
from proton.viewer import frames
from viewer_test_utils import DEVICES, node, view, view_lines

SP = "/opt/venv/lib/python3.11/site-packages/"
CWD = "/home/u/proj"


def kernel(name, time):
    return node(name, {"time (ns)": time, "count": 1, "device_id": "0", "device_type": "CUDA"})


def deep_tree():
    """train.py -> step -> torch module calls -> model.py forward -> torch layers -> kernels;
    a stdlib frame, and a frozen importlib frame above a scope."""
    call = SP + "torch/nn/modules/module.py:1779@_wrapped_call_impl"
    impl = SP + "torch/nn/modules/module.py:1790@_call_impl"
    layers = node(
        impl,
        None,
        node(SP + "torch/nn/modules/linear.py:125@forward", None, kernel("gemm", 3000)),
        node(SP + "torch/nn/modules/conv.py:99@forward", None, kernel("gemm", 500)),
        node(
            SP + "torch/nn/modules/activation.py:7@forward",
            None,
            node(SP + "torch/nn/functional.py:1500@relu", None, kernel("relu", 200)),
        ),
    )
    forward = node(
        f"{CWD}/model.py:42@forward",
        None,
        node(call, None, layers),
        node("/usr/lib/python3.11/contextlib.py:141@__exit__", None, kernel("copy", 100)),
    )
    step = node(
        f"{CWD}/train.py:12@step",
        None,
        node(call, None, node(impl, None, forward)),
        node(
            "<frozen importlib._bootstrap>:488@_call_with_frames_removed",
            None,
            node("load", {"cpu_time (ns)": 7}, kernel("memset", 50)),
        ),
    )
    return node(
        "ROOT", {"time (ns)": 0, "count": 0}, node(f"{CWD}/train.py:30@<module>", None, step)
    )


def write(path, root, metadata=None):
    if metadata is not None:
        root = dict(root, proton_metadata=metadata)
    path.write_text(json.dumps([root, DEVICES]))
    return str(path)


NEW_META = {"working_directory": CWD, "script": f"{CWD}/train.py"}


@pytest.fixture
def new_file(tmp_path):
    return write(tmp_path / "new.hatchet", deep_tree(), NEW_META)


@pytest.fixture
def old_file(tmp_path):
    return write(tmp_path / "old.hatchet", deep_tree())


FOLDED = [
    "time/ns  count  name",
    "   3850      5  ROOT",
    "   3850      5  └─ train.py:30@<module>",
    "   3850      5     └─ train.py:12@step",
    "   3800      4        ├─ torch/nn/modules/module.py:1779@_wrapped_call_impl (+1)",
    "   3800      4        │  └─ model.py:42@forward",
    "   3500      2        │     ├─ torch/nn/modules/module.py:1779@_wrapped_call_impl (+2)",
    "   3500      2        │     │  └─ gemm",
    "    200      1        │     ├─ torch/nn/modules/module.py:1779@_wrapped_call_impl (+3)",
    "    200      1        │     │  └─ relu",
    "    100      1        │     └─ contextlib.py:141@__exit__",
    "    100      1        │        └─ copy",
    "     50      1        └─ <frozen importlib._bootstrap>:488@_call_with_frames_removed",
    "     50      1           └─ load",
    "     50      1              └─ memset",
]


def test_default_folds_library_runs_and_shortens_paths(capsys, new_file):
    assert view_lines(capsys, "-m", "time/ns,count", new_file) == FOLDED


def test_files_without_program_paths_still_shorten_library_paths(capsys, old_file):
    lines = view_lines(capsys, "-m", "time/ns,count", old_file)
    # The program's own files stay absolute; the library runs fold the same way.
    expected = [
        line.replace("train.py:", f"{CWD}/train.py:").replace("model.py:", f"{CWD}/model.py:")
        for line in FOLDED
    ]
    assert lines == expected


def test_frames_all_shows_the_profile_as_written(capsys, new_file):
    lines = view_lines(capsys, "-m", "time/ns", "--frames", "all", new_file)
    names = [line.split("─ ", 1)[-1] for line in lines[2:]]
    profile = viewer.load(new_file)
    assert names == profile.names[1:]  # every frame, full names, in pre-order
    assert lines[1] == "   3850  ROOT"
    assert (
        lines[9]
        == "   3000        │        │     ├─ " + SP + "torch/nn/modules/linear.py:125@forward"
    )
    # The tree of the profile as loaded, rendered without frames.py at all.
    unfolded = viewer.render(profile, [viewer.derive(profile, "time/ns")])
    assert lines == unfolded.splitlines()


def test_frames_short_shortens_without_folding(capsys, new_file):
    lines = view_lines(capsys, "-m", "time/ns", "--frames", "short", new_file)
    assert len(lines) == 1 + len(viewer.load(new_file))
    assert lines[4] == "   3800        ├─ torch/nn/modules/module.py:1779@_wrapped_call_impl"
    assert lines[5] == "   3800        │  └─ torch/nn/modules/module.py:1790@_call_impl"
    assert lines[6] == "   3800        │     └─ model.py:42@forward"


def test_fold_returns_a_new_profile_with_exact_sums(new_file):
    profile = viewer.load(new_file)
    names, parents, rows = list(profile.names), list(profile.parents), copy.deepcopy(profile.rows)
    folded = frames.fold(profile)
    assert (profile.names, profile.parents, profile.rows) == (names, parents, rows)
    assert folded is not profile and len(folded) == 14
    gemm = folded.find(
        "train.py:30@<module>",
        "train.py:12@step",
        "torch/nn/modules/module.py:1779@_wrapped_call_impl (+1)",
        "model.py:42@forward",
        "torch/nn/modules/module.py:1779@_wrapped_call_impl (+2)",
        "gemm",
    )
    # Two gemm launches reached through two hidden chains of the same length: one node.
    assert gemm.metrics == {"time (ns)": 3500, "count": 2, "device_id": "0", "device_type": "CUDA"}
    assert folded.inclusive("time (ns)")[0] == profile.inclusive("time (ns)")[0] == 3850
    load = folded.find(
        "train.py:30@<module>",
        "train.py:12@step",
        "<frozen importlib._bootstrap>:488@_call_with_frames_removed",
        "load",
    )
    assert load.metrics == {"cpu_time (ns)": 7}  # a scope is never folded
    assert folded.metadata is profile.metadata and folded.devices == profile.devices
    assert frames.fold(profile, "all") is profile


def test_a_library_frame_with_its_own_metrics_is_where_the_run_shows(tmp_path):
    a, b, c = (SP + f"lib/m.py:{n}@f{n}" for n in (1, 2, 3))
    root = node(
        "ROOT",
        None,
        node(a, None, node(b, {"time (ns)": 5}, node(c, None, kernel("k", 10)))),
    )
    folded = frames.fold(viewer.load(write(tmp_path / "p.hatchet", root, NEW_META)))
    assert folded.names == ["ROOT", "lib/m.py:1@f1 (+1)", "lib/m.py:1@f1 (+2)", "k"]
    assert folded.parents == [-1, 0, 0, 2]
    assert folded.inclusive("time (ns)") == [15, 5, 10, 10]


def test_files_outside_the_program_are_library_frames_when_the_profile_says_where_it_is(
    tmp_path,
):
    root = node(
        "ROOT",
        None,
        node(
            f"{CWD}/train.py:1@main",
            None,
            node(
                "/work/editable/pkg/api.py:10@call",
                None,
                node("/work/editable/pkg/core.py:20@run", None, kernel("k", 1)),
            ),
            node(f"{CWD}/.venv/lib/python3.12/site-packages/x/y.py:3@g", None, kernel("k2", 2)),
            node("<stdin>:1@<module>", None, node("<stdin>:2@f", None, kernel("k3", 3))),
        ),
    )
    new = frames.fold(viewer.load(write(tmp_path / "n.hatchet", root, NEW_META)))
    assert new.names == [
        "ROOT",
        "train.py:1@main",
        "/work/editable/pkg/api.py:10@call (+1)",
        "k",
        "x/y.py:3@g",
        "k2",
        "<stdin>:1@<module>",
        "<stdin>:2@f",
        "k3",
    ]
    old = frames.fold(viewer.load(write(tmp_path / "o.hatchet", root)))
    assert old.names[2:5] == [
        "/work/editable/pkg/api.py:10@call",
        "/work/editable/pkg/core.py:20@run",
        "k",
    ]


@pytest.mark.parametrize(
    ("path", "shown", "library"),
    [
        (SP + "torch/nn/modules/module.py", "torch/nn/modules/module.py", True),
        ("/usr/lib/python3/dist-packages/numpy/core.py", "numpy/core.py", True),
        ("/usr/lib/python3.11/threading.py", "threading.py", True),
        ("/usr/lib/python3.13t/concurrent/futures/thread.py", "concurrent/futures/thread.py", True),
        (
            "/opt/conda/lib/python3.10/site-packages/triton/runtime/jit.py",
            "triton/runtime/jit.py",
            True,
        ),
        (r"C:\Python311\Lib\threading.py", "threading.py", True),
        ("<frozen runpy>", "<frozen runpy>", True),
        ("<string>", "<string>", True),
        ("<ipython-input-3-abc>", "<ipython-input-3-abc>", False),
        (f"{CWD}/pkg/model.py", "pkg/model.py", False),
        (f"{CWD}/scripts/run.py", "run.py", False),  # the script's directory is deeper
        ("/elsewhere/x.py", "/elsewhere/x.py", True),
        # torch.compile's generated code, even where the program runs in its directory
        (
            f"{CWD}/torchinductor_u/kp/ckpl.py",
            "torchinductor_u/kp/ckpl.py",
            True,
        ),
        ("/tmp/torchinductor_root/ab/cd.py", "torchinductor_root/ab/cd.py", True),
    ],
)
def test_short_path(path, shown, library):
    assert frames.short_path(path, [CWD, f"{CWD}/scripts"]) == (shown, library)


def test_roots_come_from_the_metadata():
    assert frames.roots(NEW_META) == [CWD, CWD]
    assert frames.roots({"working_directory": "rel", "script": 3}) == []
    assert frames.roots({}) == []


def test_unknown_mode_is_an_error(new_file):
    with pytest.raises(ValueError, match="folded, short, all"):
        frames.fold(viewer.load(new_file), "none")


def test_help_names_the_option_and_its_default(capsys):
    code, lines, _ = view(capsys, "--help")
    text = " ".join(" ".join(lines).split())
    assert code == 0
    assert "--frames {folded,short,all}" in text
    assert "'folded' (default)" in text and "'all' shows every frame" in text


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--frames", "all"],
        ["--frames", "short", "-m", "time/us,count/%"],
        ["-m", "avg_time/ns,time/%", "--print-sorted", "-d", "5"],
        ["-i", ".*model.py", "-m", "time/ns"],
        ["-e", "load", "-t", "100", "-m", "time/ns"],
        ["-f", "file_function", "-m", "time/ns"],
    ],
)
def test_cpp_and_python_paths_show_the_same(capsys, monkeypatch, new_file, argv):
    from proton.viewer import fast_report

    taken = []
    show = fast_report.show
    monkeypatch.setattr(fast_report, "show", lambda *a: taken.append(show(*a)) or taken[-1])
    fast = view(capsys, *argv, new_file)
    monkeypatch.setenv("PROTON_VIEWER_PYTHON", "1")
    python = view(capsys, *argv, new_file)
    assert taken == [True]  # the one-file report folded it
    assert fast == python
    assert fast[0] == 0


PROGRAM = """
import proton
import helper
proton.start("run", context="python")
helper.work()
proton.finalize()
"""
HELPER = """
import json
import proton


def work():
    json.loads("[1]", object_hook=lambda d: d)
    with proton.scope("inner", metrics={"y": 2}):
        pass
"""


@pytest.mark.parametrize("launcher", ["python", "proton"])
def test_profiles_record_where_the_program_ran(tmp_path, launcher):
    import subprocess
    import sys

    from proton_test_utils import PYTHON_DIR

    (tmp_path / "prog.py").write_text(PROGRAM)
    (tmp_path / "helper.py").write_text(HELPER)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    cmd = [sys.executable, "prog.py"]
    if launcher == "proton":
        cmd = [sys.executable, "-m", "proton", "-n", "run", "-c", "python", "prog.py"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "run.hatchet").read_text())
    metadata = document[0]["proton_metadata"]
    assert metadata["working_directory"] == str(tmp_path)
    assert metadata["script"] == str(tmp_path / "prog.py")
    profile = viewer.load(str(tmp_path / "run.hatchet"))
    inner = [i for i, name in enumerate(profile.names) if name == "inner"]
    assert len(inner) == 1
    shown = frames.fold(profile)
    path = shown.path(shown.names.index("inner"))
    assert path[1].startswith("prog.py:") and path[-2] == "helper.py:8@work"
    if launcher == "python":
        assert path[1] == "prog.py:5@<module>"
    hatchet = pytest.importorskip("hatchet")
    graph = hatchet.GraphFrame.from_literal([document[0]])
    assert "inner" in set(graph.dataframe["name"])
