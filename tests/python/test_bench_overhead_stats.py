"""bench/overhead.py's statistics, on synthetic rounds (no GPU): the bootstrap interval of the
median, the +-% it reports, and the table that decides whether more rounds are needed."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "overhead.py"
_spec = importlib.util.spec_from_file_location("bench_overhead", _PATH)
overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overhead)


def test_interval_brackets_the_median_and_is_reproducible():
    values = [1.02, 1.05, 1.01, 1.08, 1.03, 1.04, 1.06]
    lo, hi = overhead.bootstrap_ci(values)
    assert lo <= 1.04 <= hi
    assert min(values) <= lo and hi <= max(values)
    assert overhead.bootstrap_ci(values) == (lo, hi)


def test_identical_rounds_give_a_zero_width_interval():
    assert overhead.bootstrap_ci([1.1] * 5) == (1.1, 1.1)
    assert overhead.relative_half_width([1.1] * 5) == 0
    assert overhead.bootstrap_ci([1.2]) == (1.2, 1.2)


def test_more_rounds_of_the_same_spread_narrow_the_interval():
    few = [1.00, 1.04, 1.02, 1.06, 1.01]
    many = few * 8
    assert overhead.relative_half_width(many) < overhead.relative_half_width(few)


def test_no_values_is_an_error():
    with pytest.raises(ValueError):
        overhead.bootstrap_ci([])


def _round(config, ratio, ev_ratio=None):
    result = {
        "ratio": ratio,
        "finalize_s": 0.1,
        "profile_bytes": 10,
        "cupti": ["/x/libcupti.so.12"],
    }
    if ev_ratio is not None:
        result["ev_ratio"] = ev_ratio
    return {"config": config, "results": {"matmul": result}}


def test_table_reports_wall_and_event_intervals_and_the_widest_decides():
    rounds = [_round("a", 1.01, 1.001), _round("a", 1.03, 1.002), _round("a", 1.02, 1.003)]
    rounds += [_round("b", 1.10), _round("b", 1.30), _round("b", 1.20)]
    table = overhead.build_table(rounds, ["a", "b"], ["matmul"])
    a, b = table["a/matmul"], table["b/matmul"]
    assert a["wall"]["median"] == 1.02 and a["wall"]["n"] == 3
    assert a["events"]["median"] == 1.002
    assert b["events"] is None
    assert a["cupti"] == ["/x/libcupti.so.12"]
    assert overhead.widest_interval(table, ["matmul"]) == b["wall"]["ci_rel"]
    assert b["wall"]["ci_rel"] > 0.05


def test_errors_are_kept_when_no_round_succeeded():
    rounds = [{"config": "t", "results": {"matmul": {"error": "ImportError: triton"}}}]
    table = overhead.build_table(rounds, ["t"], ["matmul"])
    assert table["t/matmul"]["wall"] is None
    assert table["t/matmul"]["error"] == "ImportError: triton"


def test_cupti_labels_set_the_library_for_that_config_only():
    base, env = overhead.split_config("proton_shadow[12]", {"12": "/lib12", "13": "/lib13"})
    assert base == "proton_shadow" and env["PROTON_CUPTI_LIB_PATH"] == "/lib12"
    base, env = overhead.split_config("torch_profiler", {"12": "/lib12"})
    assert base == "torch_profiler"


def test_each_profiled_cycle_is_compared_with_the_unprofiled_phases_on_either_side():
    # The machine slows down between cycles: each ratio uses its own neighbours only.
    unprofiled = [10.0, 12.0, 20.0, 19.0]
    profiled = [11.0, 24.0, 20.9]
    assert overhead.cycle_ratios(profiled, unprofiled) == pytest.approx([1.1, 2.0, 1.1])
    with pytest.raises(ValueError):
        overhead.cycle_ratios(profiled, unprofiled[:3])
