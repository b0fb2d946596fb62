"""context="python": the CPython frame walker (frame format, the profiler's own frames left
out, the stack cache) and where a python session files scopes. No GPU needed: kernels are
covered by tests/gpu/test_python_context.py."""

import inspect
import os
import sys
import sysconfig
import threading

import proton
from proton import _C
from proton_test_utils import find

PROTON_DIR = os.path.dirname(os.path.abspath(proton.__file__)) + os.sep
HERE = os.path.abspath(__file__)


def line():
    """The caller's current line."""
    return inspect.currentframe().f_back.f_lineno


def frames_here():
    return _C.python_stack_names()


def test_frames_are_file_line_function_outermost_first():
    expected_call_line = line() + 1
    names = frames_here()
    helper_line = inspect.getsourcelines(frames_here)[1] + 1
    assert names[-1] == f"{__file__}:{helper_line}@frames_here"
    assert names[-2] == f"{__file__}:{expected_call_line}@" + (
        "test_frames_are_file_line_function_outermost_first"
    )
    # Outermost first: pytest's entry point comes before this test.
    assert any("pytest" in n or "_pytest" in n for n in names[:-2])
    assert all(n.count("@") >= 1 and ":" in n for n in names)


def test_frames_of_the_profiler_itself_are_left_out():
    @proton.scope("decorated")  # proton/scope.py's wrapper runs between the two frames
    def inner():
        return _C.python_stack_names()

    call_line = line() + 1
    names = inner()
    assert not [n for n in names if n.startswith(PROTON_DIR)], names
    assert names[-1].endswith("@inner")
    assert names[-2] == f"{__file__}:{call_line}@test_frames_of_the_profiler_itself_are_left_out"


def test_thread_started_while_profiling_shows_no_profiler_frames():
    proton.start("threads", context="python")
    seen = []
    t = threading.Thread(target=lambda: seen.append(_C.python_stack_names()))
    t.start()  # proton wraps Thread.run while profiling (proton/_threads.py)
    t.join()
    names = seen[0]
    assert not [n for n in names if n.startswith(PROTON_DIR)], names
    assert names[-1].endswith("@<lambda>")
    assert any(n.endswith("@run") for n in names)  # threading.Thread.run, not ours


def test_same_stack_gives_the_same_interned_stack_and_another_line_another():
    keys_a = [_C.python_stack_key() for _ in range(3)]  # one call site, three times
    key_b = _C.python_stack_key()  # the next line: another stack
    assert keys_a[0] != 0
    assert keys_a[0] == keys_a[1] == keys_a[2]
    assert key_b != keys_a[0]


def test_same_lines_reached_again_give_the_same_names():
    def at(depth):
        if depth == 0:
            return _C.python_stack_names()
        return at(depth - 1)

    runs = [at(2) for _ in range(3)]  # one call site: the cached stack each time
    assert runs[0] == runs[1] == runs[2]
    leaf, middle, top = runs[0][-1], runs[0][-2], runs[0][-3]
    assert [n.rsplit("@", 1)[1] for n in (leaf, middle, top)] == ["at", "at", "at"]
    assert middle == top and leaf != middle  # recursion line twice, then the leaf line


def test_a_thread_that_released_the_gil_gets_the_same_stack_and_finds_it_again_without_it():
    # A launch inside a torch operator runs with the GIL released: the first capture of a stack
    # takes the GIL back to walk it; the same stack again is found without it (CPython 3.11 to
    # 3.13 with the GIL, whose interpreter frames Proton reads; others always take it back).
    def at(depth, release):
        if depth == 0:
            names = _C.python_stack_names(release_gil=release)
            return names, _C.python_stack_key(release_gil=release)
        return at(depth - 1, release)

    before = _C.python_stacks_seen_without_gil()
    runs = [at(3, True) for _ in range(3)]  # one call site, the GIL released each time
    names = runs[0][0]
    assert len(set(names[-4:-1])) == 1 and names[-1] != names[-2], names  # 3 calls, the leaf
    assert all(n.endswith("@at") for n in names[-4:]), names
    assert all(r == runs[0] for r in runs)
    held = at(3, False)  # the GIL held: the same frames below the call site
    assert held[0][-4:] == names[-4:]
    found = _C.python_stacks_seen_without_gil() - before
    free_threaded = sysconfig.get_config_var("Py_GIL_DISABLED")
    if (3, 11) <= sys.version_info[:2] <= (3, 13) and not free_threaded:
        # Two captures per run (names, then the key: two instructions, two cache entries);
        # the first run walks both with the GIL, the two others find both without it.
        assert found == 4, found
    else:
        assert found == 0, found


def test_python_session_files_scope_metrics_under_the_frames_of_its_entry():
    s = proton.start("pyscope", context="python")
    entered_at = line() + 1
    with proton.scope("work", {"n": 1}):
        pass
    proton.finalize(s)
    root = _load("pyscope.hatchet")
    caller = f"{__file__}:{entered_at}@test_python_session_files_scope_metrics_under_the_frames_of_its_entry"
    path = _path_to(root, "work")
    assert path[-2:] == [caller, "work"], path
    assert not [n for n in path if n.startswith(PROTON_DIR)]
    assert find_by_path(root, path)["metrics"]["n"] == 1


def test_shadow_session_next_to_a_python_one_sees_no_frames():
    py = proton.start("mixed_py", context="python")
    sh = proton.start("mixed_shadow")
    with proton.scope("both", {"n": 2}):
        pass
    proton.finalize(py)
    proton.finalize(sh)
    shadow_root = _load("mixed_shadow.hatchet")
    assert find(shadow_root, "both")["metrics"]["n"] == 2
    assert _path_to(_load("mixed_py.hatchet"), "both")[-1] == "both"
    assert len(_path_to(_load("mixed_py.hatchet"), "both")) > 2


# ---- helpers ---------------------------------------------------------------------------


def _load(path):
    import json

    with open(path) as f:
        return json.load(f)[0]


def _path_to(node, name, prefix=()):
    """Names from below ROOT down to the first node called name (depth first)."""
    for child in node["children"]:
        here = [*prefix, child["frame"]["name"]]
        if child["frame"]["name"] == name:
            return here
        found = _path_to(child, name, here)
        if found:
            return found
    return None


def find_by_path(root, path):
    return find(root, *path)
