"""Written files: Hatchet JSON / MessagePack round trips, Chrome traces, hatchet interop."""

# Nested `with` blocks are kept: the nesting is what these tests check.
# ruff: noqa: SIM117

import json
import threading

import msgpack
import proton
import pytest
from proton_test_utils import find, load_hatchet, shape, tree

NASTY_NAMES = [
    'q"uote',
    "back\\slash",
    "new\nline",
    "tab\t",
    "üñí€😀",
    "ctl\x01",
    "/path/file.py:12@f",
]
VALUES = {"f": 0.1, "third": 1 / 3, "big": 2**63 - 1, "neg": -5, "tiny": 5e-324, "huge": 1e300}


def test_hatchet_file_round_trips_names_and_values_exactly(tmp_path):
    s = proton.start("exact")
    for name in NASTY_NAMES:
        with proton.scope(name, VALUES):
            pass
    expected = proton.data.get(s)
    proton.finalize(s)
    data = load_hatchet(tmp_path / "exact.hatchet")
    assert data == expected
    assert [c["frame"]["name"] for c in data[0]["children"]] == NASTY_NAMES
    for child in data[0]["children"]:
        assert child["metrics"] == VALUES
        assert type(child["metrics"]["big"]) is int
    assert data[0]["metrics"] == {
        "f": 0.0,
        "third": 0.0,
        "big": 0,
        "neg": 0,
        "tiny": 0.0,
        "huge": 0.0,
    }


def test_hatchet_msgpack_file_round_trips_exactly(tmp_path):
    s = proton.start("exact_mp")
    for name in NASTY_NAMES:
        with proton.scope(name, dict(VALUES, s="text", l=[1, 2.5])):
            pass
    expected = proton.data.get(s)
    proton.finalize(s, "hatchet_msgpack")
    data = msgpack.unpackb(
        (tmp_path / "exact_mp.hatchet_msgpack").read_bytes(), raw=False, strict_map_key=False
    )
    assert data == expected
    assert find(data[0], "tab\t")["metrics"]["l"] == [1.0, 2.5]


def test_hatchet_file_matches_a_golden_tree(tmp_path):
    s = proton.start("golden")
    with proton.scope("a", {"n": 1}):
        with proton.scope("b", {"x (exc)": 2.5}):
            pass
        with proton.scope("b", {"x (exc)": 0.5}):
            pass
    with proton.scope("c", {"p (pty)": 3}):
        pass
    proton.finalize(s)
    text = (tmp_path / "golden.hatchet").read_text()
    data = json.loads(text)
    assert shape(data[0]) == (
        "ROOT",
        {"n": 0, "p": 0},
        [
            ("a", {"n": 1}, [("b", {"x": 3.0}, [])]),
            ("c", {"p": 3}, []),
        ],
    )
    assert data[1] == {}
    assert text.startswith(
        '[{"frame":{"name":"ROOT","type":"function"},"metrics":{"n":0,"p":0},'
        '"children":[{"frame":{"name":"a","type":"function"},"metrics":{"n":1},'
        '"children":[{"frame":{"name":"b","type":"function"},"metrics":{"x":3.0},'
        '"children":[]}]},{"frame":{"name":"c","type":"function"},"metrics":{"p":3},'
        '"children":[]}],"proton_metadata":{'
    )
    assert text.endswith("}},{}]\n")
    assert data[0]["proton_metadata"]["metric_aggregation"] == {
        "exclusive": ["x"],
        "property": ["p"],
    }


# ---------------------------------------------------------------- chrome trace


