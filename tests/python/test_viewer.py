"""proton-viewer on small golden profiles: every flag and derived metric against values
worked out by hand from tests/golden/viewer_*.hatchet.

viewer_kernels.hatchet (times in ns; the launch-metadata subtree is hidden):
    ROOT
    ├─ forward    cpu_time 5000, x 2.5 (x is exclusive)
    │  ├─ gemm    time 4e6, count 2, flops16 2e12, bytes 4e9, device 0
    │  └─ __proton_launch_metadata / meta_kernel  time 1000
    └─ backward   cpu_time 3000, x 1.5
       └─ gemm_bwd  time 1e6, count 1, flops8 5e11, bytes 1e9, device 0
"""

from pathlib import Path

import pytest
from proton import viewer
from viewer_test_utils import (
    KERNELS,
    KERNELS_MSGPACK,
    PYTHON_FRAMES,
    RANK0,
    RANK1,
    STATS_LINES,
    TRITON,
    view_lines,
)

NAMES = ["ROOT", "├─ forward", "│  └─ gemm", "└─ backward", "   └─ gemm_bwd"]

# H100 SXM as written in the golden device table: 132 SMs at 1.98 GHz, 5120-bit HBM at 2.619 GHz.
PEAK_FLOPS8 = 1513e12 * (132 / 114) * (1980000 / 1755000)
PEAK_BYTES = 2 * 5120 / 8 * 2619000e3


def column(capsys, metric, path=KERNELS):
    """The values printed in the first column for each tree line."""
    lines = view_lines(capsys, "-m", metric, path)
    return [line.split()[0] for line in lines[1 : 1 + len(NAMES)]]


def test_tree_with_several_metrics_renders_exact_lines(capsys):
    lines = view_lines(capsys, "-m", "time/ms,avg_time/us,tflop16/s,gflop8/s,gbyte/s", KERNELS)
    assert lines == [
        "time/ms  avg_time/us  tflop16/s    gflop8/s   gbyte/s  name",
        "  5.000     1666.667    400.000  100000.000  1000.000  ROOT",
        "  4.000     2000.000    500.000       0.000  1000.000  ├─ forward",
        "  4.000     2000.000    500.000       0.000  1000.000  │  └─ gemm",
        "  1.000     1000.000      0.000  500000.000  1000.000  └─ backward",
        "  1.000     1000.000      0.000  500000.000  1000.000     └─ gemm_bwd",
        *STATS_LINES,
    ]


@pytest.mark.parametrize(
    ("metric", "values"),
    [
        ("time/s", ["0.005", "0.004", "0.004", "0.001", "0.001"]),
        ("time/ms", ["5.000", "4.000", "4.000", "1.000", "1.000"]),
        ("time/us", ["5000.000", "4000.000", "4000.000", "1000.000", "1000.000"]),
        ("time/ns", ["5000000", "4000000", "4000000", "1000000", "1000000"]),
        ("avg_time/ms", ["1.667", "2.000", "2.000", "1.000", "1.000"]),
        (
            "avg_time/ns",
            ["1666666.667", "2000000.000", "2000000.000", "1000000.000", "1000000.000"],
        ),
        ("cpu_time/us", ["8.000", "5.000", "0.000", "3.000", "0.000"]),
        ("cpu_time/ns", ["8000", "5000", "0", "3000", "0"]),
        ("cpu_time/s", ["8.000e-06", "5.000e-06", "0.000", "3.000e-06", "0.000"]),
        ("avg_cpu_time/ns", ["2666.667", "2500.000", "0.000", "3000.000", "0.000"]),
        ("flop16/s", ["4.000e+14", "5.000e+14", "5.000e+14", "0.000", "0.000"]),
        ("gflop16/s", ["400000.000", "500000.000", "500000.000", "0.000", "0.000"]),
        ("tflop16/s", ["400.000", "500.000", "500.000", "0.000", "0.000"]),
        ("tflop8/s", ["100.000", "0.000", "0.000", "500.000", "500.000"]),
        ("byte/s", ["1.000e+12", "1.000e+12", "1.000e+12", "1.000e+12", "1.000e+12"]),
        ("gbyte/s", ["1000.000", "1000.000", "1000.000", "1000.000", "1000.000"]),
        ("tbyte/s", ["1.000", "1.000", "1.000", "1.000", "1.000"]),
        ("time/%", ["100.000", "80.000", "80.000", "20.000", "20.000"]),
        ("count/%", ["100.000", "66.667", "66.667", "33.333", "33.333"]),
        ("x/%", ["0.000", "62.500", "0.000", "37.500", "0.000"]),
        ("count", ["3", "2", "2", "1", "1"]),
        ("TIME", ["5000000", "4000000", "4000000", "1000000", "1000000"]),
        ("time (ns)", ["5000000", "4000000", "4000000", "1000000", "1000000"]),
        ("flops16", ["2000000000000", "2000000000000", "2000000000000", "0", "0"]),
        ("x", ["0.000", "2.500", "-", "1.500", "-"]),
    ],
)
def test_each_metric_has_the_hand_computed_value(capsys, metric, values):
    assert column(capsys, metric) == values


