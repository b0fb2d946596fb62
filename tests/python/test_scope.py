"""Scopes: context manager, decorator, manual enter/exit, metrics and their aggregation."""

# Nested `with` blocks are kept: the nesting is what these tests check.
# ruff: noqa: SIM117

import json

import proton
import pytest
from proton.flags import flags
from proton_test_utils import find, load_hatchet, tree


def test_nested_scopes_three_deep_as_context_managers():
    s = proton.start("nest")
    with proton.scope("a"):
        with proton.scope("b"):
            with proton.scope("c", {"n": 1}):
                pass
        with proton.scope("b2"):
            pass
    assert tree(s) == (
        "ROOT",
        {"n": 0},
        [("a", {}, [("b", {}, [("c", {"n": 1}, [])]), ("b2", {}, [])])],
    )


def test_nested_scopes_three_deep_as_decorators():
    s = proton.start("deco")

    @proton.scope("leaf", {"n": 1})
    def leaf(x):
        return x * 2

    @proton.scope("mid")
    def mid(x):
        return leaf(x) + leaf(x)

    @proton.scope("top")
    def top(x):
        return mid(x)

    assert top.__name__ == "top"
    assert top(3) == 12
    assert top(1) == 4
    assert tree(s) == ("ROOT", {"n": 0}, [("top", {}, [("mid", {}, [("leaf", {"n": 4}, [])])])])


def test_decorated_function_exception_still_closes_the_scope():
    s = proton.start("exc")

    @proton.scope("fails")
    def fails():
        raise KeyError("x")

    with pytest.raises(KeyError):
        fails()
    assert proton.context.depth(s) == 0
    with proton.scope("next"):
        pass
    assert tree(s) == ("ROOT", {}, [("fails", {}, []), ("next", {}, [])])


def test_scope_object_can_be_entered_recursively():
    s = proton.start("rec")
    sc = proton.scope("r", {"n": 1})
    with sc:
        with sc:
            assert proton.context.depth(s) == 2
    assert proton.context.depth(s) == 0
    assert tree(s) == ("ROOT", {"n": 0}, [("r", {"n": 1}, [("r", {"n": 1}, [])])])


def test_scope_exposes_name_and_metrics():
    sc = proton.scope("x", {"a": 1})
    assert sc.name == "x"
    assert sc.metrics == {"a": 1}
    assert proton.scope("y").metrics is None


def test_repeated_entries_aggregate_metrics_by_kind():
    s = proton.start("agg")
    for value in (1, 2, 3):
        with proton.scope(
            "x",
            {
                "int": value,
                "float": value * 0.5,
                "prop (pty)": value * 10,
                "fprop (pty)": value * 1.5,
                "excl (exc)": value,
            },
        ):
            pass
    data = proton.data.get(s)
    assert tree(s) == (
        "ROOT",
        {"int": 0, "float": 0.0, "prop": 0, "fprop": 0.0},  # no 0 for an exclusive metric
        [("x", {"int": 6, "float": 3.0, "prop": 30, "fprop": 4.5, "excl": 6}, [])],
    )
    node = find(data[0], "x")["metrics"]
    assert type(node["int"]) is int and type(node["float"]) is float
    aggregation = data[0]["proton_metadata"]["metric_aggregation"]
    assert sorted(aggregation) == ["exclusive", "property"]
    assert aggregation["exclusive"] == ["excl"]
    assert sorted(aggregation["property"]) == ["fprop", "prop"]


def test_exclusive_and_property_suffixes_are_stripped_in_the_written_file(tmp_path):
    s = proton.start("suffix")
    with proton.scope("x", {"e (exc)": 2, "p (pty)": 1.0}):
        pass
    with proton.scope("x", {"e (exc)": 3, "p (pty)": 4.0}):
        pass
    proton.finalize(s)
    data = load_hatchet(tmp_path / "suffix.hatchet")
    assert find(data[0], "x")["metrics"] == {"e": 5, "p": 4.0}
    aggregation = data[0]["proton_metadata"]["metric_aggregation"]
    assert aggregation == {"exclusive": ["e"], "property": ["p"]}


