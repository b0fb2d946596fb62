"""bench/accuracy.py's comparison of Proton's kernel times with torch.profiler's, on synthetic
profiles (no GPU): what each file holds per kernel name, and the table built from both."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "accuracy.py"
_spec = importlib.util.spec_from_file_location("bench_accuracy", _PATH)
accuracy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accuracy)


def node(name, children=(), **metrics):
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics,
        "children": list(children),
    }


def test_hatchet_kernels_are_summed_by_name_across_contexts():
    root = node(
        "ROOT",
        [
            node("fwd", [node("gemm", **{"time (ns)": 300, "count": 2})]),
            node(
                "bwd",
                [
                    node("gemm", **{"time (ns)": 500, "count": 3}),
                    node("add", **{"time (ns)": 7, "count": 1}),
                ],
            ),
        ],
        **{"time (ns)": 0, "count": 0},  # the root carries every metric key with 0
    )
    assert accuracy.kernels_from_hatchet(root) == {
        "gemm": {"count": 5, "ns": 800},
        "add": {"count": 1, "ns": 7},
    }


def test_chrome_trace_kernels_are_the_kernel_slices_in_ns():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 1.5},
            {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 2.25},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 4.0},
            {"ph": "f", "cat": "ac2g", "name": "gemm"},
        ]
    }
    assert accuracy.kernels_from_chrome_trace(trace) == {"gemm": {"count": 2, "ns": 3750}}


def test_comparison_orders_by_torchs_time_and_flags_count_mismatches():
    ours = {"gemm": {"count": 2, "ns": 3800}, "add": {"count": 1, "ns": 100}}
    theirs = {
        "gemm": {"count": 2, "ns": 4000},
        "add": {"count": 2, "ns": 200},
        "copy": {"count": 1, "ns": 50},
    }
    r = accuracy.compare(ours, theirs)
    assert [k["name"] for k in r["kernels"]] == ["gemm", "add", "copy"]
    assert r["kernels"][0]["rel"] == pytest.approx(-0.05)
    assert r["kernels"][2] == {
        "name": "copy",
        "count": 0,
        "count_torch": 1,
        "ns": 0,
        "ns_torch": 50,
        "rel": -1.0,
    }
    assert r["counts_equal"] is False
    assert (r["ns"], r["ns_torch"]) == (3900, 4250)
    assert r["rel"] == pytest.approx(3900 / 4250 - 1)
    assert accuracy.compare(ours, ours)["counts_equal"] is True


def test_linear_fit_recovers_a_line_and_scores_it():
    slope, r2 = accuracy.linear_fit(
        [64, 128, 256, 512, 1024], [4 * n + 30 for n in (64, 128, 256, 512, 1024)]
    )
    assert slope == pytest.approx(4)
    assert r2 == pytest.approx(1)
    _slope, r2 = accuracy.linear_fit([1, 2, 3, 4, 5], [1, 5, 2, 4, 3])
    assert r2 == pytest.approx(0.09)
