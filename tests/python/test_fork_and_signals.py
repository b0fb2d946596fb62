"""A profiled program that forks, or is stopped by a signal, finishes and keeps its profile."""

import os
import signal
import subprocess
import sys
import time

import pytest
from proton_test_utils import PYTHON_DIR, load_hatchet, run_python

ENV = {"PROTON_FORCE_NO_GPU": "1"}


def _names(path):
    return [c["frame"]["name"] for c in load_hatchet(path)[0]["children"]]


def test_forked_child_writes_nothing_and_parent_keeps_its_profile(tmp_path):
    code = """
import os, proton, warnings
warnings.simplefilter("ignore")
proton.start("parent")
with proton.scope("before_fork"):
    pid = os.fork()
    if pid == 0:
        with proton.scope("child_work"):   # profiling is off in the child: a no-op
            pass
        raise SystemExit(7)                # a normal exit: atexit runs, writes nothing
    _, status = os.waitpid(pid, 0)
with proton.scope("after_fork"):
    pass
proton.finalize()
print(os.waitstatus_to_exitcode(status))
"""
    result = run_python(code, tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7"
    assert [p.name for p in tmp_path.iterdir()] == ["parent.hatchet"]
    assert _names(tmp_path / "parent.hatchet") == ["before_fork", "after_fork"]


def test_forked_child_can_start_its_own_session(tmp_path):
    code = """
import os, proton, warnings
warnings.simplefilter("ignore")
s = proton.start("parent")
pid = os.fork()
if pid == 0:
    c = proton.start("child")
    with proton.scope("in_child"):
        pass
    proton.finalize()
    os._exit(0 if c == 0 else 1)
with proton.scope("in_parent"):
    pass
_, status = os.waitpid(pid, 0)
proton.finalize()
raise SystemExit(os.waitstatus_to_exitcode(status))
"""
    result = run_python(code, tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    assert _names(tmp_path / "parent.hatchet") == ["in_parent"]
    assert _names(tmp_path / "child.hatchet") == ["in_child"]


def test_multiprocessing_fork_pool_finishes_while_threads_record(tmp_path):
    code = """
import multiprocessing as mp, threading, proton, warnings
warnings.simplefilter("ignore")

def task(i):
    with proton.scope(f"task{i}"):
        return i * i

proton.start("pool")
stop = threading.Event()
def busy():
    i = 0
    while not stop.is_set():
        with proton.scope(f"busy{i % 50}"):
            i += 1
threads = [threading.Thread(target=busy) for _ in range(2)]
for t in threads: t.start()
with mp.get_context("fork").Pool(4) as pool:
    results = pool.map(task, range(64))
stop.set()
for t in threads: t.join()
proton.finalize()
print(sum(results))
"""
    result = run_python(code, tmp_path, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(sum(i * i for i in range(64)))
    names = _names(tmp_path / "pool.hatchet")
    assert not [n for n in names if n.startswith("task")]  # children are not profiled
    assert names  # the parent's threads were


SERVER = """
import os, signal, sys, time, warnings
warnings.simplefilter("ignore")
import proton
mode = os.environ.get("TEST_MODE") or None
own = os.environ.get("TEST_OWN_HANDLER")
if own:
    def handler(signum, frame):
        print("own handler", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, handler)
s = proton.start("server", mode=mode)
for step in range(int(os.environ.get("TEST_STEPS", "0"))):
    with proton.scope(f"step{step}"):
        pass
    proton.data.advance_phase(s)
with proton.scope("serving"):
    print("ready", flush=True)
    time.sleep(60)
"""


def _serve(tmp_path, sig, **env):
    full = {**os.environ, "PYTHONPATH": PYTHON_DIR, **ENV, **env}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        cwd=tmp_path,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_sigterm_writes_the_profile_then_dies_of_sigterm(tmp_path):
    code, _, err = _serve(tmp_path, signal.SIGTERM)
    assert code == -signal.SIGTERM
    assert "[PROTON] profile written to server.hatchet (on SIGTERM)" in err
    assert _names(tmp_path / "server.hatchet") == ["serving"]


def test_sigint_writes_the_profile_through_keyboard_interrupt(tmp_path):
    code, _, err = _serve(tmp_path, signal.SIGINT)
    assert code == -signal.SIGINT  # Python's own behaviour for an uncaught KeyboardInterrupt
    assert "KeyboardInterrupt" in err
    assert _names(tmp_path / "server.hatchet") == ["serving"]


def test_the_programs_own_sigterm_handler_runs_and_the_profile_is_written_at_exit(tmp_path):
    code, out, err = _serve(tmp_path, signal.SIGTERM, TEST_OWN_HANDLER="1")
    assert code == 3
    assert out.strip() == "own handler"
    assert "[PROTON] profile written to server.hatchet (at exit" in err
    assert _names(tmp_path / "server.hatchet") == ["serving"]


def test_sigkill_with_periodic_flushing_loses_only_the_phase_in_progress(tmp_path):
    code, _, _ = _serve(tmp_path, signal.SIGKILL, TEST_MODE="periodic_flushing", TEST_STEPS="5")
    assert code == -signal.SIGKILL
    files = sorted(p.name for p in tmp_path.iterdir() if ".tmp." not in p.name)
    assert files == [f"server.part_{i}.hatchet" for i in range(5)]
    for i in range(5):
        assert _names(tmp_path / f"server.part_{i}.hatchet") == [f"step{i}"]


def test_sigterm_under_the_command_line_writes_the_profile(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(
        "import time, proton\n"
        "with proton.scope('cli_serving'):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR, **ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proton", "-n", "cli", "prog.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, err
    assert _names(tmp_path / "cli.hatchet") == ["cli_serving"]


@pytest.mark.parametrize("handler", ["ignore", "default"])
def test_start_leaves_an_ignored_sigterm_ignored(tmp_path, handler):
    code = f"""
import signal, proton, warnings
warnings.simplefilter("ignore")
signal.signal(signal.SIGTERM, signal.SIG_IGN if "{handler}" == "ignore" else signal.SIG_DFL)
proton.start("x")
installed = signal.getsignal(signal.SIGTERM)
proton.finalize()
after = signal.getsignal(signal.SIGTERM)
print(installed == signal.SIG_IGN, after == installed or after == signal.SIG_DFL)
"""
    result = run_python(code, tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    ignored, restored = result.stdout.split()
    assert ignored == ("True" if handler == "ignore" else "False")
    assert restored == "True"


OS_EXIT = """
import os, posix, proton, warnings
warnings.simplefilter("ignore")
proton.start("leaving")
with proton.scope("before_os_exit"):
    pass
os._exit(int(os.environ.get("TEST_STATUS", "0")))
"""


@pytest.mark.parametrize("status", [0, 4])
def test_os_exit_writes_the_profile_and_keeps_the_status(tmp_path, status):
    result = run_python(OS_EXIT, tmp_path, env={**ENV, "TEST_STATUS": str(status)})
    assert result.returncode == status, result.stderr
    assert "[PROTON] profile written to leaving.hatchet (at os._exit)" in result.stderr
    assert _names(tmp_path / "leaving.hatchet") == ["before_os_exit"]


def test_os_exit_under_the_command_line_writes_the_profile(tmp_path):
    (tmp_path / "prog.py").write_text(
        "import os, proton\nwith proton.scope('cli_work'):\n    pass\nos._exit(5)\n"
    )
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR, **ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "proton", "-n", "cli", "prog.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5, proc.stderr
    assert _names(tmp_path / "cli.hatchet") == ["cli_work"]


def test_os_exit_is_the_interpreters_own_again_after_finalize(tmp_path):
    code = """
import os, posix, proton, warnings
warnings.simplefilter("ignore")
proton.start("x")
print(os._exit is posix._exit)
proton.finalize()
print(os._exit is posix._exit)
"""
    result = run_python(code, tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_os_exit_in_a_forked_child_writes_nothing(tmp_path):
    code = """
import os, proton, warnings
warnings.simplefilter("ignore")
proton.start("parent")
with proton.scope("in_parent"):
    pid = os.fork()
    if pid == 0:
        os._exit(6)
    _, status = os.waitpid(pid, 0)
proton.finalize()
print(os.waitstatus_to_exitcode(status))
"""
    result = run_python(code, tmp_path, env=ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "6"
    assert [p.name for p in tmp_path.iterdir()] == ["parent.hatchet"]
    assert _names(tmp_path / "parent.hatchet") == ["in_parent"]
    assert "profile written" not in result.stderr


def test_os_exit_does_not_wait_past_its_deadline_for_a_stuck_write(tmp_path):
    code = """
import os, time, proton, warnings
from proton import _process
warnings.simplefilter("ignore")
proton.start("stuck")
_process._EXIT_WRITE_DEADLINE_S = 0.5
_process.write_all = lambda *args, **kwargs: time.sleep(600)  # a flush that never ends
os._exit(7)
"""
    result = run_python(code, tmp_path, env=ENV, timeout=60)
    assert result.returncode == 7, result.stderr
    assert (
        "[PROTON] the profile was not written within 0.5 s of os._exit; "
        "the program exits without it" in result.stderr
    )
    assert not (tmp_path / "stuck.hatchet").exists()