def test_string_and_list_metrics():
    s = proton.start("strlist")
    with proton.scope("x", {"s": "first", "l": [1, 2.5]}):
        pass
    with proton.scope("x", {"s": "second", "l": (1, 0.5)}):
        pass
    assert find(proton.data.get(s)[0], "x")["metrics"] == {"s": "second", "l": [2.0, 3.0]}


def test_metrics_stay_on_the_node_they_were_added_to():
    s = proton.start("excl")
    with proton.scope("test0", {"a": 1.0}):
        with proton.scope("test1", {"b": 1.0}):
            pass
    assert tree(s) == (
        "ROOT",
        {"a": 0.0, "b": 0.0},
        [("test0", {"a": 1.0}, [("test1", {"b": 1.0}, [])])],
    )


def test_scope_when_profiling_is_off_does_nothing():
    assert flags.profiling_on is False

    @proton.scope("decorated", {"n": 1})
    def f():
        return 7

    with proton.scope("x", {"n": 1}):
        with proton.cpu_timed_scope("y"):
            assert f() == 7
    with proton.state("st"):
        pass
    proton.enter_state("st2")
    proton.exit_state()
    assert proton.enter_scope("manual") == -1
    assert proton.exit_scope("manual") == -1
    assert proton.exit_scope() == -1  # no error even though nothing is open
    assert proton.context.depth() is None
    # Nothing leaked into a session started afterwards.
    s = proton.start("after")
    assert proton.context.depth(s) == 0
    with proton.scope("z"):
        pass
    assert tree(s) == ("ROOT", {}, [("z", {}, [])])


def test_scope_entered_before_start_is_not_closed_after_start():
    sc = proton.scope("early")
    sc.__enter__()
    s = proton.start("late")
    sc.__exit__(None, None, None)  # does not pop anything
    with pytest.raises(proton.ScopeError):
        proton.exit_scope()
    assert tree(s) == ("ROOT", {}, [])


# ---------------------------------------------------------------- cpu_timed_scope


def test_cpu_timed_scope_records_cpu_time_as_exclusive_int():
    s = proton.start("cpu")
    with proton.cpu_timed_scope("outer", {"n": 1}):
        with proton.cpu_timed_scope("inner"):
            sum(range(1000))
    data = proton.data.get(s)
    outer = find(data[0], "outer")["metrics"]
    inner = find(data[0], "outer", "inner")["metrics"]
    assert sorted(outer) == ["cpu_time (ns)", "n"]
    assert outer["n"] == 1
    assert sorted(inner) == ["cpu_time (ns)"]
    for value in (outer["cpu_time (ns)"], inner["cpu_time (ns)"]):
        assert type(value) is int and value > 0
    assert outer["cpu_time (ns)"] >= inner["cpu_time (ns)"]  # outer encloses inner
    # Exclusive: ROOT has no cpu_time of its own, and no 0 is written for it there.
    assert data[0]["metrics"] == {"n": 0}
    assert data[0]["proton_metadata"]["metric_aggregation"]["exclusive"] == ["cpu_time (ns)"]


def test_cpu_timed_scope_as_decorator_accumulates():
    s = proton.start("cpudeco")

    @proton.cpu_timed_scope("timed")
    def f():
        return 1

    assert f() + f() == 2
    metrics = find(proton.data.get(s)[0], "timed")["metrics"]
    assert list(metrics) == ["cpu_time (ns)"]
    assert type(metrics["cpu_time (ns)"]) is int and metrics["cpu_time (ns)"] > 0


def test_cpu_timed_scope_rejects_the_reserved_metric_name():
    with pytest.raises(proton.ConfigError, match=r"The metric name 'cpu_time' is reserved\."):
        proton.cpu_timed_scope("x", {"cpu_time": 1})
    with pytest.raises(ValueError):
        proton.cpu_timed_scope("x", {"cpu_time": 1.0})
    proton.cpu_timed_scope("x", {"cpu_time_other": 1})  # only the exact key is reserved


# ---------------------------------------------------------------- enter_scope / exit_scope


