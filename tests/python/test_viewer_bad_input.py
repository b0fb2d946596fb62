"""Bad input to proton-viewer: one `[PROTON]` line on stderr, exit status 1, no traceback."""

import json
import resource
from pathlib import Path

import msgpack
import pytest
from viewer_test_utils import ARCH75, KERNELS, run_viewer, view


def expect_error(capsys, *argv):
    code, lines, err = view(capsys, *argv)
    assert code == 1
    assert lines == []
    assert err.startswith("[PROTON] ")
    assert err.count("\n") == 1 or "derived metrics" in err
    assert "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b"  \n\t", "is empty"),
        (b'[{"frame":{"name":"ROOT","type":"function"},"metrics":{"time (ns)":1', "is truncated"),
        (b"hello, world", "is not valid JSON: Expecting value at line 1 column 1"),
        (b"\x92\x01\x02\x03", "is not a Hatchet profile (unexpected bytes after the value)"),
        (b"{not json at all}", "is not valid JSON"),
        (b'["\xff"]', "is not UTF-8 text"),
        (b"[1, 2]", "a node under the top level has no frame name"),
        (b'[{"name": "ROOT"}, {}]', "has no frame name"),
        (b'{"frame": {"name": "ROOT"}, "metrics": [1], "children": []}', "malformed metrics"),
        (b'[{"frame": {"name": "ROOT"}, "children": [{"frame": 3}]}, {}]', "under ROOT"),
        (b'[{"frame": {"name": "ROOT"}}, [1]]', "the device table is a list of 1"),
        (b"42", "the top level is a int"),
        (b'{"traceEvents": []}', "is a Chrome trace"),
    ],
)
def test_malformed_files_are_reported_in_one_line(capsys, tmp_path, content, message):
    path = tmp_path / "bad.hatchet"
    path.write_bytes(content)
    err = expect_error(capsys, str(path))
    assert err.startswith(f"[PROTON] {path}")
    assert message in err


def test_truncated_real_profile_is_reported_as_truncated(capsys, tmp_path):
    data = Path(KERNELS).read_bytes()
    for cut in (len(data) // 3, len(data) - 5):
        path = tmp_path / f"cut{cut}.hatchet"
        path.write_bytes(data[:cut])
        assert "is truncated (JSON ends early" in expect_error(capsys, str(path))


def test_truncated_msgpack_is_reported(capsys, tmp_path):
    with open(KERNELS) as f:
        blob = msgpack.packb(json.load(f))
    path = tmp_path / "cut.hatchet_msgpack"
    path.write_bytes(blob[: len(blob) // 2])
    assert "is truncated (MessagePack ends early)" in expect_error(capsys, str(path))


def test_missing_file_and_directory(capsys, tmp_path):
    assert "no such file" in expect_error(capsys, str(tmp_path / "nope.hatchet"))
    assert "is a directory" in expect_error(capsys, str(tmp_path))


def test_absurdly_deep_nesting_is_reported(capsys, tmp_path):
    path = tmp_path / "deep.hatchet"
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert "nests deeper than Proton can read" in expect_error(capsys, str(path))


def test_unknown_metric_lists_the_available_ones(capsys):
    err = expect_error(capsys, "-m", "walltime", KERNELS)
    assert err == (
        "[PROTON] unknown metric 'walltime'; available metrics in "
        f"{KERNELS}: time, count, flops16, flops8, bytes, cpu_time, x "
        "(proton-viewer -l lists them)"
    )


def test_derived_metric_without_its_source_names_it(capsys):
    err = expect_error(capsys, "-m", "tflop32/s", KERNELS)
    assert err.startswith("[PROTON] tflop32/s needs the metric 'flops32'; available metrics in")


def test_unknown_unit_lists_the_derived_metrics(capsys):
    code, _, err = view(capsys, "-m", "time/fortnight", KERNELS)
    assert code == 1
    assert err.startswith("[PROTON] unknown derived metric 'time/fortnight'.\nderived metrics")
    assert "tflop*/s" in err


def test_util_on_an_architecture_without_peaks_says_which(capsys):
    err = expect_error(capsys, "-m", "util", ARCH75)
    assert err.startswith(
        "[PROTON] util: no peak FLOP/s for CUDA architecture '75' (device 0); "
        "known CUDA architectures: 80, 89, 90, 100. Add it to "
    )
    assert err.endswith("device_peaks.json")


def test_bad_regular_expression(capsys):
    err = expect_error(capsys, "-i", "(unclosed", KERNELS)
    assert err.startswith("[PROTON] -i/--include '(unclosed' is not a valid regular expression")


def test_bad_options_exit_with_usage_status(capsys):
    code, _, err = view(capsys, "-f", "bogus", KERNELS)
    assert code == 2
    assert "invalid choice: 'bogus'" in err
    code, _, err = view(capsys)
    assert code == 2


def test_file_too_large_for_memory_is_reported_not_a_traceback(tmp_path):
    children = ",".join(
        f'{{"frame":{{"name":"k{i}","type":"function"}},"metrics":{{"time (ns)":{i}}},'
        '"children":[]}'
        for i in range(300_000)
    )
    path = tmp_path / "huge.hatchet"
    path.write_text(
        f'[{{"frame":{{"name":"ROOT","type":"function"}},"metrics":{{}},"children":[{children}]}},{{}}]'
    )

    # 80 MB of address space: the interpreter fits, the 27 MB file and its columns do not.
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (80 * 2**20, 80 * 2**20))

    result = run_viewer(str(path), preexec_fn=limit_memory)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("[PROTON] ")
    assert "memory" in result.stderr


def test_subprocess_exit_status_and_stderr(tmp_path):
    path = tmp_path / "empty.hatchet"
    path.write_bytes(b"")
    result = run_viewer(str(path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"[PROTON] {path} is empty\n"
