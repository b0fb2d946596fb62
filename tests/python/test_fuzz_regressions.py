"""Inputs the fuzz targets (fuzz/) found or start from, checked on every test run with the
fuzz targets' own properties (fuzz/reader_checks.py): loading any of them gives a Profile
or a ViewerError, the same as a plain json/MessagePack reading, and renders.

Each bug a fuzz target found also has a test of its own here; the ones not fixed yet are
strict xfail tests, so that fixing one shows here.
"""

import sys
from pathlib import Path

import pytest
from proton.viewer import ViewerError, derive, load, render
from proton.viewer.main import list_metrics
from proton.viewer.msgpack import MessagePackError, decode, unpackb

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
INPUTS = sorted(
    p for d in ("regressions", "corpus") for p in (FUZZ_DIR / d).glob("*/*") if p.is_file()
)

if str(FUZZ_DIR) not in sys.path:
    sys.path.insert(0, str(FUZZ_DIR))
import reader_checks  # from fuzz/, which is not a package


def saved(tmp_path, name, suffix=".hatchet"):
    """fuzz/regressions/<name> copied to a profile file named with suffix."""
    path = tmp_path / f"run{suffix}"
    path.write_bytes((FUZZ_DIR / "regressions" / name).read_bytes())
    return path


def test_the_fuzz_inputs_are_found():
    assert any(p.parent.parent.name == "regressions" for p in INPUTS), FUZZ_DIR


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fuzz_input_loads_or_raises_viewer_error(path, tmp_path):
    data = path.read_bytes()
    reader_checks.check_profile_bytes(data, tmp_path)
    reader_checks.check_msgpack_bytes(data)


def test_msgpack_map_with_unhashable_key_is_a_viewer_error(tmp_path):
    # [{{}: nil}]: the msgpack package raised TypeError, which escaped load().
    path = saved(tmp_path, "viewer_load/msgpack_unhashable_map_key", ".hatchet_msgpack")
    with pytest.raises(MessagePackError, match="unhashable"):
        decode(path.read_bytes())
    with pytest.raises(MessagePackError, match="unhashable"):
        unpackb(path.read_bytes())
    with pytest.raises(ViewerError, match="is not a Hatchet profile"):
        load(path)


@pytest.mark.parametrize(
    "name, metric",
    [
        # An escape "\udc00" outside a pair, and the bytes ED A0 80 (a surrogate encoded as
        # UTF-8, which json.loads lets through): both made str no encoder accepts, and
        # rendering raised UnicodeEncodeError.
        ("json_lone_surrogate", "\ufffd"),
        ("json_encoded_surrogate", "t\ufffd"),
    ],
)
def test_json_lone_surrogates_read_as_replacement_characters(tmp_path, name, metric):
    profile = load(saved(tmp_path, f"viewer_load/{name}"))
    assert profile.names == ["a\ufffd"]
    assert profile.metric_names == [metric]
    text = render(profile, [derive(profile, metric)])
    expected = f"{metric}  name\n{'1'.rjust(len(metric))}  a\ufffd\n"
    assert text.encode() == expected.encode()  # what stdout needs


def test_json_surrogate_pairs_and_escaped_backslashes_read_as_written(tmp_path):
    path = tmp_path / "run.hatchet"
    path.write_text(r'[{"frame":{"name":"\ud83d\ude00 \\ud800 \\\udfff"}}]')
    assert load(path).names == ["\U0001f600 \\ud800 \\\ufffd"]
    # A pair encoded as two 3-byte sequences (CESU-8) is not UTF-8 either; U+D7FF is text.
    path.write_bytes(b'[{"frame":{"name":"\xed\xa0\xbd\xed\xb8\x80 \xed\x9f\xbf"}}]')
    assert load(path).names == ["\ufffd\ufffd \ud7ff"]


@pytest.mark.parametrize("child", ['"x"', '{"a":5}', '{"b":[]}', '{"c":{}}', '{"d":[7]}', "[]"])
def test_json_child_that_is_not_a_node_is_a_viewer_error(tmp_path, child):
    # In the layout Proton writes, the first four escaped the JSON rewrite of readers.py
    # as AttributeError, TypeError, IndexError and KeyError.
    path = tmp_path / "run.hatchet"
    root = '{"frame":{"name":"R","type":"function"},"metrics":{},"children":[%s]}'
    path.write_text(f"[{root % child}]")
    with pytest.raises(ViewerError, match="a node under R has no frame name"):
        load(path)


def test_json_node_body_that_is_a_dict_after_the_rewrite_is_a_viewer_error(tmp_path):
    # `"name":"R,"type"...` ends the name early; the rewrite made {"R:[x": {}}, and {}[0]
    # escaped load() as KeyError.
    with pytest.raises(ViewerError, match="is not valid JSON"):
        load(saved(tmp_path, "viewer_load/json_compact_body_is_a_dict"))


@pytest.mark.parametrize(
    "name, error",
    [
        # The name string ends early (`"R},"`); the byte rewrite of Proton's layout turned
        # `},"children":[]` into `}]`, which made the document valid JSON ("R}]" loaded).
        ("json_rewrite_inside_string", "is not valid JSON"),
        # A child {"x": [NODE]} reads as a node "x" whose metric "k" holds NODE.
        ("json_rewrite_node_inside_non_node", "a node under R has no frame name"),
    ],
)
def test_malformed_json_in_protons_layout_is_a_viewer_error(tmp_path, name, error):
    path = saved(tmp_path, f"viewer_load/{name}")
    with pytest.raises(ViewerError, match=error):
        load(path)


def test_msgpack_metric_name_that_is_not_a_string_is_a_viewer_error(tmp_path):
    # {"time (ns)": 1, 1.5: 2}: MessagePack keys may be numbers; the viewer then failed on
    # `1.5.endswith` (AttributeError) when listing metrics.
    path = saved(tmp_path, "viewer_load/msgpack_metric_name_not_a_string", ".hatchet_msgpack")
    with pytest.raises(ViewerError, match="a metric name is not a string"):
        load(path)


def test_malformed_metric_aggregation_does_not_break_the_viewer(tmp_path):
    # "metric_aggregation": {"property": 16}: set(16) raises TypeError listing the metrics.
    profile = load(saved(tmp_path, "viewer_load/metadata_aggregation_not_lists"))
    assert "- t\n" in list_metrics(profile)


def test_stats_with_a_key_that_is_not_a_string_does_not_break_the_viewer(tmp_path):
    # MessagePack "stats": {7: 1}: len(7) raises TypeError rendering the stats table.
    path = saved(tmp_path, "viewer_load/msgpack_stats_key_not_a_string", ".hatchet_msgpack")
    profile = load(path)
    assert render(profile, [derive(profile, "t")], stats=profile.stats).endswith("  7  1\n")


def test_msgpack_nested_deeper_than_the_recursion_limit_is_a_messagepack_error():
    # 3000 nested arrays: unpackb raised RecursionError; the msgpack package raises its
    # ValueError, which decode() turns into MessagePackError too.
    data = (FUZZ_DIR / "regressions/msgpack/deep_nesting").read_bytes()
    # llnl-hatchet raises the interpreter's limit when it reads a profile: use the default.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(MessagePackError, match="nested too deeply"):
            unpackb(data)
    finally:
        sys.setrecursionlimit(limit)
    value = unpackb(b"\x91" * 100 + b"\xc0")  # nesting within the limit still decodes
    for _ in range(100):
        (value,) = value
    assert value is None