def test_enter_and_exit_scope_return_matching_ids():
    s = proton.start("ids")
    a = proton.enter_scope("a")
    b = proton.enter_scope("b")
    assert isinstance(a, int) and isinstance(b, int)
    assert a >= 0 and b >= 0 and a != b
    assert proton.context.depth(s) == 2
    assert proton.exit_scope("b") == b
    assert proton.exit_scope() == a  # no name: the innermost scope
    c = proton.enter_scope("a")
    assert c not in (a, b)
    assert proton.exit_scope("a") == c
    assert tree(s) == ("ROOT", {}, [("a", {}, [("b", {}, [])])])


def test_exit_scope_adds_metrics_on_exit():
    s = proton.start("exitm")
    proton.enter_scope("a", metrics={"x": 1})
    proton.exit_scope("a", metrics={"b": 1.0})
    proton.enter_scope("a")
    proton.exit_scope(metrics={"b": 2.0, "x": 2})
    assert tree(s) == ("ROOT", {"x": 0, "b": 0.0}, [("a", {"x": 3, "b": 3.0}, [])])


def test_exit_scope_name_mismatch_raises_and_leaves_the_stack_usable():
    s = proton.start("mismatch")
    outer = proton.enter_scope("outer")
    inner = proton.enter_scope("inner")
    with pytest.raises(proton.ScopeError) as info:
        proton.exit_scope("outer")
    assert isinstance(info.value, ValueError)
    assert (
        "Scope name mismatch: exit_scope('outer') but the innermost open scope is 'inner'"
        in str(info.value)
    )
    assert proton.context.depth(s) == 2
    assert proton.exit_scope("inner") == inner
    assert proton.exit_scope("outer") == outer
    assert proton.context.depth(s) == 0
    assert tree(s) == ("ROOT", {}, [("outer", {}, [("inner", {}, [])])])


def test_exit_scope_without_enter_raises_scope_error():
    proton.start("noenter")
    with pytest.raises(proton.ScopeError, match=r"exit_scope\('x'\) called with no open scope"):
        proton.exit_scope("x")
    with pytest.raises(proton.ScopeError, match=r"exit_scope\(\) called with no open scope"):
        proton.exit_scope()


# ---------------------------------------------------------------- name and metric validation


@pytest.mark.parametrize(
    "make",
    [
        lambda: proton.scope(3),
        lambda: proton.cpu_timed_scope(1.5),
        lambda: proton.enter_scope(b"bytes"),
        lambda: proton.exit_scope(3),
    ],
)
def test_non_string_scope_names_raise_a_clear_error(make):
    for profiling in (False, True):
        if profiling:
            proton.start("names")
        with pytest.raises(
            proton.ConfigError, match=r"\[PROTON\] scope name must be a str, got \w+"
        ):
            make()


def test_non_string_scope_name_error_names_the_type():
    with pytest.raises(ValueError, match="scope name must be a str, got int"):
        proton.scope(3)
    with pytest.raises(ValueError, match="state name must be a str, got list"):
        proton.state([])


@pytest.mark.parametrize(
    "make",
    [
        lambda: proton.scope(None),
        lambda: proton.cpu_timed_scope(None),
        lambda: proton.enter_scope(None),
        lambda: proton.enter_state(None),
    ],
)
def test_none_scope_name_raises_the_clear_config_error(make):
    proton.start("none_name")
    with pytest.raises(proton.ConfigError, match=r"name must be a str, got NoneType"):
        make()


def test_metric_type_change_raises_metric_type_error_naming_both_types():
    s = proton.start("types")
    with proton.scope("a", {"v": 1}):
        pass
    with pytest.raises(proton.MetricTypeError) as info:
        with proton.scope("a", {"v": "text"}):
            pytest.fail("the scope must not be entered")
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, RuntimeError)
    assert "Metric value type mismatch for 'v': current=int, new=str" in str(info.value)
    # The type belongs to the metric name in the whole session, not to one node.
    with pytest.raises(proton.MetricTypeError, match="current=int, new=str"):
        proton.enter_scope("b", metrics={"v": "text"})
    assert proton.context.depth(s) == 0
    proton.enter_scope("c")
    with pytest.raises(proton.MetricTypeError, match="current=int, new=list"):
        proton.exit_scope("c", metrics={"v": [1.0]})
    assert tree(s) == ("ROOT", {"v": 0}, [("a", {"v": 1}, []), ("c", {}, [])])


