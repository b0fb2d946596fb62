"""proton-viewer on instruction-sampling (PC sampling) profiles: sample metrics in the tree
and the per-line listing (`--lines`), on a hand-written profile:

    ROOT
    ├─ forward
    │  └─ matmul_kernel          time 1000 ns; samples without line info: 10 (8 stalled:
    │     │                      long_scoreboard 5, wait 3)
    │     ├─ /src/matmul.py:42@matmul_kernel   60 (50 stalled: long_scoreboard 40, wait 10)
    │     └─ /src/matmul.py:40@matmul_kernel   20 (12 stalled: wait 12)
    └─ backward
       ├─ matmul_kernel          time 500 ns
       │  └─ /src/matmul.py:40@matmul_kernel   30 (10 stalled: long_scoreboard 10)
       └─ softmax_kernel         samples without line info: 5
          └─ /src/softmax.py:7@softmax_kernel  25 (20 stalled: wait 20)
"""

import json

import pytest
from viewer_test_utils import view, view_lines

MATMUL = "/src/matmul.py:{}@matmul_kernel"
METRICS = ("num_samples", "num_stalled_samples", "stalled_long_scoreboard", "stalled_wait")


def frame(name, metrics=None, children=()):
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics or {},
        "children": list(children),
    }


def samples(total, stalled, long_scoreboard=0, wait=0):
    out = {"num_samples": total, "num_stalled_samples": stalled}
    if long_scoreboard:
        out["stalled_long_scoreboard"] = long_scoreboard
    if wait:
        out["stalled_wait"] = wait
    return out


@pytest.fixture
def profile(tmp_path):
    root = frame(
        "ROOT",
        dict.fromkeys(("time (ns)", "count", *METRICS), 0),
        [
            frame(
                "forward",
                children=[
                    frame(
                        "matmul_kernel",
                        {"time (ns)": 1000, "count": 1, **samples(10, 8, 5, 3)},
                        [
                            frame(MATMUL.format(42), samples(60, 50, 40, 10)),
                            frame(MATMUL.format(40), samples(20, 12, wait=12)),
                        ],
                    )
                ],
            ),
            frame(
                "backward",
                children=[
                    frame(
                        "matmul_kernel",
                        {"time (ns)": 500, "count": 1},
                        [frame(MATMUL.format(40), samples(30, 10, 10))],
                    ),
                    frame(
                        "softmax_kernel",
                        {"num_samples": 5},
                        [frame("/src/softmax.py:7@softmax_kernel", samples(25, 20, wait=20))],
                    ),
                ],
            ),
        ],
    )
    path = tmp_path / "pc.hatchet"
    path.write_text(json.dumps([root, {"CUDA": {"0": {"arch": "90"}}}]))
    return str(path)


def test_sample_counts_are_inclusive_in_the_tree(capsys, profile):
    assert view_lines(capsys, "-m", "num_samples,num_stalled_samples", profile) == [
        "num_samples  num_stalled_samples  name",
        "        150                  100  ROOT",
        "         90                   70  ├─ forward",
        "         90                   70  │  └─ matmul_kernel",
        "         60                   50  │     ├─ /src/matmul.py:42@matmul_kernel",
        "         20                   12  │     └─ /src/matmul.py:40@matmul_kernel",
        "         60                   30  └─ backward",
        "         30                   10     ├─ matmul_kernel",
        "         30                   10     │  └─ /src/matmul.py:40@matmul_kernel",
        "         30                   20     └─ softmax_kernel",
        "         25                   20        └─ /src/softmax.py:7@softmax_kernel",
    ]


def test_stall_reason_share_of_root(capsys, profile):
    # long_scoreboard: 5 + 40 + 10 = 55 in all
    lines = view_lines(capsys, "-m", "stalled_long_scoreboard/%,stalled_wait", profile)
    assert lines[:6] == [
        "stalled_long_scoreboard/%  stalled_wait  name",
        "                  100.000            45  ROOT",
        "                   81.818            25  ├─ forward",
        "                   81.818            25  │  └─ matmul_kernel",
        "                   72.727            10  │     ├─ /src/matmul.py:42@matmul_kernel",
        "                    0.000            12  │     └─ /src/matmul.py:40@matmul_kernel",
    ]


def test_lines_of_one_kernel_sum_contexts_and_sort_by_samples(capsys, profile):
    # matmul_kernel: 10 without line info + 60 (:42) + 20 + 30 (:40) = 120 samples
    assert view_lines(capsys, "--lines", "matmul", "-m", "num_samples", profile) == [
        "Lines of 2 kernel frames matching 'matmul': 120 samples",
        "num_samples  samples %  line",
        "         60     50.000  /src/matmul.py:42@matmul_kernel",
        "         50     41.667  /src/matmul.py:40@matmul_kernel",
        "         10      8.333  (no line info)",
    ]


def test_lines_with_stall_metrics_and_a_short_name_format(capsys, profile):
    lines = view_lines(
        capsys,
        "--lines",
        "matmul_kernel$",
        "-m",
        "num_samples,num_stalled_samples,stalled_long_scoreboard/%",
        "-f",
        "file_function_line",
        profile,
    )
    assert lines == [
        "Lines of 2 kernel frames matching 'matmul_kernel$': 120 samples",
        "num_samples  num_stalled_samples  stalled_long_scoreboard/%  samples %  line",
        "         60                   50                     72.727     50.000  matmul.py:42@matmul_kernel",
        "         50                   22                     18.182     41.667  matmul.py:40@matmul_kernel",
        "         10                    8                      9.091      8.333  (no line info)",
    ]


def test_lines_default_to_num_samples_and_match_at_the_start(capsys, profile):
    assert view_lines(capsys, "--lines", "soft", profile) == [
        "Lines of 1 kernel frame matching 'soft': 30 samples",
        "num_samples  samples %  line",
        "         25     83.333  /src/softmax.py:7@softmax_kernel",
        "          5     16.667  (no line info)",
    ]
    code, _, err = view(capsys, "--lines", "kernel", profile)
    assert (code, err) == (
        1,
        f"[PROTON] --lines 'kernel' matches no kernel frame with samples in {profile}\n",
    )


def test_lines_on_a_profile_without_samples_says_how_to_get_them(capsys):
    from viewer_test_utils import KERNELS

    code, lines, err = view(capsys, "--lines", "gemm", KERNELS)
    assert (code, lines) == (1, [])
    assert err == (
        f"[PROTON] --lines needs instruction samples (num_samples); {KERNELS} has none "
        "(profile with mode='pcsampling')\n"
    )


def test_lines_flag_is_documented_in_help(capsys):
    code, lines, _ = view(capsys, "--help")
    assert code == 0
    text = " ".join(" ".join(lines).split())
    assert "--lines KERNEL_REGEX" in text
    assert "sorted by num_samples" in text