def test_util_is_the_larger_bound_over_time_on_kernels_only(capsys):
    gemm = max(2e12 * 2 / PEAK_FLOPS8, 4e9 / PEAK_BYTES) / 4e-3  # compute bound
    gemm_bwd = max(5e11 * 1 / PEAK_FLOPS8, 1e9 / PEAK_BYTES) / 1e-3  # memory bound
    assert 2e12 * 2 / PEAK_FLOPS8 > 4e9 / PEAK_BYTES
    assert 1e9 / PEAK_BYTES > 5e11 / PEAK_FLOPS8
    assert column(capsys, "util") == ["-", "-", f"{gemm:.3f}", "-", f"{gemm_bwd:.3f}"]
    assert (f"{gemm:.3f}", f"{gemm_bwd:.3f}") == ("0.506", "0.298")


def test_util_uses_the_peak_table_for_each_architecture():
    profile = viewer.load(KERNELS)
    profile.devices = {
        "CUDA": {
            "0": {
                "arch": "80",
                "num_sms": 108,
                "clock_rate": 1410000,
                "memory_clock_rate": 1215000,
                "bus_width": 5120,
            }
        }
    }
    util = viewer.derive(profile, "util").values
    assert util[2] == pytest.approx(max(4e12 / 624e12, 4e9 / (1280 * 1215000e3)) / 4e-3)
    profile.devices = {
        "CUDA": {
            "0": {
                "arch": "100",
                "num_sms": 148,
                "clock_rate": 1965000,
                "memory_clock_rate": 3996000,
                "bus_width": 8192,
            }
        }
    }
    util = viewer.derive(profile, "util").values
    peak = 148 * 16384 * 1965000e3
    assert util[2] == pytest.approx(max(4e12 / peak, 4e9 / (2048 * 3996000e3)) / 4e-3)
    profile = viewer.load(KERNELS)
    profile.devices = {"HIP": {"0": {"arch": "gfx942", "num_sms": 304, "clock_rate": 2100000}}}
    for row in profile.rows:
        if "device_type" in row:
            row["device_type"] = "HIP"
    util = viewer.derive(profile, "util").values
    peak = 4096 * 304 * 2100000e3
    assert util[2] == pytest.approx(max(4e12 / peak, 4e9 / 5.3e12) / 4e-3)


def test_list_shows_inclusive_exclusive_and_derivable_metrics(capsys):
    assert view_lines(capsys, "-l", KERNELS) == [
        "Available inclusive metrics:",
        "- time",
        "- count",
        "- flops16",
        "- flops8",
        "- bytes",
        "- cpu_time",
        "Available exclusive metrics:",
        "- x",
        "Available derived metrics:",
        "- time/s, time/ms, time/us, time/ns",
        "- avg_time/s, avg_time/ms, avg_time/us, avg_time/ns",
        "- cpu_time/s, cpu_time/ms, cpu_time/us, cpu_time/ns",
        "- avg_cpu_time/s, avg_cpu_time/ms, avg_cpu_time/us, avg_cpu_time/ns",
        "- flop8/s, gflop8/s, tflop8/s",
        "- flop16/s, gflop16/s, tflop16/s",
        "- byte/s, gbyte/s, tbyte/s",
        "- util",
        "- <metric>/% for any metric above",
    ]