def test_ints_and_floats_of_one_metric_mix_without_loss():
    s = proton.start("numbers")
    with proton.scope("a", {"v": 1, "f": 0.5}):
        pass
    with proton.scope("a", {"v": 2.0, "f": 1}):  # converted: 2.0 is whole, 1 fits a float
        pass
    assert tree(s) == ("ROOT", {"v": 0, "f": 0.0}, [("a", {"v": 3, "f": 1.5}, [])])
    with proton.scope("b", {"v": 0.25}):  # a fraction: "v" becomes a float metric everywhere
        pass
    root, _, children = tree(s)
    assert [(name, metrics, type(metrics["v"])) for name, metrics, _ in children] == [
        ("a", {"v": 3.0, "f": 1.5}, float),
        ("b", {"v": 0.25}, float),
    ]


def test_flops_are_floats_and_bytes_ints_as_in_triton():
    s = proton.start("rule")
    with proton.scope("k", {"flops16": 4, "bytes": 8.0}):
        pass
    with proton.scope("k", {"flops16": 0.5, "bytes": 2}):
        pass
    ((_, metrics, _),) = tree(s)[2]
    assert metrics == {"flops16": 4.5, "bytes": 10}
    assert (type(metrics["flops16"]), type(metrics["bytes"])) == (float, int)


@pytest.mark.parametrize(
    "value, type_name, what",
    [
        ({}, "dict", "has an unsupported type"),
        (object(), "object", "has an unsupported type"),
        (None, "NoneType", "has an unsupported type"),
        ([1, "s"], "list", "is a list with a non-number element"),
        ([True], "list", "is a list with a non-number element"),
        (2**64, "int", "does not fit in 64 bits"),
    ],
)
def test_bad_metric_values_raise_config_error_naming_allowed_types(value, type_name, what):
    s = proton.start("bad")
    expected = (
        f"[PROTON] metric 'v' {what} (got {type_name}); allowed: int, float, str, list of numbers"
    )
    for call in (
        lambda: proton.scope("x", {"v": value}).__enter__(),
        lambda: proton.enter_scope("x", metrics={"v": value}),
    ):
        with pytest.raises(proton.ConfigError) as info:
            call()
        assert isinstance(info.value, ValueError)
        assert str(info.value) == expected
    proton.enter_scope("y")
    with pytest.raises(proton.ConfigError, match="allowed: int, float, str, list of numbers"):
        proton.exit_scope("y", metrics={"v": value})
    assert proton.exit_scope("y") >= 0
    assert tree(s) == ("ROOT", {}, [("y", {}, [])])


def test_metrics_that_are_not_a_dict_are_rejected():
    with pytest.raises(
        proton.ConfigError, match="metrics must be a dict of name -> value, got list"
    ):
        proton.scope("x", [("a", 1)])
    proton.start("notdict")
    with pytest.raises(proton.ConfigError, match="metric names must be str, got int"):
        proton.enter_scope("x", metrics={1: 1})


def test_trace_entry_and_exit_metrics_of_different_types_raise_and_keep_the_stack(tmp_path):
    # Regression: a trace event combines entry and exit metrics; an int then a string for the
    # same name used to abort the interpreter instead of raising.
    s = proton.start(str(tmp_path / "t"), data="trace")
    proton.enter_scope("s", metrics={"a": 1})
    with pytest.raises(proton.MetricTypeError, match="current=int, new=str"):
        proton.exit_scope("s", metrics={"a": "x"})
    assert proton.context.depth(s) == 1
    proton.exit_scope("s", metrics={"a": 2})
    proton.finalize(s)
    trace = json.loads((tmp_path / "t.chrome_trace").read_text())
    (event,) = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert (event["name"], event["args"]["a"]) == ("s: <a, 3>", 3)


def test_one_metric_dict_with_a_name_in_two_types_raises(tmp_path):
    s = proton.start(str(tmp_path / "t"))
    with pytest.raises(proton.MetricTypeError, match="current=int, new=str"):
        proton.enter_scope("s", metrics={"a": 1, "a (exc)": "x"})
    assert proton.context.depth(s) == 0
