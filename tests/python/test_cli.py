"""The `proton` command line, run in a subprocess on CPU-only programs: the three launch
forms, what the program sees, exit statuses, exceptions, and the profile written."""

import json
import os
import shutil
import subprocess
import sysconfig
import sys
import textwrap

import pytest
from proton_test_utils import PYTHON_DIR, names

PROGRAM = """\
import json, os, sys
import proton
assert proton.start("inner") is None          # the command line owns session 0
with proton.scope("outer", {"n": 1}):
    with proton.scope("inner", {"n": 2}):
        pass
proton.finalize()                             # ignored: the command line writes the file
try:
    proton.finalize(1)
except ValueError as e:
    finalize_error = str(e)
with open("seen.json", "w") as f:
    json.dump({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
               "file": __file__, "finalize_error": finalize_error}, f)
action = sys.argv[1] if len(sys.argv) > 1 else ""
if action == "raise":
    raise KeyError("boom")
if action == "exit":
    sys.exit(int(sys.argv[2]))
if action == "exit_message":
    sys.exit("leaving with a message")
if action == "interrupt":
    raise KeyboardInterrupt
"""


def proton_cli(*argv, cwd):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PROTON_DISABLE", None)
    env["PROTON_FORCE_NO_GPU"] = "1"  # the same CPU-only behaviour on a GPU machine
    return subprocess.run(
        [sys.executable, "-m", "proton", *argv],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def program(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    return tmp_path


def profile_tree(path):
    with open(path) as f:
        return names(json.load(f)[0])


def seen(cwd):
    with open(cwd / "seen.json") as f:
        return json.load(f)


def test_script_runs_as_main_with_its_argv_and_is_profiled(program):
    result = proton_cli("-n", "run", "prog.py", "a", "--flag", cwd=program)
    assert result.returncode == 0, result.stderr
    info = seen(program)
    assert info["argv"] == ["prog.py", "a", "--flag"]
    assert info["name"] == "__main__"
    assert info["path0"] == str(program)
    assert info["file"] == str(program / "prog.py")
    assert info["finalize_error"] == (
        "Only one session can be finalized when running from the command line."
    )
    assert profile_tree(program / "run.hatchet") == ("ROOT", [("outer", [("inner", [])])])
    assert not (program / "inner.hatchet").exists()
    assert result.stderr.splitlines()[-1] == "[PROTON] profile written to run.hatchet"
    assert "no GPU runtime" in result.stderr


def test_profile_records_the_command_line(program):
    proton_cli("-n", "run", "prog.py", "x y", cwd=program)
    with open(program / "run.hatchet") as f:
        metadata = json.load(f)[0]["proton_metadata"]
    assert metadata["command_line"] == "proton -n run prog.py 'x y'"


def test_uncaught_exception_passes_through_and_the_profile_is_written(program):
    result = proton_cli("prog.py", "raise", cwd=program)
    assert result.returncode == 1
    tail = result.stderr[result.stderr.index("Traceback") :].splitlines()
    assert tail == [
        "Traceback (most recent call last):",
        f'  File "{program / "prog.py"}", line 17, in <module>',
        '    raise KeyError("boom")',
        "KeyError: 'boom'",
    ]
    assert "[PROTON] profile written to proton.hatchet" in result.stderr
    assert profile_tree(program / "proton.hatchet") == ("ROOT", [("outer", [("inner", [])])])


@pytest.mark.parametrize(("args", "code"), [(["exit", "7"], 7), (["exit", "0"], 0)])
def test_sys_exit_status_is_kept(program, args, code):
    result = proton_cli("prog.py", *args, cwd=program)
    assert result.returncode == code
    assert (program / "proton.hatchet").exists()


def test_sys_exit_with_a_message_prints_it_and_exits_1(program):
    result = proton_cli("prog.py", "exit_message", cwd=program)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "leaving with a message"
    assert (program / "proton.hatchet").exists()


def test_keyboard_interrupt_exits_130_with_the_profile_written(program):
    result = proton_cli("prog.py", "interrupt", cwd=program)
    assert result.returncode == 130
    assert "KeyboardInterrupt" in result.stderr
    assert (program / "proton.hatchet").exists()


def test_module_form_runs_the_module_as_main(program):
    pkg = program / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(PROGRAM)
    result = proton_cli("-n", "mod", "-m", "pkg.tool", "exit", "3", cwd=program)
    assert result.returncode == 3, result.stderr
    info = seen(program)
    assert info["argv"] == [str(pkg / "tool.py"), "exit", "3"]
    assert info["name"] == "__main__"
    assert info["path0"] == str(program)
    assert profile_tree(program / "mod.hatchet") == ("ROOT", [("outer", [("inner", [])])])


def test_dash_m_with_a_mode_value_is_the_mode_and_after_double_dash_a_module(program):
    result = proton_cli("-m", "pcsampling", "prog.py", cwd=program)
    assert result.returncode == 2
    assert "[PROTON] mode='pcsampling' needs an NVIDIA GPU" in result.stderr
    (program / "pcsampling.py").write_text(PROGRAM)
    result = proton_cli("--", "-m", "pcsampling", cwd=program)
    assert result.returncode == 0, result.stderr
    assert seen(program)["argv"] == [str(program / "pcsampling.py")]


def test_pytest_form_runs_the_tests_under_the_profiler(program):
    (program / "test_sample.py").write_text(
        textwrap.dedent(
            """\
            import proton

            def test_ok():
                with proton.scope("in_test"):
                    pass

            def test_fails():
                assert False
            """
        )
    )
    result = proton_cli(
        "-n",
        "tests",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "test_sample.py::test_ok",
        cwd=program,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    tree = profile_tree(program / "tests.hatchet")
    assert ("in_test", []) in tree[1]
    result = proton_cli("pytest", "-q", "-p", "no:cacheprovider", "test_sample.py", cwd=program)
    assert result.returncode == 1
    assert "1 failed, 1 passed" in result.stdout


def test_options_mirror_start(program):
    result = proton_cli("--name=traced", "-d", "trace", "prog.py", cwd=program)
    assert result.returncode == 0, result.stderr
    with open(program / "traced.chrome_trace") as f:
        trace = json.load(f)
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"} == {
        "outer: <n, 1>",
        "inner: <n, 2>",
    }
    (program / "seen.json").unlink()
    result = proton_cli("-d", "bogus", "prog.py", cwd=program)
    assert result.returncode == 2
    assert result.stderr.startswith("[PROTON] ")
    assert not (program / "seen.json").exists()  # the program did not run


def test_usage_errors(program):
    for argv, message in (
        (["--frobnicate", "prog.py"], "unknown option --frobnicate"),
        ([], "no program given"),
        (["-n"], "-n needs a value"),
    ):
        result = proton_cli(*argv, cwd=program)
        assert result.returncode == 2
        assert result.stderr.startswith(f"proton: {message}\nusage: proton")
    result = proton_cli("--help", cwd=program)
    assert (result.returncode, result.stdout.splitlines()[0]) == (
        0,
        "usage: proton [options] script.py [args...]",
    )


def test_missing_script(program):
    result = proton_cli("nope.py", cwd=program)
    assert result.returncode == 2
    assert "can't open file 'nope.py'" in result.stderr


def test_installed_console_scripts_when_present(program):
    proton_exe = shutil.which("proton")
    if proton_exe is None or shutil.which("proton-viewer") is None:
        pytest.skip("proton is not installed as a package here")
    result = subprocess.run(
        [proton_exe, "-n", "cs", "prog.py"],
        cwd=program,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    result = subprocess.run(
        ["proton-viewer", "-m", "n", "cs.hatchet"],
        cwd=program,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.splitlines() == ["n  name", "3  ROOT", "3  └─ outer", "2     └─ inner"]


FRAMES_PROGRAM = """\
import json
from proton import _C


def launch_site():
    return _C.python_stack_names()  # what context="python" files a launch here under


with open("frames.json", "w") as f:
    json.dump(launch_site(), f)
"""


def _frames_seen(command, cwd):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["PROTON_FORCE_NO_GPU"] = "1"
    env.pop("PROTON_DISABLE", None)
    result = subprocess.run(
        command, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    with open(cwd / "frames.json") as f:
        return json.load(f)


@pytest.mark.parametrize("form", ["python -m proton", "proton script", "-m module"])
def test_python_context_frames_start_at_the_programs_own_file(tmp_path, form):
    (tmp_path / "frames_prog.py").write_text(FRAMES_PROGRAM)
    if form == "proton script":
        # The console script pip installs (bin/proton); the source tree's __main__ otherwise.
        script = os.path.join(sysconfig.get_path("scripts"), "proton")
        if not os.path.exists(script):
            script = os.path.join(PYTHON_DIR, "proton", "__main__.py")
        command = [sys.executable, script, "-c", "python", "frames_prog.py"]
    elif form == "-m module":
        command = [sys.executable, "-m", "proton", "-c", "python", "-m", "frames_prog"]
    else:
        command = [sys.executable, "-m", "proton", "-c", "python", "frames_prog.py"]
    frames = _frames_seen(command, tmp_path)
    program = str(tmp_path / "frames_prog.py")
    assert frames == [f"{program}:10@<module>", f"{program}:6@launch_site"]


def test_python_dash_m_proton_proton_is_the_command_line_as_in_triton(program):
    # triton.profiler's module name for its command line: `python -m triton.profiler.proton`.
    result = subprocess.run(
        [sys.executable, "-m", "proton.proton", "-n", "named", "prog.py", "exit", "4"],
        cwd=program,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PYTHON_DIR},
    )
    assert result.returncode == 4, result.stderr
    assert profile_tree(program / "named.hatchet") == ("ROOT", [("outer", [("inner", [])])])
