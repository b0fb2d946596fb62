"""proton.data: in-memory access by phase, phase advancing, completion and clearing."""

# Nested `with` blocks are kept: the nesting is what these tests check.
# ruff: noqa: SIM117

import json

import msgpack
import proton
import pytest
from proton_test_utils import load_hatchet, shape, tree


def test_get_returns_root_devices_and_metadata():
    s = proton.start("layout")
    with proton.scope("a", {"n": 1}):
        pass
    data = proton.data.get(s)
    assert isinstance(data, list) and len(data) == 2
    root, devices = data
    assert list(root) == ["frame", "metrics", "children", "proton_metadata"]
    assert root["frame"] == {"name": "ROOT", "type": "function"}
    assert shape(root) == ("ROOT", {"n": 0}, [("a", {"n": 1}, [])])
    assert devices == {}  # no GPU records
    meta = root["proton_metadata"]
    assert meta["tool"] == "proton"
    assert meta["version"] == proton.__version__
    assert meta["session"] == "layout"
    assert (meta["context"], meta["data"], meta["backend"], meta["mode"]) == (
        "shadow",
        "tree",
        "none",
        "",
    )
    assert meta["phase"] == 0
    assert isinstance(meta["start_time_unix_ns"], int) and meta["start_time_unix_ns"] > 0
    assert meta["stats"]["metrics_dropped_type_conflict"] == 0
    assert meta["metric_aggregation"] == {"exclusive": [], "property": []}


def test_get_of_an_empty_session_is_a_bare_root():
    s = proton.start("empty")
    assert shape(proton.data.get(s)[0]) == ("ROOT", {}, [])


def test_get_msgpack_equals_get():
    s = proton.start("msgpack")
    with proton.scope("a", {"i": 1, "f": 0.25, "s": "x", "l": [1.0, 2.0]}):
        with proton.scope("b", {"e (exc)": 3}):
            pass
    raw = proton.data.get_msgpack(s)
    assert isinstance(raw, bytes)
    assert msgpack.unpackb(raw, raw=False, strict_map_key=False) == proton.data.get(s)


def test_get_of_trace_data_returns_the_chrome_trace():
    s = proton.start("trace", data="trace")
    with proton.scope("a"):
        pass
    data = proton.data.get(s)
    assert data["displayTimeUnit"] == "us"
    assert [e["name"] for e in data["traceEvents"] if e["ph"] == "X"] == ["a"]
    with pytest.raises(proton.ConfigError, match="cannot be written for data='trace'"):
        proton.data.get_msgpack(s)


def test_data_calls_with_session_none():
    proton.start("none")
    assert proton.data.get(None) is None
    assert proton.data.get_msgpack(None) is None
    assert proton.data.advance_phase(None) is None
    assert proton.data.is_phase_complete(None) is False
    assert proton.data.clear(None) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: proton.data.get(99),
        lambda: proton.data.get_msgpack(99),
        lambda: proton.data.advance_phase(99),
        lambda: proton.data.is_phase_complete(99, 0),
        lambda: proton.data.clear(99),
        lambda: proton.activate(99),
        lambda: proton.deactivate(99),
        lambda: proton.context.depth(99),
    ],
)
def test_unknown_session_raises_session_error(call):
    proton.start("exists")
    with pytest.raises(proton.SessionError) as info:
        call()
    assert isinstance(info.value, RuntimeError)
    assert str(info.value) == "Session has not been initialized: 99"


def test_advance_phase_returns_the_new_phase_and_records_go_to_it():
    s = proton.start("phases")
    with proton.scope("p0", {"n": 1}):
        pass
    assert proton.data.advance_phase(s) == 1
    with proton.scope("p1", {"n": 2}):
        pass
    assert proton.data.advance_phase(s) == 2
    with proton.scope("p2", {"n": 3}):
        pass
    assert tree(s, 0) == ("ROOT", {"n": 0}, [("p0", {"n": 1}, [])])
    assert tree(s, 1) == ("ROOT", {"n": 0}, [("p1", {"n": 2}, [])])
    assert tree(s, 2) == ("ROOT", {"n": 0}, [("p2", {"n": 3}, [])])
    assert [proton.data.get(s, p)[0]["proton_metadata"]["phase"] for p in range(3)] == [0, 1, 2]