def test_trace_data_writes_a_chrome_trace_with_nested_scopes(tmp_path):
    s = proton.start("trace", data="trace")
    with proton.scope("a", {"n": 1}):
        with proton.scope("b"):
            with proton.scope("c", {"f": 0.5}):
                pass
        with proton.scope("b"):
            pass
    proton.finalize(s)
    trace = json.loads((tmp_path / "trace.chrome_trace").read_text())
    assert sorted(trace) == ["baseTimeNanoseconds", "displayTimeUnit", "otherData", "traceEvents"]
    # The Unix time of ts 0: the first slice began after the session started.
    start_ns = trace["otherData"]["proton_metadata"]["start_time_unix_ns"]
    assert 0 <= trace["baseTimeNanoseconds"] - start_ns < 60 * 10**9
    assert trace["displayTimeUnit"] == "us"
    tid = threading.get_native_id()

    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    # A scope with metrics is a "metric" slice, named and given args as triton.profiler
    # writes them; its typed values follow. Scopes are numbered in the order written.
    c_args = {"call_stack": ["ROOT", "a", "b", "c"], "metrics": {"f": "0.500000"}, "f": 0.5}
    a_args = {"call_stack": ["ROOT", "a"], "metrics": {"n": "1"}, "n": 1}
    assert [(e["name"], e["cat"], e["args"]) for e in slices] == [
        ("c: <f, 0.500000>", "metric", {**c_args, "scope_id": 0}),
        ("b", "scope", {"call_stack": ["ROOT", "a", "b"], "scope_id": 1}),
        ("b", "scope", {"call_stack": ["ROOT", "a", "b"], "scope_id": 2}),
        ("a: <n, 1>", "metric", {**a_args, "scope_id": 3}),
    ]
    for e in slices:
        # Lanes are named by their pid and tid, strings as in triton.profiler's traces.
        assert (e["pid"], e["tid"]) == ("CPU", f"Thread {tid}")
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    # No metadata events: lanes are named by their pid and tid (graph lanes aside).
    assert {e["ph"] for e in trace["traceEvents"]} == {"X"}

    proton_meta = trace["otherData"]["proton_metadata"]
    assert proton_meta["session"] == "trace"
    assert proton_meta["data"] == "trace"
    assert proton_meta["tool"] == "proton"
    assert proton_meta["version"] == proton.__version__


def test_trace_has_one_thread_lane_per_thread(tmp_path):
    s = proton.start("lanes", data="trace")
    tids = []

    def work():
        tids.append(threading.get_native_id())
        with proton.scope("worker"):
            pass

    t = threading.Thread(target=work)
    t.start()
    t.join()
    with proton.scope("main"):
        pass
    proton.finalize(s)
    trace = json.loads((tmp_path / "lanes.chrome_trace").read_text())
    main_tid = threading.get_native_id()
    by_name = {e["name"]: (e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert by_name == {
        "worker": ("CPU", f"Thread {tids[0]}"),
        "main": ("CPU", f"Thread {main_tid}"),
    }


def test_trace_of_scopes_while_deactivated_is_empty(tmp_path):
    s = proton.start("quiet", data="trace")
    proton.deactivate(s)
    with proton.scope("ignored"):
        pass
    proton.finalize(s)
    trace = json.loads((tmp_path / "quiet.chrome_trace").read_text())
    assert [e for e in trace["traceEvents"] if e["ph"] == "X"] == []


# ---------------------------------------------------------------- hatchet interop


def test_written_hatchet_file_loads_in_llnl_hatchet(tmp_path):
    hatchet = pytest.importorskip("hatchet")
    s = proton.start("interop")
    with proton.scope("a", {"n": 1, "f": 2.5}):
        with proton.scope("b", {"n": 2, "f": 0.5}):
            pass
    with proton.scope("c", {"n": 4, "f": 1.0}):
        pass
    proton.finalize(s)
    with open(tmp_path / "interop.hatchet") as f:
        gf = hatchet.GraphFrame.from_literal([json.load(f)[0]])
    rows = {
        r["name"]: (r["n"], r["f"]) for r in gf.dataframe[["name", "n", "f"]].to_dict("records")
    }
    assert rows == {"ROOT": (0, 0.0), "a": (1, 2.5), "b": (2, 0.5), "c": (4, 1.0)}
    gf.update_inclusive_columns()
    inclusive = {
        r["name"]: r["n (inc)"] for r in gf.dataframe[["name", "n (inc)"]].to_dict("records")
    }
    assert inclusive == {"ROOT": 7, "a": 3, "b": 2, "c": 4}


def test_written_hatchet_file_loads_the_way_tritons_proton_viewer_reads_it(tmp_path):
    hatchet = pytest.importorskip("hatchet")
    s = proton.start("viewer")
    with proton.scope("a", {"n": 1}):
        pass
    proton.finalize(s)
    with open(tmp_path / "viewer.hatchet") as f:
        database = json.load(f)  # triton/profiler/viewer.py get_raw_metrics
    device_info = database.pop(1)
    gf = hatchet.GraphFrame.from_literal(database)
    assert device_info == {}
    assert sorted(gf.dataframe["name"]) == ["ROOT", "a"]


# ---------------------------------------------------------------- scopes left open at finalize


def test_scope_open_at_finalize_does_not_leak_into_the_next_session():
    proton.start("first")
    with proton.scope("open_at_finalize"):
        proton.finalize()
    s = proton.start("second")
    with pytest.raises(proton.ScopeError, match="called with no open scope"):
        proton.exit_scope()
    assert tree(s) == ("ROOT", {}, [])