def test_default_metric_is_time_in_seconds(capsys):
    assert view_lines(capsys, KERNELS)[:2] == ["time/s  name", " 0.005  ROOT"]


def test_include_keeps_paths_through_matching_frames_and_recounts(capsys):
    assert view_lines(capsys, "-m", "time/us", "-i", "gemm$", KERNELS)[:4] == [
        " time/us  name",
        "4000.000  ROOT",
        "4000.000  └─ forward",
        "4000.000     └─ gemm",
    ]
    # A match keeps its whole subtree; the pattern is matched at the start of the name.
    assert view_lines(capsys, "-m", "time/us", "-i", "back", KERNELS)[1:4] == [
        "1000.000  ROOT",
        "1000.000  └─ backward",
        "1000.000     └─ gemm_bwd",
    ]
    assert view_lines(capsys, "-m", "time/us", "-i", "ward", KERNELS)[1:2] == ["  0.000  ROOT"]


def test_exclude_drops_matching_frames_and_their_subtrees(capsys):
    assert view_lines(capsys, "-m", "time/us,x", "-e", "back.*", KERNELS)[:4] == [
        " time/us      x  name",
        "4000.000  0.000  ROOT",
        "4000.000  2.500  └─ forward",
        "4000.000      -     └─ gemm",
    ]


def test_include_and_exclude_combine(capsys):
    # backward stays, as an ancestor of an included frame, but its excluded child does not count.
    lines = view_lines(capsys, "-m", "time/us", "-i", ".*gemm", "-e", "gemm_bwd", KERNELS)
    assert lines[1:5] == [
        "4000.000  ROOT",
        "4000.000  ├─ forward",
        "4000.000  │  └─ gemm",
        "   0.000  └─ backward",
    ]


def test_threshold_hides_frames_below_it_on_the_first_metric(capsys):
    lines = view_lines(capsys, "-m", "time/ms,count", "-t", "2", KERNELS)
    assert lines[:4] == [
        "time/ms  count  name",
        "  5.000      3  ROOT",
        "  4.000      2  └─ forward",
        "  4.000      2     └─ gemm",
    ]
    assert view_lines(capsys, "-m", "time/ms", "-t", "4.0", KERNELS)[1:4] == [
        "  5.000  ROOT",
        "  4.000  └─ forward",
        "  4.000     └─ gemm",
    ]


def test_threshold_keeps_ancestors_of_frames_above_it(capsys):
    # gemm_bwd's rate is above 400; its parent's is equal, ROOT's is below: all shown.
    assert view_lines(capsys, "-m", "tflop8/s", "-t", "400", KERNELS)[1:4] == [
        " 100.000  ROOT",
        " 500.000  └─ backward",
        " 500.000     └─ gemm_bwd",
    ]


def test_depth_counts_root_as_level_zero(capsys):
    assert view_lines(capsys, "-d", "1", KERNELS)[:3] == ["time/s  name", " 0.005  ROOT", ""]
    assert view_lines(capsys, "-d", "2", "-m", "time/ms", KERNELS)[1:4] == [
        "  5.000  ROOT",
        "  4.000  ├─ forward",
        "  1.000  └─ backward",
    ]


def test_print_sorted_lists_frames_by_the_first_metric(capsys):
    lines = view_lines(capsys, "-m", "time/ms", "--print-sorted", "-d", "2", KERNELS)
    assert lines[4:11] == [
        "",
        "Sorted kernels by metric time/ms",
        "forward".ljust(105) + " 4.000",
        "gemm".ljust(105) + " 4.000",
        "backward".ljust(105) + " 1.000",
        "gemm_bwd".ljust(105) + " 1.000",
        "",
    ]
    assert view_lines(capsys, "-m", "time/ms", "--print_sorted", "-t", "2", KERNELS)[4:8] == [
        "",
        "Sorted kernels by metric time/ms",
        "forward".ljust(105) + " 4.000",
        "gemm".ljust(105) + " 4.000",
    ]


