"""triton.profiler.viewer's functions in proton.viewer, on llnl-hatchet GraphFrames: the same
signatures, metric column names and values (checked against Proton's own viewer on the same
files), frame filters and formats, and an ImportError naming llnl-hatchet without it.
CI installs llnl-hatchet (.ci/run), so none of this is skipped there."""

import json
import math
import sys

import hatchet  # noqa: F401 (a test dependency: pip install llnl-hatchet; never skipped)
import pytest
from proton import viewer
from proton.viewer import derive, hide_launch_metadata, load
from viewer_test_utils import KERNELS, PYTHON_FRAMES, RANK0, RANK1


def by_path(gf, column):
    """{names from ROOT: value} of a GraphFrame column."""
    out = {}
    for node in gf.graph.traverse():
        path = tuple(n.frame["name"] for n in node.path())
        out[path] = gf.dataframe.loc[node, column]
    return out


def proton_by_path(path, spec):
    """{names from ROOT: value} of Proton's own derived metric on the same file."""
    profile = hide_launch_metadata(load(path))
    values = derive(profile, spec).values
    paths = []
    for i, name in enumerate(profile.names):
        parent = profile.parents[i]
        paths.append((*paths[parent], name) if parent >= 0 else (name,))
    return dict(zip(paths, values))


def close(theirs, ours):
    """Equal values; hatchet's NaN (a frame without the metric) is Proton's 0 or no value."""
    if isinstance(theirs, float) and math.isnan(theirs):
        return ours is None or ours == 0 or (isinstance(ours, float) and math.isnan(ours))
    return ours is not None and math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12)


def test_read_gives_metric_lists_and_devices_without_launch_metadata_frames():
    gf, inclusive, exclusive, devices = viewer.read(KERNELS)
    assert inclusive == ["time (ns)", "count", "flops16", "flops8", "bytes", "cpu_time (ns)", "x"]
    assert exclusive == ["name", "device_id", "device_type"]
    assert devices["CUDA"]["0"]["arch"] == "90"
    assert "__proton_launch_metadata" not in set(gf.dataframe["name"])
    assert "time (ns) (inc)" in gf.dataframe.columns  # read() computed inclusive columns


def test_get_raw_metrics_takes_an_open_file():
    with open(KERNELS) as f:
        gf, inclusive, exclusive, devices = viewer.get_raw_metrics(f)
    assert "time (ns) (inc)" not in gf.dataframe.columns
    assert inclusive[0] == "time (ns)" and devices


@pytest.mark.parametrize(
    ("spec", "column"),
    [
        ("time/ms", "time/ms (inc)"),
        ("avg_time/us", "avg_time/us (inc)"),
        ("cpu_time/us", "cpu_time/us (inc)"),
        ("tflop16/s", "tflop16/s (inc)"),
        ("gbyte/s", "gbyte/s (inc)"),
        ("time/%", "time/% (inc)"),
        ("count", "count (inc)"),
        ("util", "util"),
    ],
)
def test_derived_columns_equal_protons_own_viewer(spec, column):
    gf, names = viewer.parse([spec], KERNELS)
    assert names == [column]
    ours = proton_by_path(KERNELS, spec)
    theirs = by_path(gf, column)
    assert theirs and set(theirs) <= set(ours)
    mismatched = {p: (v, ours[p]) for p, v in theirs.items() if not close(v, ours[p])}
    assert mismatched == {}


def test_derive_metrics_records_inclusive_and_exclusive_columns():
    gf, inclusive, exclusive, devices = viewer.read(KERNELS)
    names = viewer.derive_metrics(gf, ["time/s", "util", "count/%"], inclusive, exclusive, devices)
    assert names == ["time/s (inc)", "util", "count/% (inc)"]
    assert "time/s (inc)" in gf.inc_metrics and "util" in gf.exc_metrics


def test_unknown_metric_and_unit_raise_as_triton_does():
    gf, inclusive, exclusive, devices = viewer.read(KERNELS)
    with pytest.raises(RuntimeError, match="Metric nope is not found"):
        viewer.derive_metrics(gf, ["nope"], inclusive, exclusive, devices)
    with pytest.raises(ValueError, match="Unsupported unit km"):
        viewer.derive_metrics(gf, ["time/km"], inclusive, exclusive, devices)


def test_min_times_use_the_device_peaks():
    gf, *_, devices = viewer.read(KERNELS)
    df = gf.dataframe
    device = devices["CUDA"]["0"]
    peak8 = 1513e12 * device["num_sms"] / 114 * device["clock_rate"] / 1755000
    bandwidth = 2 * device["bus_width"] / 8 * device["memory_clock_rate"] * 1e3
    flops = viewer.get_min_time_flops(df, devices)["min_time"]
    memory = viewer.get_min_time_bytes(df, devices)["min_time"]
    gemm = df.index[df["name"] == "gemm"][0]
    assert math.isclose(flops[gemm], df.loc[gemm, "flops16"] / (peak8 / 2))
    assert math.isclose(memory[gemm], df.loc[gemm, "bytes"] / bandwidth)
    root = df.index[df["name"] == "ROOT"][0]
    assert flops[root] == 0.0  # not a kernel frame


def frame_names(gf):
    return sorted(gf.dataframe["name"])


