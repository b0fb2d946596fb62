"""proton-viewer on the files periodic flushing and per-rank runs write:
`<name>.part_<P>.<ext>`, `<name>.rank<R>.<ext>`, `<name>.rank<R>.part_<P>.<ext>`.

Part files of one run add up (phases); ranks then merge with --merge and the imbalance
column. Every run below has one step with a forward and a backward kernel (times in ns):

    run.rank0.part_0: fwd 1000          run.rank1.part_0: fwd 4000
    run.rank0.part_1: fwd 2000, bwd 3000 run.rank1.part_1: bwd 2000
"""

import json
import os

import msgpack
import pytest
from viewer_test_utils import run_viewer, view, view_lines

PHASES = {
    (0, 0): {"fwd": 1000},
    (0, 1): {"fwd": 2000, "bwd": 3000},
    (1, 0): {"fwd": 4000},
    (1, 1): {"bwd": 2000},
}


def document(kernels):
    def node(name, metrics, children=()):
        return {
            "frame": {"name": name, "type": "function"},
            "metrics": metrics,
            "children": list(children),
        }

    step = node("step", {}, [node(k, {"time (ns)": t, "count": 1}) for k, t in kernels.items()])
    return [node("ROOT", {"time (ns)": 0, "count": 0}, [step]), {}]


def write(path, kernels, fmt="hatchet"):
    doc = document(kernels)
    if fmt == "hatchet":
        path.write_text(json.dumps(doc))
    else:
        path.write_bytes(msgpack.packb(doc))
    return str(path)


@pytest.fixture
def parts(tmp_path):
    """{(rank, part): path} of a two-rank run flushed in two phases."""
    return {
        (r, p): write(tmp_path / f"run.rank{r}.part_{p}.hatchet", kernels)
        for (r, p), kernels in PHASES.items()
    }


RANK0_SUMMED = [
    "time/us  name",
    "  6.000  ROOT",
    "  6.000  └─ step",
    "  3.000     ├─ fwd",
    "  3.000     └─ bwd",
]


def test_part_files_of_one_run_add_up(capsys, parts):
    assert view_lines(capsys, "-m", "time/us", parts[0, 0], parts[0, 1]) == RANK0_SUMMED
    # given in any order
    assert view_lines(capsys, "-m", "time/us", parts[0, 1], parts[0, 0]) == RANK0_SUMMED


def test_ranks_of_flushed_runs_add_their_parts_then_merge(capsys, parts):
    lines = view_lines(capsys, "-m", "time/us", *parts.values())
    assert lines == [
        "time/us (sum)  imbalance  name",
        "       12.000      1.000  ROOT",
        "       12.000      1.000  └─ step",
        "        7.000      1.143     ├─ fwd",
        "        5.000      1.200     └─ bwd",
    ]
    lines = view_lines(capsys, "-m", "time/us", "--merge", "max", *parts.values())
    assert [line.split()[0] for line in lines[1:]] == ["6.000", "6.000", "4.000", "3.000"]


def test_a_directory_or_quoted_glob_reads_every_part(capsys, parts, tmp_path):
    everything = view_lines(capsys, "-m", "time/us", *parts.values())
    assert view_lines(capsys, "-m", "time/us", str(tmp_path)) == everything
    pattern = str(tmp_path / "run.rank0.part_*.hatchet")
    assert view_lines(capsys, "-m", "time/us", pattern) == RANK0_SUMMED


def test_every_proton_file_name_and_odd_names_load(capsys, tmp_path):
    expected = view_lines(capsys, "-m", "time/ns", write(tmp_path / "a.hatchet", PHASES[0, 1]))
    for name, fmt in [
        ("run.part_3.hatchet", "hatchet"),
        ("run.part_3.hatchet_msgpack", "msgpack"),
        ("run.rank12.hatchet", "hatchet"),
        ("run.rank12.hatchet_msgpack", "msgpack"),
        ("run.rank12.part_3.hatchet_msgpack", "msgpack"),
        ("profile.json", "hatchet"),  # content tells the format
        ("profile.bin", "msgpack"),
        ("noextension", "msgpack"),
    ]:
        path = write(tmp_path / name, PHASES[0, 1], fmt)
        assert view_lines(capsys, "-m", "time/ns", path) == expected, name


def test_the_same_phase_twice_is_an_error(capsys, tmp_path, parts):
    twin = write(tmp_path / "run.rank0.part_1.hatchet_msgpack", PHASES[0, 1], "msgpack")
    code, lines, err = view(capsys, parts[0, 1], twin)
    assert (code, lines) == (1, [])
    assert err == (
        f"[PROTON] {parts[0, 1]} and {twin} are the same phase (part_1) of one run; "
        "give one of them\n"
    )


def test_empty_directory_and_unmatched_glob(capsys, tmp_path):
    code, _, err = view(capsys, str(tmp_path))
    assert code == 1
    assert err.startswith(f"[PROTON] {tmp_path} is a directory with no profile files")
    code, _, err = view(capsys, str(tmp_path / "run.part_*.hatchet"))
    assert (code, err) == (1, f"[PROTON] {tmp_path / 'run.part_*.hatchet'} matches no file\n")


def corrupt_variants(data):
    """(label, bytes) of a part file damaged the ways a crash or a bad disk leaves them."""
    yield "empty", b""
    for cut in (1, len(data) // 3, len(data) // 2, len(data) - 1):
        yield f"truncated at {cut}", data[:cut]
    for at in (0, 1, len(data) // 4, len(data) // 2, len(data) - 1):
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        yield f"byte {at} flipped", bytes(flipped)
    yield "zeroed tail", data[: len(data) // 2] + bytes(len(data) - len(data) // 2)


@pytest.mark.parametrize("fmt", ["hatchet", "msgpack"])
def test_damaged_part_files_give_one_line_naming_the_file(tmp_path, fmt):
    ext = "hatchet" if fmt == "hatchet" else "hatchet_msgpack"
    good = write(tmp_path / f"run.part_0.{ext}", PHASES[0, 0], fmt)
    with open(good, "rb") as f:
        data = f.read()
    for label, content in corrupt_variants(data):
        bad = tmp_path / f"run.part_1.{ext}"
        bad.write_bytes(content)
        result = run_viewer(good, str(bad))
        assert "Traceback" not in result.stderr, label
        if result.returncode == 0:  # a flip inside a number or name can still be a profile
            assert label.startswith("byte"), label
            continue
        assert result.returncode == 1, label
        assert result.stdout == "", label
        assert result.stderr.startswith(f"[PROTON] {bad}"), (label, result.stderr)
        assert result.stderr.count("\n") == 1, (label, result.stderr)


@pytest.mark.parametrize("fmt", ["hatchet", "msgpack"])
def test_damage_at_the_start_or_end_is_always_reported(tmp_path, fmt):
    ext = "hatchet" if fmt == "hatchet" else "hatchet_msgpack"
    data = (
        json.dumps(document(PHASES[0, 0])).encode()
        if fmt == "hatchet"
        else msgpack.packb(document(PHASES[0, 0]))
    )
    for content in (b"", data[:-1], bytes([data[0] ^ 0xFF]) + data[1:]):
        bad = tmp_path / f"run.rank0.part_7.{ext}"
        bad.write_bytes(content)
        result = run_viewer(str(bad))
        assert result.returncode == 1
        assert result.stderr.startswith(f"[PROTON] {bad}")
        assert "Traceback" not in result.stderr
    assert os.path.exists(bad)