def test_scope_open_across_advance_phase_is_rebuilt_in_the_new_phase():
    s = proton.start("across")
    with proton.scope("outer"):
        with proton.scope("before", {"n": 1}):
            pass
        proton.data.advance_phase(s)
        with proton.scope("after", {"n": 1}):
            pass
    assert tree(s, 0) == ("ROOT", {"n": 0}, [("outer", {}, [("before", {"n": 1}, [])])])
    assert tree(s, 1) == ("ROOT", {"n": 0}, [("outer", {}, [("after", {"n": 1}, [])])])


def test_is_phase_complete_is_false_for_the_current_phase_and_true_for_earlier_ones():
    s = proton.start("complete")
    assert proton.data.is_phase_complete(s, 0) is False
    proton.data.advance_phase(s)
    assert proton.data.is_phase_complete(s, 0) is True
    assert proton.data.is_phase_complete(s, 1) is False
    proton.data.advance_phase(s)
    proton.deactivate(s, flushing=True)
    assert [proton.data.is_phase_complete(s, p) for p in range(4)] == [True, True, False, False]


def test_clear_one_phase():
    s = proton.start("clear")
    with proton.scope("p0"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1"):
        pass
    proton.data.advance_phase(s)
    proton.data.clear(s, 1)
    with pytest.raises(proton.SessionError, match=r"Session \d+ has no data for phase 1"):
        proton.data.get(s, 1)
    assert tree(s, 0) == ("ROOT", {}, [("p0", {}, [])])
    assert tree(s, 2) == ("ROOT", {}, [])


def test_clear_the_current_phase_empties_it_and_recording_continues():
    s = proton.start("clearcur")
    with proton.scope("old", {"n": 1}):
        pass
    proton.data.clear(s, 0)
    assert tree(s, 0) == ("ROOT", {}, [])
    with proton.scope("new"):
        pass
    assert tree(s, 0) == ("ROOT", {}, [("new", {}, [])])


def test_clear_up_to_phase(tmp_path):
    s = proton.start("upto")
    for phase in range(3):
        with proton.scope(f"p{phase}"):
            pass
        if phase < 2:
            proton.data.advance_phase(s)
    proton.data.clear(s, 1, clear_up_to_phase=True)
    for gone in (0, 1):
        with pytest.raises(proton.SessionError, match=f"has no data for phase {gone}"):
            proton.data.get(s, gone)
    assert tree(s, 2) == ("ROOT", {}, [("p2", {}, [])])
    proton.data.clear(s, 2, clear_up_to_phase=True)
    assert tree(s, 2) == ("ROOT", {}, [])
    with proton.scope("p2b"):
        pass
    proton.finalize(s)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["upto.part_2.hatchet"]
    assert shape(load_hatchet(tmp_path / "upto.part_2.hatchet")[0]) == (
        "ROOT",
        {},
        [("p2b", {}, [])],
    )


def test_finalize_after_advancing_writes_one_file_per_phase(tmp_path):
    s = proton.start("parts")
    with proton.scope("p0", {"n": 1}):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1", {"n": 2}):
        pass
    proton.finalize(s)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "parts.part_0.hatchet",
        "parts.part_1.hatchet",
    ]
    part0 = load_hatchet(tmp_path / "parts.part_0.hatchet")
    part1 = load_hatchet(tmp_path / "parts.part_1.hatchet")
    assert shape(part0[0]) == ("ROOT", {"n": 0}, [("p0", {"n": 1}, [])])
    assert shape(part1[0]) == ("ROOT", {"n": 0}, [("p1", {"n": 2}, [])])
    assert part0[0]["proton_metadata"]["phase"] == 0
    assert part1[0]["proton_metadata"]["phase"] == 1


def test_finalize_trace_after_advancing_writes_one_chrome_trace_per_phase(tmp_path):
    s = proton.start("tparts", data="trace")
    with proton.scope("p0"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1"):
        pass
    proton.finalize(s)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tparts.part_0.chrome_trace",
        "tparts.part_1.chrome_trace",
    ]
    for phase in (0, 1):
        trace = json.loads((tmp_path / f"tparts.part_{phase}.chrome_trace").read_text())
        assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == [f"p{phase}"]
