"""Scopes from many threads, and threads inheriting the scopes open where they start."""

# Nested `with` blocks are kept: the nesting is what these tests check.

import threading

import proton
import pytest
from proton_test_utils import shape, tree

THREADS = 8
ENTRIES = 10_000


def _run_threads(target, count):
    barrier = threading.Barrier(count)
    errors = []

    def body(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 (reported in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_many_threads_record_exact_counts():
    s = proton.start("threads")

    def work(i):
        for _ in range(ENTRIES):
            with proton.scope(f"t{i}", {"n": 1}):
                pass

    _run_threads(work, THREADS)
    root = proton.data.get(s)[0]
    assert sorted(shape(c) for c in root["children"]) == sorted(
        (f"t{i}", {"n": ENTRIES}, []) for i in range(THREADS)
    )
    assert root["metrics"] == {"n": 0}


def test_many_threads_sharing_one_scope_name_sum_exactly():
    s = proton.start("shared")

    def work(i):
        for _ in range(ENTRIES // 10):
            with proton.scope("shared", {"n": 1, "f": 0.5}):
                proton.enter_scope("inner")
                proton.exit_scope("inner", metrics={"k": 2})

    _run_threads(work, THREADS)
    total = THREADS * (ENTRIES // 10)
    assert tree(s) == (
        "ROOT",
        {"n": 0, "f": 0.0, "k": 0},
        [("shared", {"n": total, "f": total * 0.5}, [("inner", {"k": 2 * total}, [])])],
    )


def test_each_thread_has_its_own_scope_stack():
    s = proton.start("stacks")
    entered = threading.Barrier(2)

    def work(i):
        with proton.scope(f"outer{i}"):
            entered.wait()  # both threads are inside their outer scope
            assert proton.context.depth(s) == 1
            with proton.scope("inner", {"n": 1}):
                pass

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(shape(c) for c in proton.data.get(s)[0]["children"]) == [
        ("outer0", {}, [("inner", {"n": 1}, [])]),
        ("outer1", {}, [("inner", {"n": 1}, [])]),
    ]


def test_thread_started_inside_an_open_scope_inherits_it():
    s = proton.start("inherit")
    seen = {}

    def child():
        seen["depth"] = proton.context.depth(s)
        with proton.scope("child", {"n": 1}):
            pass

    with proton.scope("parent"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
    assert seen["depth"] == 1
    assert tree(s) == ("ROOT", {"n": 0}, [("parent", {}, [("child", {"n": 1}, [])])])
    assert proton.context.depth(s) == 0


def test_inherited_scope_can_not_be_exited_by_the_child_thread_twice():
    s = proton.start("inherit_exit")
    errors = []

    def child():
        with proton.scope("child"):
            pass
        try:
            proton.exit_scope("other")
        except proton.ScopeError as e:
            errors.append(str(e))

    with proton.scope("parent"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
    assert errors == [
        "[PROTON] Scope name mismatch: exit_scope('other') but the innermost open scope is 'parent'"
    ]
    assert tree(s) == ("ROOT", {}, [("parent", {}, [("child", {}, [])])])


def test_thread_started_by_a_worker_inherits_the_workers_scopes():
    s = proton.start("nested_threads")

    def grandchild():
        with proton.scope("grandchild", {"n": 1}):
            pass

    def child():
        with proton.scope("child"):
            t = threading.Thread(target=grandchild)
            t.start()
            t.join()

    with proton.scope("parent"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
    assert tree(s) == (
        "ROOT",
        {"n": 0},
        [("parent", {}, [("child", {}, [("grandchild", {"n": 1}, [])])])],
    )


def test_thread_started_outside_a_scope_does_not_inherit_a_later_scope():
    s = proton.start("late_inherit")
    go = threading.Event()
    done = threading.Event()

    def worker():
        go.wait()
        with proton.scope("worker", {"n": 1}):
            pass
        done.set()

    t = threading.Thread(target=worker)
    t.start()  # started at the root
    with proton.scope("main_only"):
        go.set()
        done.wait()
    t.join()
    assert sorted(shape(c) for c in proton.data.get(s)[0]["children"]) == [
        ("main_only", {}, []),
        ("worker", {"n": 1}, []),
    ]


DAEMON_AT_EXIT = """
import threading, proton
proton.start("daemon")
started = threading.Event()
with proton.scope("outer"):
    worker = threading.Thread(target=lambda: (started.set(), threading.Event().wait()), daemon=True)
    worker.start()  # a pool's worker: still running when the program ends
started.wait()
proton.finalize()
print("done")
"""


def test_a_daemon_thread_alive_at_exit_leaves_nothing_behind(tmp_path):
    # Inductor's compile pool keeps daemon threads: a thread started in a session must not
    # keep the scopes it adopted alive past the program's end (nanobind reports a leak).
    from proton_test_utils import run_python

    r = run_python(DAEMON_AT_EXIT, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "leaked" not in r.stderr, r.stderr
