"""The C/C++ API (proton/proton.h's C ABI in libprotonprof.so) and `import proton` in one process:
one core, so sessions, scopes and states started on either side are the other's too."""

import ctypes

import pytest
from proton_test_utils import find, load_hatchet, names

import proton
from proton import _C, native


class Metric(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("int_value", ctypes.c_int64),
        ("double_value", ctypes.c_double),
        ("string_value", ctypes.c_char_p),
    ]


@pytest.fixture
def lib():
    lib = ctypes.CDLL(native.library_path())
    lib.proton_last_error.restype = ctypes.c_char_p
    lib.proton_start.argtypes = [ctypes.c_char_p] * 5
    lib.proton_enter_scope.argtypes = [ctypes.c_char_p, ctypes.POINTER(Metric), ctypes.c_size_t]
    lib.proton_exit_scope.argtypes = [ctypes.c_char_p, ctypes.POINTER(Metric), ctypes.c_size_t]
    lib.proton_finalize.argtypes = [ctypes.c_int, ctypes.c_char_p]
    yield lib
    proton.finalize()


def test_extension_and_cpp_api_load_the_same_core(lib):
    # Were _C a static copy, its session would not be visible through the C ABI.
    session = proton.start("shared")
    assert lib.proton_profiling_on() == 1
    assert lib.proton_depth(session) == 0
    with proton.scope("python_outer"):
        assert lib.proton_depth(session) == 1
    proton.finalize()
    assert lib.proton_profiling_on() == 0


def test_cpp_scopes_nest_under_python_scopes_and_back(lib, tmp_path):
    path = str(tmp_path / "mixed")
    session = proton.start(path)
    flops = (Metric * 1)(Metric(b"flops", 1, 0, 2.5e9, None))
    with proton.scope("python_outer"):
        assert lib.proton_enter_scope(b"cpp_middle", flops, 1) == 0
        with proton.scope("python_inner", {"n": 1}):
            pass
        assert lib.proton_exit_scope(b"cpp_middle", None, 0) == 0
    proton.finalize(session)
    root = load_hatchet(path + ".hatchet")[0]
    assert names(root) == (
        "ROOT",
        [("python_outer", [("cpp_middle", [("python_inner", [])])])],
    )
    assert find(root, "python_outer", "cpp_middle")["metrics"] == {"flops": 2.5e9}


def test_session_started_from_cpp_is_finalized_from_python(lib, tmp_path):
    path = str(tmp_path / "from_cpp")
    session = lib.proton_start(path.encode(), None, None, None, None)
    assert session >= 0, lib.proton_last_error()
    assert session in _C.live_sessions()
    with proton.scope("python_scope"):
        pass
    proton.finalize(session)
    assert names(load_hatchet(path + ".hatchet")[0]) == ("ROOT", [("python_scope", [])])
    assert session not in _C.live_sessions()
    assert lib.proton_finalize(session, b"") == 0  # already written: ignored, as in Python
    assert lib.proton_finalize(session + 1000, b"") == -1  # never existed
    assert b"has not been initialized" in lib.proton_last_error()


def test_scope_name_mismatch_across_the_boundary_is_an_error_on_both_sides(lib, tmp_path):
    proton.start(str(tmp_path / "mismatch"))
    assert lib.proton_enter_scope(b"cpp", None, 0) == 0
    with pytest.raises(proton.ProfilerError):
        proton.exit_scope("not_cpp")
    assert lib.proton_exit_scope(b"also_wrong", None, 0) == -1
    assert lib.proton_last_error().startswith(b"[PROTON]")
    assert lib.proton_exit_scope(b"cpp", None, 0) == 0


def test_command_line_session_is_seen_by_python(lib, tmp_path):
    session = proton.start(str(tmp_path / "owned"))
    _C.set_command_line_session(session)
    try:
        assert lib.proton_command_line_session() == session
        assert lib.proton_start(b"other", None, None, None, None) == session
    finally:
        _C.set_command_line_session(-1)
