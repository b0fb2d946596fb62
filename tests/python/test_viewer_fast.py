"""The one-file report (fast_report.py) gives byte for byte the output of main's path over
Profiles (both compute with the one C++ model), and hands over, having written nothing,
where only main's path can (util)."""

import json

import pytest
from proton.viewer import fast_report
from viewer_test_utils import (
    KERNELS,
    KERNELS_MSGPACK,
    PYTHON_FRAMES,
    RANK0,
    TRITON,
    view,
)

CASES = [
    (KERNELS, []),
    (KERNELS, ["-m", "time/ms,avg_time/us,tflop16/s,gflop8/s,gbyte/s"]),
    (KERNELS, ["-m", "time/%,count/%,count,cpu_time/us,avg_cpu_time/ns,flop16/s,byte/s,x"]),
    (KERNELS, ["-m", "time/ns,tbyte/s", "--print-sorted", "-d", "2"]),
    (KERNELS, ["-m", "time/ms", "--color", "always"]),
    (KERNELS, ["-m", "tflop8/s", "-t", "400", "--color", "always", "--print-sorted"]),
    (KERNELS, ["-m", "time/us", "-i", "gemm$"]),
    (KERNELS, ["-m", "time/us,x", "-e", "back.*"]),
    (KERNELS, ["-i", ".*gemm", "-e", "gemm_bwd", "-m", "time/us,count"]),
    (KERNELS, ["-m", "time/ms,count", "-t", "2"]),
    (KERNELS, ["-d", "1"]),
    (KERNELS, ["-d", "-3", "--print-sorted"]),
    (KERNELS_MSGPACK, ["-m", "time/ms,x"]),
    (PYTHON_FRAMES, ["-f", "file_function", "-m", "time/us", "--print-sorted", "--frames", "all"]),
    (PYTHON_FRAMES, ["-f", "function_line", "-m", "time/us", "--frames", "all"]),
    (PYTHON_FRAMES, ["-m", "time/us,count/%", "--print-sorted"]),  # frames folded
    (PYTHON_FRAMES, ["--frames", "short", "-f", "file_function_line", "-i", ".*model"]),
    (TRITON, ["-m", "time/ns,count,tflop16/s", "--color", "always"]),
    (RANK0, ["-m", "time/us", "-t", "1e9"]),
]


def both_paths(capsys, monkeypatch, *argv):
    """(fast output, whether the C++ path took it, Python output) of one command."""
    taken = []
    show = fast_report.show

    def recording_show(*args, **kwargs):
        taken.append(show(*args, **kwargs))
        return taken[-1]

    monkeypatch.setattr(fast_report, "show", recording_show)
    fast = view(capsys, *argv)
    monkeypatch.setenv("PROTON_VIEWER_PYTHON", "1")
    python = view(capsys, *argv)
    monkeypatch.delenv("PROTON_VIEWER_PYTHON")
    return fast, taken == [True], python


@pytest.mark.parametrize(("path", "argv"), CASES)
def test_cpp_report_equals_python_report(capsys, monkeypatch, path, argv):
    fast, taken, python = both_paths(capsys, monkeypatch, *argv, path)
    assert taken
    assert fast == python
    assert fast[0] == 0


def test_profile_without_metrics_lists_names(capsys, monkeypatch, tmp_path):
    path = tmp_path / "names.hatchet"
    root = {
        "frame": {"name": "ROOT", "type": "function"},
        "metrics": {},
        "children": [{"frame": {"name": "a", "type": "function"}, "metrics": {}, "children": []}],
    }
    path.write_text(json.dumps([root, {}]))
    fast, taken, python = both_paths(capsys, monkeypatch, "--print-sorted", str(path))
    assert taken
    assert fast == python
    assert fast[1][:3] == ["   name", "-  ROOT", "-  └─ a"]


def write_tree(path, kernels):
    """ROOT with one child per (name, metrics) pair, as Proton writes it."""
    children = [
        {"frame": {"name": n, "type": "function"}, "metrics": m, "children": []} for n, m in kernels
    ]
    root = {"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": children}
    path.write_text(json.dumps([root, {}], separators=(",", ":")))
    return str(path)


@pytest.mark.parametrize(
    ("metrics", "spec", "root"),
    [
        # An integer sum beyond int64 becomes a float (py_number.h), on both paths.
        (
            [{"time (ns)": 2**62}, {"time (ns)": 2**62}, {"time (ns)": 2**62}],
            "time/ns",
            "1.384e+19",
        ),
        # An integer division beyond 2^53: a float division.
        ([{"time (ns)": 2**60 + 1}, {"time (ns)": 3}], "time/s", "1.153e+09"),
        # Percent of an exclusive float metric: of the sum of its values.
        ([{"x(exc)": 0.1}, {"x(exc)": 0.2}], "x(exc)/%", "0.000"),
    ],
)
def test_beyond_int64_both_paths_compute_in_floats(
    capsys, monkeypatch, tmp_path, metrics, spec, root
):
    path = write_tree(tmp_path / "big.hatchet", [(f"k{i}", m) for i, m in enumerate(metrics)])
    fast, taken, python = both_paths(capsys, monkeypatch, "-m", spec, path)
    assert taken
    assert fast == python
    assert fast[1][1].split() == [root, "ROOT"]


def test_util_is_left_to_mains_path(capsys, monkeypatch, tmp_path):
    path = write_tree(tmp_path / "util.hatchet", [("k", {"time (ns)": 5, "device_id": "0"})])
    fast, taken, python = both_paths(capsys, monkeypatch, "-m", "util", path)
    assert not taken
    assert fast == python


def test_values_near_rounding_ties_format_like_python(capsys, monkeypatch, tmp_path):
    values = [0.0005 + k * 0.001 for k in range(200)] + [1.0005, 2.0015, 123456.7895, 0.1235]
    values += [v * 1e6 + 0.5 for v in range(50)] + [-2.5e-3, 999999999.9995, 1e9 - 1e-4]
    path = write_tree(
        tmp_path / "ties.hatchet", [(f"k{i}", {"v": v, "n": 3}) for i, v in enumerate(values)]
    )
    fast, taken, python = both_paths(capsys, monkeypatch, "-m", "v,v/%,n", "--print-sorted", path)
    assert taken
    assert fast == python


def test_writes_to_the_stdout_descriptor_when_it_is_a_file(capfd, monkeypatch):
    from proton.viewer.main import main

    assert fast_report._stdout_fd() >= 0  # capfd's stdout is a real file
    outputs = []
    for env in ("0", "1"):
        monkeypatch.setenv("PROTON_VIEWER_PYTHON", env)
        with pytest.raises(SystemExit):
            main(["-m", "time/ms", KERNELS])
        outputs.append(capfd.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0].splitlines()[1:3] == ["  5.000  ROOT", "  4.000  ├─ forward"]
