"""Readable kernel names in proton-viewer: C++ signatures shown without their template and
parameter lists, identically by the Python renderer and the C++ report; --full-names; the
full name kept for -i/-e, --lines and exports."""

import json

import pytest
from proton import _C
from proton.viewer.names import short_kernel_name
from test_viewer_fast import both_paths
from viewer_test_utils import GOLDEN, view, view_lines

FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)
MUL = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<"
    "float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<"
    "float> > const&)::{lambda(int)#1})"
)
GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_64x64_tn>(Params)"


def golden_cases():
    lines = (GOLDEN / "kernel_names.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines if line and not line.startswith("#")]


def frame(name, metrics=None, children=()):
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics or {},
        "children": list(children),
    }


@pytest.fixture
def torch_profile(tmp_path):
    root = frame(
        "ROOT",
        {"time (ns)": 0, "count": 0},
        [
            frame(
                "step",
                children=[
                    frame(FILL, {"time (ns)": 2000, "count": 2}),
                    frame(MUL, {"time (ns)": 1000, "count": 1}),
                    frame(GEMM, {"time (ns)": 7000, "count": 1}),
                    frame("matmul_kernel", {"time (ns)": 500, "count": 1}),
                ],
            )
        ],
    )
    path = tmp_path / "torch.hatchet"
    path.write_text(json.dumps([root, {"CUDA": {"0": {"arch": "90"}}}]))
    return str(path)


@pytest.mark.parametrize(("full", "shown"), golden_cases())
def test_python_and_cpp_shorten_every_golden_name_alike(full, shown):
    assert short_kernel_name(full) == shown
    assert _C.viewer_short_kernel_name(full) == shown


def test_the_golden_file_covers_kept_and_shortened_names():
    cases = golden_cases()
    assert sum(full != shown for full, shown in cases) >= 10
    assert sum(full == shown for full, shown in cases) >= 10


def test_tree_shows_short_kernel_names_by_default(capsys, torch_profile):
    assert view_lines(capsys, "-m", "time/ns,count", torch_profile) == [
        "time/ns  count  name",
        "  10500      5  ROOT",
        "  10500      5  └─ step",
        "   2000      2     ├─ at::native::vectorized_elementwise_kernel<...>(...)",
        "   1000      1     ├─ at::native::elementwise_kernel<...>(...)",
        "   7000      1     ├─ cutlass::Kernel2<...>(...)",
        "    500      1     └─ matmul_kernel",
    ]


def test_full_names_option_shows_names_whole(capsys, torch_profile):
    lines = view_lines(capsys, "-m", "count", "--full-names", torch_profile)
    assert lines[3:6] == [f"    2     ├─ {FILL}", f"    1     ├─ {MUL}", f"    1     ├─ {GEMM}"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--full-names"],
        ["-m", "time/us,count", "--print-sorted"],
        ["-m", "time/us", "--print-sorted", "--full-names"],
        ["-f", "function_line", "-m", "count"],
        ["-f", "file_function", "--full-names"],
        ["-m", "time/ms", "--color", "always"],
        ["-i", ".*MulFunctor.*", "-m", "count"],
    ],
)
def test_cpp_report_equals_python_report_with_long_names(capsys, monkeypatch, torch_profile, argv):
    fast, taken, python = both_paths(capsys, monkeypatch, *argv, torch_profile)
    assert taken
    assert fast == python
    assert fast[0] == 0


def test_sorted_list_shows_short_names(capsys, torch_profile):
    lines = view_lines(capsys, "-m", "time/ns", "--print-sorted", torch_profile)
    sorted_part = lines[lines.index("Sorted kernels by metric time/ns") + 1 :]
    assert [line.split()[0] for line in sorted_part] == [
        "step",
        "cutlass::Kernel2<...>(...)",
        "at::native::vectorized_elementwise_kernel<...>(...)",
        "at::native::elementwise_kernel<...>(...)",
        "matmul_kernel",
    ]


def test_include_and_exclude_match_the_full_name(capsys, torch_profile):
    # "std::array" and "MulFunctor" appear only in the elided template lists.
    kept = view_lines(capsys, "-m", "count", "-i", ".*std::array.*", torch_profile)
    assert kept[-1] == "    2     └─ at::native::vectorized_elementwise_kernel<...>(...)"
    assert len(kept) == 4
    dropped = view_lines(capsys, "-m", "count", "-e", ".*MulFunctor.*", torch_profile)
    assert [line.split("─ ")[-1] for line in dropped[3:]] == [
        "at::native::vectorized_elementwise_kernel<...>(...)",
        "cutlass::Kernel2<...>(...)",
        "matmul_kernel",
    ]


def test_lines_matches_the_full_kernel_name(capsys, tmp_path):
    line_frame = frame("/src/fill.cu:12@fill", {"num_samples": 30})
    root = frame("ROOT", {"num_samples": 0}, [frame(FILL, {"num_samples": 10}, [line_frame])])
    path = tmp_path / "pc.hatchet"
    path.write_text(json.dumps([root, {}]))
    lines = view_lines(capsys, "--lines", ".*FillFunctor<float>, std::array", str(path))
    assert (
        lines[0]
        == "Lines of 1 kernel frame matching '.*FillFunctor<float>, std::array': 40 samples"
    )
    code, _, err = view(capsys, "--lines", r".*vectorized_elementwise_kernel<\.\.\.>", str(path))
    assert code == 1 and "matches no kernel frame" in err


def test_exports_write_the_full_name(capsys, torch_profile, tmp_path):
    out = tmp_path / "out.folded"
    code, _, err = view(capsys, "--export", "folded", "-o", str(out), torch_profile)
    assert code == 0, err
    folded = out.read_text()
    assert f"step;{FILL} 2000" in folded.splitlines()
    assert "<...>" not in folded
