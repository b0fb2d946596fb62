"""Session lifecycle: start, activate, deactivate, finalize and the profile decorator."""

# Nested `with` blocks are kept: the nesting is what these tests check.

import json

import msgpack
import proton
import pytest
from proton import _C
from proton.flags import flags
from proton_test_utils import leftover_tmp_files, load_hatchet, run_python, shape, tree

# ---------------------------------------------------------------- start


def test_start_with_default_name_writes_proton_hatchet_in_cwd(tmp_path):
    session = proton.start()
    with proton.scope("work", {"n": 1}):
        pass
    proton.finalize()
    assert isinstance(session, int)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proton.hatchet"]
    assert shape(load_hatchet(tmp_path / "proton.hatchet")[0]) == (
        "ROOT",
        {"n": 0},
        [("work", {"n": 1}, [])],
    )


def test_default_profile_name_is_proton():
    assert proton.DEFAULT_PROFILE_NAME == "proton"


def test_session_ids_count_from_zero_and_are_never_reused(tmp_path):
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import proton\n"
        "a = proton.start('a'); b = proton.start('b')\n"
        "proton.finalize()\n"
        "c = proton.start('a'); proton.finalize(c)\n"
        "d = proton.start('d'); proton.finalize()\n"
        "print(a, b, c, d)\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1", "2", "3"]


def test_session_id_after_finalize_is_new_even_for_the_same_path():
    first = proton.start("same")
    proton.finalize(first)
    second = proton.start("same")
    third = proton.start("other")
    assert second > first
    assert third == second + 1


def test_same_path_returns_the_same_session_and_reactivates_it(tmp_path):
    s = proton.start("dup")
    with proton.scope("a", {"n": 1}):
        pass
    proton.deactivate(s)
    with proton.scope("ignored", {"n": 1}):
        pass
    again = proton.start("dup", data="trace")  # other arguments are ignored
    assert again == s
    with proton.scope("a", {"n": 1}):
        pass
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.hatchet"]
    assert shape(load_hatchet(tmp_path / "dup.hatchet")[0]) == (
        "ROOT",
        {"n": 0},
        [("a", {"n": 2}, [])],
    )


def test_start_accepts_a_path_object(tmp_path):
    (tmp_path / "sub").mkdir()
    s = proton.start(tmp_path / "sub" / "prof")
    with proton.scope("x"):
        pass
    proton.finalize(s)
    assert shape(load_hatchet(tmp_path / "sub" / "prof.hatchet")[0]) == (
        "ROOT",
        {},
        [("x", {}, [])],
    )


def test_start_with_a_non_string_name_raises_type_error():
    with pytest.raises(TypeError, match="name must be a str or path, got int"):
        proton.start(123)
    assert _C.live_sessions() == []


def test_name_that_already_has_the_extension_is_not_doubled(tmp_path):
    proton.start("named.hatchet")
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["named.hatchet"]


def test_start_returns_none_when_proton_disable_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("PROTON_DISABLE", "1")
    assert proton.start("disabled") is None
    assert flags.profiling_on is False
    assert _C.live_sessions() == []
    with proton.scope("x", {"n": 1}):
        pass
    assert proton.enter_scope("y") == -1
    proton.finalize()
    assert list(tmp_path.iterdir()) == []


def test_start_returns_none_under_the_command_line(tmp_path):
    flags.command_line = True
    assert proton.start("cli") is None
    assert _C.live_sessions() == []
    flags.command_line = False
    proton.finalize()
    assert list(tmp_path.iterdir()) == []


def test_start_sets_profiling_on():
    assert flags.profiling_on is False
    proton.start("on")
    assert flags.profiling_on is True


def test_failed_start_leaves_no_session():
    with pytest.raises(proton.ConfigError):
        proton.start("bad", data="bogus")
    with pytest.raises(ValueError, match=r"Unsupported hook: 'x'"):
        proton.start("bad", hook="x")
    assert _C.live_sessions() == []
    assert flags.profiling_on is False


# ---------------------------------------------------------------- activate / deactivate


