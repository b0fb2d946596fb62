"""Every proton-viewer option, enumerated from its argument parser, on both of its paths:
the one-file report (fast_report.py) and main's path over Profiles (PROTON_VIEWER_PYTHON=1).
Both compute with the one C++ model (fast.py); these tests hold the glue of the two paths
to the same output, cell by cell, and the multi-file views (--merge, --diff-profile) to the
one-file reports of their files. An option added to the parser without cases here fails
test_every_option_has_cases."""

import json
import math

import pytest
from proton.viewer import fast_report
from proton.viewer.derive import recipe
from proton.viewer.main import EXPORTS, FORMATS, MERGES, _parser, list_metrics, prepare
from viewer_test_utils import DEVICES, node, view

SP = "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/"
CWD = "/home/u/proj"
GEMM = "void at::native::gemm_kernel<float, 4>(int, float*)"


def kernel(name, time, count, samples=None, **amounts):
    """A kernel's metrics in the order Proton writes them (the C++ reader takes that)."""
    metrics = {"time (ns)": time, "count": count, **amounts, "device_id": "0"}
    return node(name, {**metrics, "device_type": "CUDA", **(samples or {})})


def profile_root(scale, extra):
    """Python frames (own and a library's), scopes with an exclusive metric and cpu_time,
    kernels with every flops width, bytes and instruction samples on source lines, launch
    metadata; `extra` nodes where the ranks differ."""
    gemm = kernel(
        GEMM,
        4_000_000 * scale,
        2,
        flops8=10**11,
        flops16=2 * 10**12 * scale,
        flops32=3 * 10**10,
        flops64=10**9,
        flops=5 * 10**9,
        bytes=4 * 10**9,
        samples={"num_samples": 10 * scale, "stalled_wait": 3},
    )
    gemm["children"] = [
        node("kernel.py:12@gemm", {"num_samples": 6 * scale, "stalled_wait": 2}),
        node("kernel.py:15@gemm", {"num_samples": 4, "stalled_wait": 1}),
    ]
    step = node(
        "step",
        {"cpu_time (ns)": 5000 * scale, "x": 2.5},
        gemm,
        node("__proton_launch_metadata", None, kernel("meta_kernel", 1000, 1)),
    )
    forward = node(f"{CWD}/model.py:42@forward", None, step, *extra)
    call = node(
        SP + "module.py:1779@_wrapped_call_impl",
        None,
        node(SP + "module.py:1790@_call_impl", None, forward),
    )
    keys = ("time (ns)", "count", "flops8", "flops16", "flops32", "flops64", "flops", "bytes")
    root = node("ROOT", dict.fromkeys(keys, 0), node(f"{CWD}/train.py:10@main", None, call))
    root["proton_metadata"] = {
        "working_directory": CWD,
        "script": f"{CWD}/train.py",
        "metric_aggregation": {"exclusive": ["x"], "property": []},
        "stats": {"activity_records_dropped": scale - 1},
    }
    return root


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("options")
    bwd = node("bwd", {"cpu_time (ns)": 3000, "x": 1.5}, kernel("gemm_bwd", 1_000_000, 1))
    only_b = node("only_b", None, kernel("gemm_bwd", 250_000, 3, flops16=10**9))
    paths = []
    for name, scale, extra in (("a", 1, [bwd]), ("b", 2, [only_b])):
        path = d / f"run_{name}.hatchet"
        path.write_text(json.dumps([profile_root(scale, extra), DEVICES]))
        paths.append(str(path))
    return {"A": paths[0], "B": paths[1], "dir": d}


def metric_specs(path):
    """Every -m spec `proton-viewer -l` lists for the file: raw metrics (inclusive and
    exclusive), every derived metric, and <metric>/% of each raw metric."""
    listing = list_metrics(prepare(path))
    specs, raw = [], []
    section = None
    for line in listing.splitlines():
        if not line.startswith("- "):
            section = line
            continue
        items = [s.strip() for s in line[2:].split(",")]
        if "<metric>/%" in line:
            specs += [f"{m}/%" for m in raw]
        elif "derived" in section:
            specs += items
        else:
            raw += items
            specs += items
    return specs


# Per option (the parser's dest), argument lists using A and B (the two files), OUT (a
# path in a fresh directory) and S (one metric spec, expanded to every spec of the file).
OPTION_CASES = {
    "files": [["A"], ["A", "B"], ["dir"]],
    "list": [["-l", "A"], ["-l", "A", "B"]],
    "metrics": [["-m", "S", "A"]],
    "include": [["-i", ".*gemm", "-m", "S", "A"], ["-i", "step", "-m", "time/us,x", "A", "B"]],
    "exclude": [["-e", "bwd", "-m", "S", "A"], ["-e", ".*model.py", "A"]],
    "threshold": [["-t", "0.002", "-m", "S", "A"], ["-t", "1e12", "A"], ["-t", "-1", "A", "B"]],
    "depth": [["-d", "3", "-m", "S", "A"], ["-d", "0", "A"], ["-d", "-2", "A"]],
    "format": [["-f", f, "--print-sorted", "A"] for f in FORMATS],
    "full_names": [["--full-names", "--print-sorted", "A"]],
    "frames": [["--frames", m, "-m", "time/us,count", "A"] for m in ("folded", "short", "all")],
    "print_sorted": [["--print-sorted", "-m", "S", "A"], ["--print-sorted", "-d", "2", "A"]],
    "diff_profile": [["--diff-profile", "B", "-m", "S", "A"]],
    "merge": [["--merge", m, "-m", "S", "A", "B"] for m in MERGES],
    "lines": [["--lines", "void", "-m", "num_samples,stalled_wait/%", "A"]],
    "color": [["--color", c, "-m", "S", "A"] for c in ("always", "never", "auto")],
    "export": [["--export", e, "-o", "OUT", "A"] for e in sorted(EXPORTS)],
    "output": [["--export", "folded", "-o", "OUT", "A", "B"]],
    "html": [["--html", "OUT", "A"]],
    "version": [["--version"]],
    "help": [["--help"]],
}