@pytest.mark.parametrize(
    ("name_format", "names"),
    [
        ("full", ["/home/u/train.py:10@main", "/home/u/model.py:42@forward"]),
        ("file_function_line", ["train.py:10@main", "model.py:42@forward"]),
        ("function_line", ["10@main", "42@forward"]),
        ("file_function", ["train.py@main", "model.py@forward"]),
    ],
)
def test_frame_name_formats(capsys, name_format, names):
    lines = view_lines(capsys, "-f", name_format, "-m", "time/us", PYTHON_FRAMES)
    assert lines == [
        "time/us  name",
        "  4.000  ROOT",
        f"  4.000  └─ {names[0]}",
        f"  3.000     ├─ {names[1]}",
        "  3.000     │  └─ gemm_kernel",
        f"  1.000     └─ {names[1].replace('42', '57').replace('forward', 'backward')}",
        "  1.000        └─ gemm_kernel",
    ]


def test_launch_metadata_frames_are_hidden_and_not_counted(capsys):
    lines = view_lines(capsys, "-m", "time/ns", KERNELS)
    assert not any("meta" in line for line in lines)
    assert lines[1] == "5000000  ROOT"
    profile = viewer.load(KERNELS)
    assert "__proton_launch_metadata" in profile.names
    assert profile.inclusive("time (ns)")[0] == 5_001_000
    assert "__proton_launch_metadata" not in viewer.hide_launch_metadata(profile).names


def test_stats_table_is_shown_only_when_a_counter_is_nonzero(capsys):
    assert view_lines(capsys, KERNELS)[-4:] == STATS_LINES
    lines = view_lines(capsys, RANK0)
    assert not any("stats" in line for line in lines)


def test_color_always_adds_ansi_codes_and_a_legend(capsys):
    lines = view_lines(capsys, "--color", "always", "-m", "time/ms", KERNELS)
    assert lines[1] == "\x1b[38;5;196m  5.000\x1b[0m  ROOT"
    assert lines[2] == "\x1b[38;5;208m  4.000\x1b[0m  ├─ forward"
    assert lines[4] == "\x1b[38;5;28m  1.000\x1b[0m  └─ backward"
    legend = lines[lines.index("Legend (time/ms: min 1.000, max 5.000)") :][:7]
    assert legend[1:] == [
        "\x1b[38;5;196m█\x1b[0m 4.600 - 5.000",
        "\x1b[38;5;208m█\x1b[0m 3.800 - 4.600",
        "\x1b[38;5;220m█\x1b[0m 3.000 - 3.800",
        "\x1b[38;5;118m█\x1b[0m 2.200 - 3.000",
        "\x1b[38;5;40m█\x1b[0m 1.400 - 2.200",
        "\x1b[38;5;28m█\x1b[0m 1.000 - 1.400",
    ]


def test_output_is_plain_when_not_a_terminal(capsys):
    for argv in (["--color", "never"], [], ["--color", "auto"]):
        lines = view_lines(capsys, *argv, KERNELS)
        assert not any("\x1b" in line or "Legend" in line for line in lines)


def test_tritons_own_files_load_and_render(capsys):
    assert view_lines(capsys, "-m", "time/ns,count,tflop16/s", TRITON) == [
        "time/ns  count  tflop16/s  name",
        "  10000      5    400.000  ROOT",
        "   8000      4    500.000  ├─ matmul",
        "   8000      4    500.000  │  └─ matmul_kernel",
        "   2000      1      0.000  └─ softmax_kernel",
    ]


def test_msgpack_part_file_loads_the_same_as_json(capsys):
    assert view_lines(capsys, "-m", "time/ms,x", KERNELS_MSGPACK) == view_lines(
        capsys, "-m", "time/ms,x", KERNELS
    )


