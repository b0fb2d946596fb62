"""bench/intra_kernel.py's table, on synthetic rounds (no GPU): each kernel's median ratios,
the geometric mean over the set, and the bootstrap interval of the rounds' geometric means."""

import importlib.util
import math
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def intra(monkeypatch):
    monkeypatch.syspath_prepend(str(_BENCH))  # it takes overhead.py's bootstrap
    spec = importlib.util.spec_from_file_location("bench_intra_kernel", _BENCH / "intra_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def round_of(vadd, softmax, matmul, attention, wall=1.5):
    ratios = {"vadd": vadd, "softmax": softmax, "matmul": matmul, "attention": attention}
    return {
        k: {"kernel_ratio": v, "wall_ratio": wall, "profile_bytes": 100, "finalize_s": 0.1}
        for k, v in ratios.items()
    }


def test_each_round_s_geometric_mean_gets_a_median_and_an_interval(intra):
    rounds = [
        round_of(1.08, 1.07, 1.00, 1.14),
        round_of(1.10, 1.06, 1.01, 1.15),
        round_of(1.06, 1.08, 0.99, 1.13),
    ]
    table = intra.summarize_rounds({"proton": rounds, "cupti": []})
    assert list(table) == ["proton"]  # a configuration that never ran has no row
    row = table["proton"]
    vadd = row["kernels"]["vadd"]
    assert vadd["kernel_ratio"] == 1.08 and vadd["kernel_ratio_range"] == [1.06, 1.10]
    lo, hi = vadd["kernel_ratio_ci"]
    assert 1.06 <= lo <= 1.08 <= hi <= 1.10
    assert vadd["wall_ratio"] == 1.5
    # attention_mh was not run: its cells are NaN and the set's mean does not need it.
    assert math.isnan(row["kernels"]["attention_mh"]["kernel_ratio"])
    assert row["kernel_geomean_of_medians"] == pytest.approx((1.08 * 1.07 * 1.00 * 1.14) ** 0.25)
    expected = [(1.08 * 1.07 * 1.00 * 1.14) ** 0.25, (1.10 * 1.06 * 1.01 * 1.15) ** 0.25,
                (1.06 * 1.08 * 0.99 * 1.13) ** 0.25]  # fmt: skip
    assert row["kernel_geomean_rounds"] == pytest.approx(expected)
    per_round = sorted(row["kernel_geomean_rounds"])
    lo, hi = row["kernel_geomean_ci"]
    assert per_round[0] <= lo <= per_round[1] <= hi <= per_round[2] and lo < hi
    assert row["kernel_geomean"] == per_round[1]  # the figure the interval is of


def test_the_printed_mean_is_the_median_of_the_rounds_means_not_the_mean_of_medians(intra):
    # Each kernel's median comes from another round: the two statistics part, and the
    # interval belongs to the rounds' means.
    rounds = [
        round_of(1.0, 1.0, 1.0, 1.3),
        round_of(1.3, 1.3, 1.0, 1.0),
        round_of(1.0, 1.3, 1.3, 1.0),
    ]
    row = intra.summarize_rounds({"proton": rounds})["proton"]
    assert row["kernel_geomean_of_medians"] == pytest.approx(1.3**0.25)
    assert row["kernel_geomean"] == pytest.approx(1.3**0.5)
    lo, hi = row["kernel_geomean_ci"]
    assert lo <= row["kernel_geomean"] <= hi


def test_rounds_missing_a_kernel_of_the_set_stay_out_of_the_interval(intra):
    partial = round_of(1.2, 1.2, 1.2, 1.2)
    del partial["matmul"]
    table = intra.summarize_rounds({"proton": [round_of(1.05, 1.05, 1.05, 1.05), partial]})
    assert table["proton"]["kernel_geomean_rounds"] == pytest.approx([1.05])
    assert table["proton"]["kernel_geomean_ci"] == pytest.approx([1.05, 1.05])
    assert table["proton"]["kernels"]["matmul"]["kernel_ratio"] == 1.05
    assert table["proton"]["kernels"]["vadd"]["kernel_ratio"] == pytest.approx(1.125)