def test_every_option_has_cases():
    dests = {action.dest for action in _parser()._actions}
    assert dests == set(OPTION_CASES)


def _cases():
    for dest, cases in OPTION_CASES.items():
        for k, argv in enumerate(cases):
            yield pytest.param(dest, argv, id=f"{dest}-{k}")


def run(capsys, monkeypatch, argv, python):
    """(exit status, stdout lines, stderr, files written, whether the one-file report
    wrote it) of one command on one path."""
    if python:
        monkeypatch.setenv("PROTON_VIEWER_PYTHON", "1")
    else:
        monkeypatch.delenv("PROTON_VIEWER_PYTHON", raising=False)
    taken = []
    show = fast_report.show
    monkeypatch.setattr(fast_report, "show", lambda *a: taken.append(show(*a)) or taken[-1])
    code, lines, err = view(capsys, *argv)
    monkeypatch.setattr(fast_report, "show", show)
    return code, lines, err, taken == [True]


def expand(argv, files, spec, out):
    names = {"A": files["A"], "B": files["B"], "dir": str(files["dir"]), "OUT": out, "S": spec}
    return [names.get(a, a) for a in argv]


def one_file_report(argv):
    """Whether the one-file report takes this command (and so must have written it)."""
    flags = {"-l", "--diff-profile", "--lines", "--export", "--html", "--version", "--help"}
    paths = [a for a in argv if a in ("A", "B", "dir")]
    return not flags & set(argv) and paths == ["A"]


@pytest.mark.parametrize(("dest", "argv"), list(_cases()))
def test_both_paths_give_the_same_output(capsys, monkeypatch, tmp_path, files, dest, argv):
    specs = metric_specs(files["A"]) if "S" in argv else [None]
    assert len(specs) > 40 or specs == [None]
    for spec in specs:
        results = []
        for python in (False, True):
            out = tmp_path / ("python" if python else "fast") / "out"
            out.parent.mkdir(exist_ok=True)
            args = expand(argv, files, spec, str(out))
            try:
                code, lines, err, taken = run(capsys, monkeypatch, args, python)
            finally:
                monkeypatch.setattr(fast_report, "show", fast_report.show)
            written = out.read_bytes() if out.exists() else None
            results.append((code, lines, err.replace(str(out), "OUT"), written, taken))
        (code, lines, err, written, taken), python_run = results
        assert (code, lines, err, written) == python_run[:4], (argv, spec)
        assert code == 0, err
        assert lines or written or err, (argv, spec)
        assert taken == (one_file_report(argv) and spec != "util"), (argv, spec)


# ---------------------------------------------------------------- multi-file views, cell by cell
def cells(lines):
    """{path of names: [cell, ...]} of a tree report (the lines before an empty line)."""
    header = lines[0]
    start = len(header) - len("name")
    table, stack, columns = {}, [], None
    for line in lines[1:]:
        if not line:
            break
        values, rest = line[:start].split(), line[start:]
        depth = 0
        while rest[:3] in ("├─ ", "└─ ", "│  ", "   "):
            rest, depth = rest[3:], depth + 1
        del stack[depth:]
        stack.append(rest)
        table["/".join(stack)] = values
        assert len(values) == (columns or len(values))  # a value never holds a space
        columns = len(values)
    return table


def number(text):
    return None if text == "-" else float(text)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=2e-3, abs_tol=1.5e-3 + 2e-3 * max(abs(a), abs(b)))


def combined(values, how):
    present = [v for v in values if v is not None]
    if not present:
        return None
    if how == "sum":
        return sum(present)
    if how == "mean":
        return sum(present) / len(present)
    return min(present) if how == "min" else max(present)


def single(capsys, monkeypatch, path, spec):
    code, lines, err, taken = run(capsys, monkeypatch, ["-m", spec, path], python=False)
    assert code == 0 and taken == (spec != "util"), err  # util: main's path
    return cells(lines)


@pytest.mark.parametrize("how", [*MERGES, "diff"])
def test_multi_file_cells_combine_the_one_file_reports(capsys, monkeypatch, files, how):
    a, b = files["A"], files["B"]
    for spec in metric_specs(a):
        if spec not in metric_specs(b):
            continue
        r = recipe(prepare(a), spec)
        additive = r.additive_source is not None
        if how == "diff":
            argv = ["-m", spec, "--diff-profile", b, a]
        else:
            argv = ["-m", spec, "--merge", how, a, b]
        code, lines, err, _ = run(capsys, monkeypatch, argv, python=False)
        assert code == 0, err
        table = cells(lines)
        per_file = [single(capsys, monkeypatch, p, spec) for p in (a, b)]
        for path, shown in table.items():
            values = []
            for report in per_file:
                cell = report.get(path)
                values.append(number(cell[0]) if cell else (0 if additive else None))
            if how == "diff":
                first, base = values
                expected = None if first is None and base is None else (first or 0) - (base or 0)
            else:
                expected = combined(values, how)
            assert close(number(shown[0]), expected), (spec, how, path, shown, values)
            precise = all(v is None or v == 0 or abs(v) >= 1 for v in values)
            if how != "diff" and precise:  # max / mean of the first column over the files
                spread = [v or 0 for v in values]
                mean = sum(spread) / 2
                assert close(number(shown[1]), max(spread) / mean if mean else None), (path,)
        title = f"{r.title} diff" if how == "diff" else f"{r.title} ({how})"
        assert lines[0].lstrip().startswith(title + "  "), lines[0]
