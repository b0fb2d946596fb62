"""States (a non-nesting tag appended to the context) and context.depth."""

# Nested `with` blocks are kept: the nesting is what these tests check.
# ruff: noqa: SIM117

import proton
import pytest
from proton.state import COMPUTE_METADATA_SCOPE_NAME
from proton_test_utils import tree


def test_metrics_of_a_scope_entered_under_a_state_land_on_a_state_child():
    s = proton.start("state")
    with proton.scope("test0"):
        with proton.state("state"):
            with proton.scope("test1", {"a": 1.0}):
                pass
    assert tree(s) == (
        "ROOT",
        {"a": 0.0},
        [("test0", {}, [("test1", {}, [("state", {"a": 1.0}, [])])])],
    )


def test_scope_without_metrics_under_a_state_has_no_state_child():
    s = proton.start("nometrics")
    with proton.state("st"):
        with proton.scope("plain"):
            pass
    assert tree(s) == ("ROOT", {}, [("plain", {}, [])])


def test_exit_scope_metrics_under_a_state_land_on_the_state_child():
    s = proton.start("exitstate")
    proton.enter_state("st")
    proton.enter_scope("m")
    proton.exit_scope("m", metrics={"b": 2})
    proton.exit_state()
    proton.enter_scope("m")
    proton.exit_scope("m", metrics={"b": 3})
    assert tree(s) == ("ROOT", {"b": 0}, [("m", {"b": 3}, [("st", {"b": 2}, [])])])


def test_state_is_not_a_scope_and_does_not_change_depth():
    s = proton.start("depthstate")
    with proton.state("st"):
        assert proton.context.depth(s) == 0
        with proton.scope("x"):
            assert proton.context.depth(s) == 1


def test_state_as_decorator():
    s = proton.start("statedeco")

    @proton.state("tagged")
    def f():
        with proton.scope("k", {"n": 1}):
            return 4

    assert f.__name__ == "f"
    assert f() == 4
    with proton.scope("k", {"n": 1}):
        pass
    assert tree(s) == ("ROOT", {"n": 0}, [("k", {"n": 1}, [("tagged", {"n": 1}, [])])])


def test_states_do_not_nest_the_inner_one_replaces_the_outer_one():
    s = proton.start("nonnest")
    with proton.state("s1"):
        with proton.state("s2"):
            with proton.scope("k", {"n": 1}):
                pass
        # Exiting s2 clears the tag: s1 is not restored.
        with proton.scope("k", {"n": 10}):
            pass
    assert tree(s) == ("ROOT", {"n": 0}, [("k", {"n": 10}, [("s2", {"n": 1}, [])])])


def test_metadata_state_uses_the_launch_metadata_name():
    assert COMPUTE_METADATA_SCOPE_NAME == "__proton_launch_metadata"
    assert proton.metadata_state().name == "__proton_launch_metadata"
    s = proton.start("meta")
    with proton.metadata_state():
        with proton.scope("k", {"n": 1}):
            pass
    assert tree(s) == ("ROOT", {"n": 0}, [("k", {}, [("__proton_launch_metadata", {"n": 1}, [])])])


def test_state_entered_while_profiling_is_off_is_ignored():
    proton.enter_state("early")
    s = proton.start("late")
    with proton.scope("k", {"n": 1}):
        pass
    proton.exit_state()
    assert tree(s) == ("ROOT", {"n": 0}, [("k", {"n": 1}, [])])


def test_state_name_must_be_a_string():
    with pytest.raises(proton.ConfigError, match="state name must be a str, got int"):
        proton.state(3)
    with pytest.raises(proton.ConfigError, match="state name must be a str, got int"):
        proton.enter_state(3)


# ---------------------------------------------------------------- context.depth


def test_depth_is_none_when_profiling_is_off():
    assert proton.context.depth() is None
    assert proton.context.depth(0) is None
    s = proton.start("d")
    proton.finalize(s)
    assert proton.context.depth(s) is None


def test_depth_counts_nested_scopes():
    s = proton.start("depth")
    assert proton.context.depth(s) == 0
    proton.enter_scope("a")
    assert proton.context.depth(s) == 1
    with proton.scope("b"):
        assert proton.context.depth(s) == 2
        with proton.cpu_timed_scope("c"):
            assert proton.context.depth(s) == 3
        assert proton.context.depth(s) == 2
    assert proton.context.depth(s) == 1
    proton.exit_scope("a")
    assert proton.context.depth(s) == 0


def test_depth_with_session_none_is_none():
    proton.start("dn")
    assert proton.context.depth(None) is None


def test_depth_counts_only_scopes_recorded_in_that_session():
    a = proton.start("a")
    proton.enter_scope("outer")
    b = proton.start("b")
    proton.enter_scope("inner")
    assert proton.context.depth(a) == 2
    assert proton.context.depth(b) == 1
    proton.deactivate(a)
    proton.enter_scope("b_only")
    assert proton.context.depth(a) == 2
    assert proton.context.depth(b) == 2
    proton.exit_scope("b_only")
    proton.exit_scope("inner")
    proton.exit_scope("outer")
    assert proton.context.depth(a) == 0
    assert proton.context.depth(b) == 0
    assert tree(a) == ("ROOT", {}, [("outer", {}, [("inner", {}, [])])])
    assert tree(b) == ("ROOT", {}, [("inner", {}, [("b_only", {}, [])])])


def test_depth_of_an_unknown_session_raises_session_error():
    proton.start("known")
    with pytest.raises(proton.SessionError, match="Session has not been initialized: 99"):
        proton.context.depth(99)