def test_filters_keep_paths_through_include_and_drop_exclude_subtrees():
    everything = frame_names(viewer.parse(["time/ms"], KERNELS)[0])
    assert everything == ["ROOT", "backward", "forward", "gemm", "gemm_bwd"]
    included, _ = viewer.parse(["time/ms"], KERNELS, include="gemm_bwd")
    assert frame_names(included) == ["ROOT", "backward", "gemm_bwd"]
    excluded, _ = viewer.parse(["time/ms"], KERNELS, exclude="forward")
    assert frame_names(excluded) == ["ROOT", "backward", "gemm_bwd"]


def test_threshold_applies_to_the_first_metric():
    gf, names = viewer.parse(["time/ms", "count"], KERNELS, threshold=3.5)
    assert names == ["time/ms (inc)", "count (inc)"]
    assert frame_names(gf) == ["ROOT", "forward", "gemm"]


@pytest.mark.parametrize(
    ("fmt", "expect"),
    [
        ("file_function_line", lambda n: n.split("/")[-1]),
        ("function_line", lambda n: n.split(":")[-1]),
        ("file_function", lambda n: f"{n.split('/')[-1].split(':')[0]}@{n.split('@')[-1]}"),
        ("full", lambda n: n),
    ],
)
def test_format_frames_rewrites_names(fmt, expect):
    before = list(viewer.read(PYTHON_FRAMES)[0].dataframe["name"])
    gf = viewer.format_frames(viewer.read(PYTHON_FRAMES)[0], fmt)
    assert list(gf.dataframe["name"]) == [expect(n) for n in before]


def test_apply_diff_profile_subtracts_the_other_file():
    gf, names = viewer.parse(["time/ms"], RANK0)
    diff = viewer.apply_diff_profile(gf, names, RANK1, ["time/ms"], None, None, None)
    a = by_path(viewer.parse(["time/ms"], RANK0)[0], names[0])
    b = by_path(viewer.parse(["time/ms"], RANK1)[0], names[0])
    got = by_path(diff, names[0])
    common = set(a) & set(b) & set(got)
    assert common
    assert all(math.isclose(got[p], a[p] - b[p], abs_tol=1e-12) for p in common)


@pytest.mark.parametrize("base", [RANK1, KERNELS])
def test_apply_diff_profile_is_hatchets_sub_with_the_base_only_nodes_negative(base):
    # Proton subtracts itself (hatchet's Cython row insertion raises on read-only arrays under
    # newer pandas): GraphFrame.sub's values on the nodes of the profile, and on a node only
    # the base has, minus its value (hatchet leaves NaN there: the node is gone, not unknown).
    gf, names = viewer.parse(["time/ms"], RANK0)
    ours = by_path(
        viewer.apply_diff_profile(gf, names, base, ["time/ms"], None, None, None), names[0]
    )
    a, _ = viewer.parse(["time/ms"], RANK0)
    b, _ = viewer.parse(["time/ms"], base)
    for frame in (a, b):
        frame.inc_metrics = [m for m in names if m.endswith("(inc)")]
        frame.exc_metrics = [m for m in names if not m.endswith("(inc)")]
    theirs = by_path(a.sub(b), names[0])
    mine, base_values = by_path(a, names[0]), by_path(b, names[0])
    assert set(ours) == set(theirs) == set(mine) | set(base_values)
    assert set(base_values) - set(mine)  # both bases have nodes the profile lacks
    for path, value in theirs.items():
        if path in mine:
            assert (math.isnan(value) and math.isnan(ours[path])) or math.isclose(
                ours[path], value, abs_tol=1e-12
            ), path
        else:
            assert math.isclose(ours[path], -base_values[path], abs_tol=1e-12), path


def test_without_hatchet_calls_raise_import_error_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "hatchet", None)  # import hatchet raises ImportError
    for call in (
        lambda: viewer.read(KERNELS),
        lambda: viewer.parse(["time/ms"], KERNELS),
        lambda: viewer.get_min_time_flops(None, {}),
        lambda: viewer.filter_frames(None, include="x"),
    ):
        with pytest.raises(ImportError, match="llnl-hatchet"):
            call()


def test_get_raw_metrics_reads_in_memory_data_as_it_reads_the_file(tmp_path):
    import proton

    s = proton.start(str(tmp_path / "mem"))
    with proton.scope("step", {"bytes": 8, "flops": 2.5}):
        with proton.scope("inner", {"bytes": 4}):
            pass
    in_memory = proton.data.get(s)
    as_given = json.dumps(in_memory, sort_keys=True)
    packed = proton.data.get_msgpack(s)
    proton.finalize(s)
    from_file = viewer.get_raw_metrics(str(tmp_path / "mem.hatchet"))
    for source in (in_memory, packed):
        gf, inclusive, exclusive, devices = viewer.get_raw_metrics(source)
        assert (inclusive, exclusive, devices) == from_file[1:]
        assert by_path(gf, "bytes") == {
            ("ROOT",): 0,
            ("ROOT", "step"): 8,
            ("ROOT", "step", "inner"): 4,
        }
    assert json.dumps(in_memory, sort_keys=True) == as_given  # the caller's data is unchanged
    with pytest.raises(ValueError, match=r"must be \[root, devices, \.\.\.\]"):
        viewer.get_raw_metrics([{"no": "frame"}])