def test_fast_and_general_json_readers_agree(tmp_path):
    import json

    fast = viewer.load(KERNELS)
    with open(KERNELS) as f:
        document = json.load(f)
    (tmp_path / "indented.hatchet").write_text(json.dumps(document, indent=1))
    general = viewer.load(tmp_path / "indented.hatchet")
    assert (general.names, general.parents, general.rows) == (fast.names, fast.parents, fast.rows)
    assert general.metadata == fast.metadata
    assert general.devices == fast.devices
    # A name containing an escaped quote or JSON-looking text takes the general path.
    document[0]["children"][0]["frame"]["name"] = 'odd "name" ]},"children":['
    (tmp_path / "odd.hatchet").write_text(json.dumps(document, separators=(",", ":")))
    odd = viewer.load(tmp_path / "odd.hatchet")
    assert odd.names[1] == 'odd "name" ]},"children":['
    assert odd.names == [fast.names[0], odd.names[1], *fast.names[2:]]


# ---------------------------------------------------------------------- several files


@pytest.mark.parametrize(
    ("how", "values"),
    [
        ("sum", ["12.000", "8.000", "4.000", "4.000", "4.000"]),
        ("mean", ["6.000", "4.000", "2.000", "2.000", "2.000"]),
        ("min", ["4.000", "4.000", "1.000", "1.000", "0"]),
        ("max", ["8.000", "4.000", "3.000", "3.000", "4.000"]),
    ],
)
def test_merge_combines_files_node_by_node_with_imbalance(capsys, how, values):
    lines = view_lines(capsys, "--merge", how, "-m", "time/us", RANK0, RANK1)
    assert lines[0].split() == ["time/us", f"({how})", "imbalance", "name"]
    assert [line.split()[0] for line in lines[1:]] == values
    # imbalance = max / mean of the first metric across files (allreduce only on rank 1)
    assert [line.split()[1] for line in lines[1:]] == ["1.333", "1.000", "1.500", "1.500", "2.000"]
    assert [line.split(maxsplit=2)[2] for line in lines[1:]] == [
        "ROOT",
        "├─ step",
        "│  ├─ fwd",
        "│  └─ bwd",
        "└─ allreduce",
    ]


def test_merge_of_rates_ignores_files_without_the_node(capsys):
    lines = view_lines(capsys, "--merge", "min", "-m", "avg_time/us", RANK0, RANK1)
    assert [line.split()[0] for line in lines[1:]] == ["2.000", "2.000", "1.000", "1.000", "4.000"]


def test_diff_profile_is_file_minus_base(capsys):
    assert view_lines(capsys, "-m", "time/us,count", "--diff-profile", RANK0, RANK1) == [
        "time/us diff  count diff  name",
        "       4.000           1  ROOT",
        "       0.000           0  ├─ step",
        "      -2.000           0  │  ├─ fwd",
        "       2.000           0  │  └─ bwd",
        "       4.000           1  └─ allreduce",
    ]
    assert view_lines(capsys, "-m", "time/us", "-diff", RANK1, RANK0)[1].split()[0] == "-4.000"


# ---------------------------------------------------------------------- Python API


def test_python_api_gives_plain_objects():
    profile = viewer.load(KERNELS)
    root = profile.root
    assert [c.name for c in root.children] == ["forward", "backward"]
    gemm = profile.find("forward", "gemm")
    assert gemm.metrics["time (ns)"] == 4_000_000
    assert gemm.path == ["ROOT", "forward", "gemm"]
    assert gemm.parent.name == "forward"
    assert root.inclusive("count") == 4  # the launch-metadata kernel counts until hidden
    assert profile.stats == {"activity_records_dropped": 2, "correlations_unmatched": 0}
    assert profile.exclusive_metrics == {"x"}
    assert viewer.derive(viewer.hide_launch_metadata(profile), "time/ms").values[0] == 5.0


def test_to_dataframe_has_exclusive_and_inclusive_columns():
    pytest.importorskip("pandas")
    df = viewer.load(KERNELS).to_dataframe(["time (ns)"])
    row = df[df["name"] == "forward"].iloc[0]
    assert row["path"] == "ROOT/forward"
    assert row["depth"] == 1
    assert row["time (ns) (inc)"] == 4_001_000
    assert df.loc[0, "time (ns) (inc)"] == 5_001_000
    assert set(df.columns) >= {"parent", "name", "device_id", "device_type"}