def test_activate_and_deactivate_one_and_all_sessions():
    a = proton.start("a")
    b = proton.start("b")
    with proton.scope("both", {"n": 1}):
        pass
    proton.deactivate(a)
    with proton.scope("only_b", {"n": 1}):
        pass
    proton.deactivate()
    with proton.scope("none", {"n": 1}):
        pass
    proton.activate(a)
    with proton.scope("only_a", {"n": 1}):
        pass
    proton.activate()
    with proton.scope("both_again", {"n": 1}):
        pass
    assert tree(a) == (
        "ROOT",
        {"n": 0},
        [("both", {"n": 1}, []), ("only_a", {"n": 1}, []), ("both_again", {"n": 1}, [])],
    )
    assert tree(b) == (
        "ROOT",
        {"n": 0},
        [("both", {"n": 1}, []), ("only_b", {"n": 1}, []), ("both_again", {"n": 1}, [])],
    )


def test_scopes_and_metrics_while_deactivated_are_not_recorded():
    s = proton.start("deact")
    with proton.scope("test0", {"a": 1.0}):
        pass
    proton.deactivate(s)
    with proton.scope("test1", {"a": 1.0}):
        assert proton.enter_scope("manual") >= 0  # ids are still handed out
        proton.exit_scope("manual", metrics={"a": 5.0})
    proton.activate(s)
    with proton.scope("test2", {"a": 1.0}):
        pass
    assert tree(s) == ("ROOT", {"a": 0.0}, [("test0", {"a": 1.0}, []), ("test2", {"a": 1.0}, [])])


def test_activate_and_deactivate_are_idempotent():
    s = proton.start("idem")
    proton.activate(s)
    proton.activate(s)
    with proton.scope("x"):
        pass
    proton.deactivate(s)
    proton.deactivate(s, flushing=True)
    with proton.scope("y"):
        pass
    assert tree(s) == ("ROOT", {}, [("x", {}, [])])


# ---------------------------------------------------------------- finalize


def test_finalize_one_session_keeps_the_others_recording(tmp_path):
    a = proton.start("a")
    b = proton.start("b")
    with proton.scope("first"):
        pass
    proton.finalize(a)
    assert (tmp_path / "a.hatchet").exists()
    assert not (tmp_path / "b.hatchet").exists()
    assert flags.profiling_on is True
    with proton.scope("second"):
        pass
    proton.finalize(b)
    assert flags.profiling_on is False
    assert shape(load_hatchet(tmp_path / "a.hatchet")[0]) == ("ROOT", {}, [("first", {}, [])])
    assert shape(load_hatchet(tmp_path / "b.hatchet")[0]) == (
        "ROOT",
        {},
        [("first", {}, []), ("second", {}, [])],
    )


def test_finalize_all_writes_every_session_and_turns_profiling_off(tmp_path):
    proton.start("a")
    proton.start("b", data="trace")
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hatchet", "b.chrome_trace"]
    assert flags.profiling_on is False
    assert _C.live_sessions() == []


def test_finalizing_twice_is_harmless(tmp_path):
    s = proton.start("twice")
    proton.finalize(s)
    content = (tmp_path / "twice.hatchet").read_text()
    proton.finalize(s)
    proton.finalize()
    proton.finalize(s, "hatchet_msgpack")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["twice.hatchet"]
    assert (tmp_path / "twice.hatchet").read_text() == content


def test_finalized_session_rejects_further_calls():
    s = proton.start("gone")
    proton.finalize(s)
    for call in (
        lambda: proton.activate(s),
        lambda: proton.deactivate(s),
        lambda: proton.data.get(s),
        lambda: proton.data.advance_phase(s),
    ):
        with pytest.raises(proton.SessionError, match=f"Session has not been initialized: {s}"):
            call()


