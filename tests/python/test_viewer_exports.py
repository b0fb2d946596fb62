"""Exports: folded stacks, speedscope JSON (checked against the speedscope file-format
schema's required fields and types) and gzipped pprof (decoded back by a small protobuf
reader written here)."""

import gzip
import json
from pathlib import Path

from viewer_test_utils import KERNELS, PYTHON_FRAMES, RANK0, RANK1, view

SPEEDSCOPE_UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def export(capsys, tmp_path, kind, *argv):
    out = tmp_path / f"out.{kind}"
    code, lines, err = view(capsys, "--export", kind, "-o", str(out), *argv)
    assert code == 0, err
    assert lines == []
    assert err == f"[PROTON] {kind} export written to {out}\n"
    return out


def test_folded_stacks_weigh_each_frame_by_its_own_time(capsys, tmp_path):
    out = export(capsys, tmp_path, "folded", KERNELS)
    assert out.read_text().splitlines() == [
        "forward;gemm 4000000",
        "backward;gemm_bwd 1000000",
    ]


def test_folded_stacks_of_another_metric_and_of_merged_files(capsys, tmp_path):
    out = export(capsys, tmp_path, "folded", "-m", "count", KERNELS)
    assert out.read_text().splitlines() == ["forward;gemm 2", "backward;gemm_bwd 1"]
    out = export(capsys, tmp_path, "folded", RANK0, RANK1)
    assert out.read_text().splitlines() == [
        "step;fwd 4000",
        "step;bwd 4000",
        "allreduce 4000",
    ]


def validate_speedscope(doc):
    """The required fields and types of https://www.speedscope.app/file-format-schema.json
    (File, Frame and SampledProfile)."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert isinstance(frames, list)
    for frame in frames:
        assert isinstance(frame["name"], str)
        assert set(frame) <= {"name", "file", "line", "col"}
        if "line" in frame:
            assert isinstance(frame["line"], int)
    assert isinstance(doc["profiles"], list) and doc["profiles"]
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled"
        assert isinstance(profile["name"], str)
        assert profile["unit"] in SPEEDSCOPE_UNITS
        assert isinstance(profile["startValue"], (int, float))
        assert isinstance(profile["endValue"], (int, float))
        assert len(profile["samples"]) == len(profile["weights"])
        for stack in profile["samples"]:
            assert all(isinstance(k, int) and 0 <= k < len(frames) for k in stack)
        assert profile["endValue"] - profile["startValue"] == sum(profile["weights"])
    assert 0 <= doc.get("activeProfileIndex", 0) < len(doc["profiles"])
    assert isinstance(doc.get("exporter", ""), str)
    assert isinstance(doc.get("name", ""), str)


def test_speedscope_export_follows_the_schema(capsys, tmp_path):
    doc = json.loads(export(capsys, tmp_path, "speedscope", KERNELS).read_text())
    validate_speedscope(doc)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert names == ["forward", "gemm", "backward", "gemm_bwd"]
    (profile,) = doc["profiles"]
    assert profile["unit"] == "nanoseconds"
    assert profile["samples"] == [[0, 1], [2, 3]]
    assert profile["weights"] == [4000000, 1000000]
    assert profile["endValue"] == 5000000


def test_speedscope_keeps_python_frames_file_and_line(capsys, tmp_path):
    doc = json.loads(export(capsys, tmp_path, "speedscope", PYTHON_FRAMES).read_text())
    validate_speedscope(doc)
    assert doc["shared"]["frames"][:2] == [
        {"name": "main", "file": "/home/u/train.py", "line": 10},
        {"name": "forward", "file": "/home/u/model.py", "line": 42},
    ]


def test_speedscope_has_one_profile_per_input_file(capsys, tmp_path):
    doc = json.loads(export(capsys, tmp_path, "speedscope", RANK0, RANK1).read_text())
    validate_speedscope(doc)
    assert [p["name"] for p in doc["profiles"]] == [RANK0, RANK1]
    assert [p["weights"] for p in doc["profiles"]] == [[3000, 1000], [1000, 3000, 4000]]


# ---------------------------------------------------------------------- pprof


def read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def read_message(data):
    """{field number: [values]}: ints for varints, bytes for length-delimited fields."""
    fields, pos = {}, 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire == 2:
            size, pos = read_varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.setdefault(field, []).append(value)
    return fields


def packed(data):
    values, pos = [], 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        values.append(value)
    return values


def decode_pprof(blob):
    profile = read_message(gzip.decompress(blob))
    strings = [s.decode() for s in profile[6]]
    assert strings[0] == ""
    sample_types = []
    for vt in profile[1]:
        m = read_message(vt)
        sample_types.append((strings[m[1][0]], strings[m[2][0]]))
    functions = {}
    for fn in profile[5]:
        m = read_message(fn)
        functions[m[1][0]] = (strings[m[2][0]], strings[m.get(4, [0])[0]])
    locations = {}
    for loc in profile[4]:
        m = read_message(loc)
        line = read_message(m[4][0])
        locations[m[1][0]] = (functions[line[1][0]], line.get(2, [0])[0])
    samples = []
    for s in profile[2]:
        m = read_message(s)
        stack = [locations[i][0][0] for i in packed(m[1][0])]
        samples.append((stack, packed(m[2][0])))
    return profile, strings, sample_types, locations, samples


def test_pprof_export_decodes_back_to_the_profile(capsys, tmp_path):
    blob = export(capsys, tmp_path, "pprof", KERNELS).read_bytes()
    assert blob[:2] == b"\x1f\x8b"
    profile, strings, sample_types, _, samples = decode_pprof(blob)
    assert sample_types == [
        ("time", "nanoseconds"),
        ("count", "count"),
        ("flops16", "count"),
        ("flops8", "count"),
        ("bytes", "bytes"),
        ("cpu_time", "nanoseconds"),
        ("x", "count"),
    ]
    # leaf first; values in sample-type order (x = 2.5 and 1.5 round to 2)
    assert samples == [
        (["forward"], [0, 0, 0, 0, 0, 5000, 2]),
        (["gemm", "forward"], [4000000, 2, 2000000000000, 0, 4000000000, 0, 0]),
        (["backward"], [0, 0, 0, 0, 0, 3000, 2]),
        (["gemm_bwd", "backward"], [1000000, 1, 0, 500000000000, 1000000000, 0, 0]),
    ]
    assert profile[9] == [1700000000000000000]
    assert strings[profile[14][0]] == "time"
    assert strings[packed(profile[13][0])[0]] == "proton"


def test_pprof_keeps_python_frames_file_and_line(capsys, tmp_path):
    blob = export(capsys, tmp_path, "pprof", PYTHON_FRAMES).read_bytes()
    _, _, _, locations, samples = decode_pprof(blob)
    assert sorted(locations.values()) == [
        (("backward", "/home/u/model.py"), 57),
        (("forward", "/home/u/model.py"), 42),
        (("gemm_kernel", ""), 0),
        (("main", "/home/u/train.py"), 10),
    ]
    assert samples == [
        (["gemm_kernel", "forward", "main"], [3000, 1]),
        (["gemm_kernel", "backward", "main"], [1000, 1]),
    ]


def test_export_default_path_is_next_to_the_input(capsys, tmp_path):
    src = tmp_path / "run.hatchet"
    src.write_bytes(Path(KERNELS).read_bytes())
    code, _, err = view(capsys, "--export", "folded", str(src))
    assert code == 0
    assert err == f"[PROTON] folded export written to {tmp_path / 'run.folded'}\n"
    assert (tmp_path / "run.folded").read_text().startswith("forward;gemm 4000000\n")