def test_to_dataframe_without_pandas_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"\[PROTON\].*pip install pandas"):
        viewer.load(KERNELS).to_dataframe()


def test_pure_python_msgpack_decoder_matches_the_msgpack_package():
    from proton.viewer.msgpack import MessagePackError, unpackb

    msgpack = pytest.importorskip("msgpack")
    blob = Path(KERNELS_MSGPACK).read_bytes()
    assert unpackb(blob) == msgpack.unpackb(blob, raw=False, strict_map_key=False)
    values = [
        None,
        True,
        False,
        -1,
        -33,
        2**63 - 1,
        -(2**63),
        0.5,
        "é" * 40,
        b"\x00" * 300,
        list(range(20)),
        {1: "a", "k": [1.5]},
        "x" * 70000,
    ]
    assert unpackb(msgpack.packb(values, use_bin_type=True)) == values
    with pytest.raises(MessagePackError, match="truncated"):
        unpackb(blob[:-3])


def _cycles_profile(path, metadata):
    """An instrumentation tree: a kernel whose own scope measured 1000 cycles, 300 of them in
    "load", 90 of those in "load/wait" (cycles are exclusive: each node's is its own scope's)."""
    import json

    def node(name, metrics, children=()):
        return {"frame": {"name": name, "type": "function"}, "metrics": metrics,
                "children": list(children)}  # fmt: skip

    wait = node("wait", {"cycles": 90, "normalized_cycles": 22.5, "count": 3})
    load = node("load", {"cycles": 300, "normalized_cycles": 75.0, "count": 4}, [wait])
    kernel = node(
        "kern", {"cycles": 1000, "normalized_cycles": 250.0, "count": 1, "time (ns)": 600}, [load]
    )
    root = {
        **node(
            "ROOT", {"cycles": 0, "normalized_cycles": 0.0, "count": 0, "time (ns)": 0}, [kernel]
        ),
        **metadata,
    }
    path.write_text(json.dumps([root, {}]))
    return path


@pytest.mark.parametrize(
    "metadata",
    [
        {},  # as triton.profiler writes it: no aggregation hints
        {"proton_metadata": {"metric_aggregation": {"exclusive": ["cycles", "normalized_cycles"]}}},
    ],
    ids=["triton", "proton"],
)
def test_cycles_are_each_nodes_own_not_summed_into_parents(capsys, tmp_path, metadata):
    path = _cycles_profile(tmp_path / "cyc.hatchet", metadata)
    lines = view_lines(capsys, "-m", "normalized_cycles,cycles,count", str(path))
    assert lines[:5] == [
        "normalized_cycles  cycles  count  name",
        "            0.000       0      8  ROOT",
        "          250.000    1000      8  └─ kern",
        "           75.000     300      7     └─ load",
        "           22.500      90      3        └─ wait",
    ]
    profile = viewer.Profile.load(path)
    assert profile.inclusive("cycles") == [0, 1000, 300, 90]
    assert profile.inclusive("count") == [8, 8, 7, 3]


def test_avg_time_divides_by_launches_not_by_the_runs_of_a_kernels_scopes(capsys, tmp_path):
    # The kernel ran once (count 1, 600 ns); its scopes ran 7 times in all, which are not
    # launches. avg_cpu_time keeps Triton's reading (every count below the node).
    path = _cycles_profile(tmp_path / "cyc.hatchet", {})
    lines = view_lines(capsys, "-m", "avg_time/ns,count", str(path))
    assert lines[:5] == [
        "avg_time/ns  count  name",
        "    600.000      8  ROOT",
        "    600.000      8  └─ kern",
        "          -      7     └─ load",
        "          -      3        └─ wait",
    ]
    profile = viewer.Profile.load(path)
    assert viewer.derive(profile, "avg_time/ns").values[:3] == [600.0, 600.0, None]