@pytest.mark.parametrize("fmt", ["", "hatchet", "HATCHET", "Hatchet"])
def test_finalize_tree_as_hatchet_json(tmp_path, fmt):
    s = proton.start("fmt")
    with proton.scope("a", {"n": 3}):
        pass
    expected = proton.data.get(s)
    proton.finalize(s, output_format=fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fmt.hatchet"]
    assert load_hatchet(tmp_path / "fmt.hatchet") == expected


def test_finalize_tree_as_hatchet_msgpack(tmp_path):
    s = proton.start("mp")
    with proton.scope("a", {"n": 3, "f": 0.5}):
        pass
    expected = proton.data.get(s)
    proton.finalize(s, output_format="hatchet_msgpack")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mp.hatchet_msgpack"]
    raw = (tmp_path / "mp.hatchet_msgpack").read_bytes()
    assert msgpack.unpackb(raw, raw=False, strict_map_key=False) == expected


@pytest.mark.parametrize("fmt", ["", "chrome_trace"])
def test_finalize_trace_as_chrome_trace(tmp_path, fmt):
    s = proton.start("tr", data="trace")
    with proton.scope("a"):
        pass
    proton.finalize(s, output_format=fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tr.chrome_trace"]
    trace = json.loads((tmp_path / "tr.chrome_trace").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == ["a"]


def test_finalize_with_an_unknown_format_raises_config_error_and_keeps_the_session(tmp_path):
    s = proton.start("unk")
    with pytest.raises(proton.ConfigError) as info:
        proton.finalize(s, "bogus")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, RuntimeError)
    assert "Unknown output format: 'bogus'" in str(info.value)
    assert "Allowed values: hatchet, hatchet_msgpack, chrome_trace" in str(info.value)
    with pytest.raises(proton.ConfigError, match="Unknown output format"):
        proton.finalize(None, "bogus")
    assert _C.live_sessions() == [s]
    assert list(tmp_path.iterdir()) == []
    proton.finalize(s)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unk.hatchet"]


def test_finalize_tree_data_as_chrome_trace_is_an_error(tmp_path):
    s = proton.start("tree")
    with pytest.raises(proton.ConfigError) as info:
        proton.finalize(s, "chrome_trace")
    assert isinstance(info.value, ValueError)
    assert "Output format 'chrome_trace' cannot be written for data='tree'" in str(info.value)
    assert list(tmp_path.iterdir()) == []
    assert _C.live_sessions() == [s]


@pytest.mark.parametrize("fmt", ["hatchet", "hatchet_msgpack"])
def test_finalize_trace_data_as_hatchet_is_an_error(tmp_path, fmt):
    s = proton.start("trace", data="trace")
    with pytest.raises(
        proton.ConfigError, match=f"Output format '{fmt}' cannot be written for data='trace'"
    ):
        proton.finalize(s, fmt)
    assert list(tmp_path.iterdir()) == []


def test_finalize_writes_atomically_without_leftover_temporary_files(tmp_path):
    s = proton.start("atomic")
    with proton.scope("a"):
        pass
    (tmp_path / "atomic.hatchet").write_text("old content")
    proton.finalize(s)
    assert leftover_tmp_files(tmp_path) == []
    assert shape(load_hatchet(tmp_path / "atomic.hatchet")[0]) == ("ROOT", {}, [("a", {}, [])])


def test_finalize_to_a_missing_directory_raises_output_error_and_keeps_the_session(tmp_path):
    s = proton.start(str(tmp_path / "missing_dir" / "x"))
    with proton.scope("before"):
        pass
    with pytest.raises(proton.OutputError) as info:
        proton.finalize(s)
    assert isinstance(info.value, OSError)
    assert isinstance(info.value, RuntimeError)
    assert "Cannot write profile to" in str(info.value)
    assert "missing_dir/x.hatchet" in str(info.value)
    assert "No such file or directory" in str(info.value)
    # The session is still live and recording.
    assert _C.live_sessions() == [s]
    assert flags.profiling_on is True
    with proton.scope("after"):
        pass
    assert tree(s) == ("ROOT", {}, [("before", {}, []), ("after", {}, [])])
    # Once the problem is fixed, finalize succeeds.
    (tmp_path / "missing_dir").mkdir()
    proton.finalize(s)
    assert leftover_tmp_files(tmp_path) == []
    assert shape(load_hatchet(tmp_path / "missing_dir" / "x.hatchet")[0]) == (
        "ROOT",
        {},
        [("before", {}, []), ("after", {}, [])],
    )


def test_finalize_onto_a_directory_fails_and_removes_the_temporary_file(tmp_path):
    s = proton.start("blocked")
    (tmp_path / "blocked.hatchet").mkdir()
    with pytest.raises(proton.OutputError, match="Cannot rename"):
        proton.finalize(s)
    assert leftover_tmp_files(tmp_path) == []
    (tmp_path / "blocked.hatchet").rmdir()
    proton.finalize(s)
    assert shape(load_hatchet(tmp_path / "blocked.hatchet")[0]) == ("ROOT", {}, [])


def test_finalize_all_writes_the_good_sessions_even_when_one_fails(tmp_path):
    bad = proton.start(str(tmp_path / "nodir" / "bad"))
    good = proton.start("good")
    with pytest.raises(proton.OutputError):
        proton.finalize()
    assert (tmp_path / "good.hatchet").exists()
    assert _C.live_sessions() == [bad]
    (tmp_path / "nodir").mkdir()
    proton.finalize()
    assert (tmp_path / "nodir" / "bad.hatchet").exists()
    assert good != bad


def test_name_dash_writes_the_profile_to_stdout(tmp_path, capfd):
    s = proton.start("-")
    with proton.scope("out", {"n": 7}):
        pass
    capfd.readouterr()
    proton.finalize(s)
    out, _ = capfd.readouterr()
    data = json.loads(out)
    assert shape(data[0]) == ("ROOT", {"n": 0}, [("out", {"n": 7}, [])])
    assert data[0]["proton_metadata"]["session"] == "-"
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- profile decorator


def test_profile_decorator_bare(tmp_path):
    @proton.profile
    def work(x):
        with proton.scope("inside", {"n": 1}):
            return x + 1

    assert work.__name__ == "work"
    assert work(1) == 2
    assert work(2) == 3  # the same session ("proton") again
    with proton.scope("after_call", {"n": 1}):  # deactivated after the call
        pass
    assert not (tmp_path / "proton.hatchet").exists()
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proton.hatchet"]
    assert shape(load_hatchet(tmp_path / "proton.hatchet")[0]) == (
        "ROOT",
        {"n": 0},
        [("inside", {"n": 2}, [])],
    )


def test_profile_decorator_with_arguments(tmp_path):
    @proton.profile(name="custom", data="trace")
    def work():
        with proton.scope("inside"):
            pass
        return "done"

    assert work() == "done"
    with proton.scope("after_call"):
        pass
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.chrome_trace"]
    trace = json.loads((tmp_path / "custom.chrome_trace").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"] == ["inside"]


def test_profile_decorator_deactivates_when_the_function_raises(tmp_path):
    @proton.profile(name="raising")
    def work():
        with proton.scope("inside"):
            raise KeyError("boom")

    with pytest.raises(KeyError):
        work()
    with proton.scope("after_call"):
        pass
    proton.finalize()
    assert shape(load_hatchet(tmp_path / "raising.hatchet")[0]) == (
        "ROOT",
        {},
        [("inside", {}, [])],
    )


def test_profile_decorator_does_nothing_under_proton_disable(tmp_path, monkeypatch):
    monkeypatch.setenv("PROTON_DISABLE", "1")

    @proton.profile
    def work():
        return 5

    assert work() == 5
    proton.finalize()
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- start-up warning and exit handler


def test_start_without_backend_warns_once_per_process(tmp_path):
    code = (
        "import json, warnings\n"
        "import proton\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    proton.start('a'); proton.finalize()\n"
        "    proton.start('b'); proton.finalize()\n"
        "    proton.start('c'); proton.start('d'); proton.finalize()\n"
        "print(json.dumps([[w.category.__name__, str(w.message), w.filename] for w in caught]))\n"
    )
    result = run_python(code, tmp_path, env={"PROTON_FORCE_NO_GPU": "1"})
    assert result.returncode == 0, result.stderr
    caught = json.loads(result.stdout)
    assert len(caught) == 1
    category, message, filename = caught[0]
    assert category == "RuntimeWarning"
    assert "CPU scopes" in message
    assert message.startswith("[PROTON] ")
    assert filename == "<string>"  # attributed to the caller of start()


def test_exit_handler_writes_unfinalized_sessions_and_keeps_the_exit_code(tmp_path):
    code = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "import proton\n"
        "proton.start('atexit')\n"
        "proton.enter_scope('open')\n"
        "with proton.scope('inner', {'n': 4}):\n"
        "    pass\n"
        "sys.exit(3)\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 3
    assert "[PROTON] profile written to atexit.hatchet" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atexit.hatchet"]
    assert shape(load_hatchet(tmp_path / "atexit.hatchet")[0]) == (
        "ROOT",
        {"n": 0},
        [("open", {}, [("inner", {"n": 4}, [])])],
    )


def test_exit_handler_does_nothing_after_finalize(tmp_path):
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import proton\n"
        "proton.start('done'); proton.finalize()\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0
    assert result.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.hatchet"]


def test_exit_handler_keeps_a_clean_exit_when_writing_fails(tmp_path):
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import proton\n"
        "proton.start('no/such/dir/x')\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0
    assert "[PROTON] could not write the profile at exit" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_start_with_warnings_as_errors_leaves_a_consistent_state(tmp_path):
    code = (
        "import warnings\n"
        "import proton\n"
        "from proton.flags import flags\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    proton.start('w')\n"
        "except RuntimeWarning:\n"
        "    pass\n"
        "print(bool(proton._C.live_sessions()), flags.profiling_on)\n"
        "proton.finalize()\n"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    live, profiling_on = result.stdout.split()
    assert live == profiling_on
