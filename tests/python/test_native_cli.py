"""`proton ./app` and the C++ API without a GPU: a stand-in program (csrc/api/testdata/
fake_cuda_app.cc, built here with `proton --cflags --ldflags`) loads the library the way the
CUDA driver does under CUDA_INJECTION64_PATH and records C++ scopes. Also the launcher's
argument handling for executables and `proton python3 ...`."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from proton import cli, native
from proton_test_utils import PYTHON_DIR, names

REPO = Path(__file__).resolve().parents[2]
FAKE_APP = REPO / "csrc" / "api" / "testdata" / "fake_cuda_app.cc"
CXX = shutil.which("g++") or shutil.which("c++")

needs_cxx = pytest.mark.skipif(
    CXX is None or not os.path.exists(native.library_path()),
    reason="needs a C++ compiler and the installed libprotonprof.so",
)


def launcher_env():
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PROTON_DISABLE", None)
    env.pop("CUDA_INJECTION64_PATH", None)
    env["PROTON_FORCE_NO_GPU"] = "1"  # the same CPU-only behaviour on a GPU machine
    return env


def proton_cli(*argv, cwd, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "proton", *argv],
        cwd=str(cwd),
        env=launcher_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kwargs,
    )


@pytest.fixture(scope="module")
def fake_app(tmp_path_factory):
    if CXX is None or not os.path.exists(native.library_path()):
        pytest.skip("needs a C++ compiler and the installed libprotonprof.so")
    out = tmp_path_factory.mktemp("native") / "fake_cuda_app"
    flags = f"{native.cflags()} {native.ldflags(nvcc_style=True)}"
    command = [CXX, "-std=c++17", "-O1", str(FAKE_APP), "-o", str(out), *shlex.split(flags), "-ldl"]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    return out


def tree(path):
    with open(path) as f:
        root = json.load(f)[0]
    return root


def find(node, *path):
    for name in path:
        (node,) = [c for c in node["children"] if c["frame"]["name"] == name]
    return node


# --- argument handling (no program runs) ------------------------------------------------


def test_executable_on_the_path_is_run_by_injection(tmp_path):
    assert cli.parse_args(["-n", "run", "--", "env", "-i"]) == (
        {"name": "run"},
        ("exec", "env", ["-i"]),
    )
    app = tmp_path / "app"
    app.write_bytes(b"\x7fELF")
    app.chmod(0o755)
    assert cli.parse_args(["-d", "trace", str(app), "x"])[1] == ("exec", str(app), ["x"])


def test_python_interpreter_runs_its_program_in_the_launcher():
    assert cli.parse_args(["python3", "train.py", "--lr", "1"])[1] == (
        "script",
        "train.py",
        ["--lr", "1"],
    )
    assert cli.parse_args(["-n", "x", "python3.12", "-u", "-m", "pkg.mod", "a"]) == (
        {"name": "x"},
        ("module", "pkg.mod", ["a"]),
    )
    # -c and interpreter options with values are not programs the launcher can run itself
    assert cli.parse_args(["python3", "-c", "print(1)"])[1][0] == "exec"
    assert cli.parse_args(["python3", "-X", "dev", "t.py"])[1][0] == "exec"


def test_python_scripts_stay_python_programs(tmp_path):
    script = tmp_path / "tool"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    script.chmod(0o755)
    assert cli.parse_args([str(script)])[1] == ("script", str(script), [])
    assert cli.parse_args(["missing_app_xyz"])[1] == ("script", "missing_app_xyz", [])
    assert cli.parse_args(["prog.py"])[1] == ("script", "prog.py", [])


def test_injection_environment_carries_the_session_options(tmp_path):
    env = native.injection_env(
        {"name": "out/run", "data": "trace", "mode": "periodic_flushing"},
        "proton -n out/run ./app",
        str(tmp_path / "report"),
        base={"PROTON_INJECT_CONTEXT": "stale"},
    )
    assert env["CUDA_INJECTION64_PATH"] == native.library_path()
    assert env["PROTON_INJECT_NAME"] == "out/run"
    assert env["PROTON_INJECT_DATA"] == "trace"
    assert env["PROTON_INJECT_MODE"] == "periodic_flushing"
    assert "PROTON_INJECT_CONTEXT" not in env  # nothing stale from an outer launcher
    # The backend names its own CUPTI to NVTX when CUDA initialises: never another one here.
    assert "NVTX_INJECTION64_PATH" not in env
    assert env["PROTON_INJECT_COMMAND"] == "proton -n out/run ./app"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-k", "triton", "env"], "-k/--hook applies to Python programs"),
        (["-c", "python", "env"], "executables take -c shadow"),
        (["-d", "bogus", "env"], "bogus"),
    ],
)
def test_options_that_do_not_apply_to_executables_are_refused(tmp_path, argv, message):
    result = proton_cli(*argv, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("option", ["--cflags", "--ldflags", "--includedir", "--cmake-dir"])
def test_build_flags_name_the_installed_header_and_library(tmp_path, option):
    result = proton_cli(option, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout.strip()
    expected = {
        "--cflags": f"-I{native.get_include()}",
        "--includedir": native.get_include(),
        "--cmake-dir": native.get_cmake_dir(),
        "--ldflags": f"-L{native.get_lib_dir()} -Xlinker -rpath -Xlinker {native.get_lib_dir()}"
        " -lprotonprof",
    }[option]
    assert text == expected
    assert os.path.exists(os.path.join(native.get_include(), "proton", "proton.h"))
    assert os.path.exists(os.path.join(native.get_cmake_dir(), "protonConfig.cmake"))


# --- programs run by the launcher -------------------------------------------------------


@needs_cxx
def test_injected_program_writes_its_scopes_and_keeps_its_exit_status(fake_app, tmp_path):
    result = proton_cli("-n", "run", str(fake_app), "exit", "3", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    root = tree(tmp_path / "run.hatchet")
    assert names(root) == ("ROOT", [("main", [("step", [])])])
    assert find(root, "main", "step")["metrics"] == {"flops": 300, "bytes": 24}
    assert root["proton_metadata"]["command_line"] == f"proton -n run {fake_app} exit 3"
    assert "[PROTON] profile written to run.hatchet (at exit)" in result.stderr


@needs_cxx
def test_exit_call_writes_the_profile(fake_app, tmp_path):
    result = proton_cli(str(fake_app), "exit_call", "5", cwd=tmp_path)
    assert result.returncode == 5, result.stderr
    assert names(tree(tmp_path / "proton.hatchet")) == ("ROOT", [("main", [("step", [])])])


@needs_cxx
def test_native_context_files_scopes_under_the_programs_call_stacks(fake_app, tmp_path):
    result = proton_cli("-c", "native", "-n", "nat", str(fake_app), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = tree(tmp_path / "nat.hatchet")
    frame = re.compile(r"main \(fake_cuda_app\+0x[0-9a-f]+\)")
    # Each scope sits under the call site that entered it: main's own call sites, nothing of
    # Proton's or the C library's around them.
    by_site = {}
    for site in root["children"]:
        assert frame.fullmatch(site["frame"]["name"]), site["frame"]["name"]
        by_site[site["frame"]["name"]] = names(site)[1]
    assert sorted(by_site.values()) == [[("main", [])], [("main", [("step", [])])]]
    (site,) = [n for n in root["children"] if names(n)[1] == [("main", [("step", [])])]]
    step = find(site, "main", "step")
    assert step["metrics"]["flops"] == 300  # three iterations, one call site


@needs_cxx
def test_program_start_and_finalize_defer_to_the_command_line(fake_app, tmp_path):
    result = proton_cli("-n", "cmd", str(fake_app), "self", "own", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cmd.hatchet").exists()
    assert not (tmp_path / "own.hatchet").exists()
    # main was entered after the program's start() started the command line's session
    assert names(tree(tmp_path / "cmd.hatchet")) == ("ROOT", [("main", [("step", [])])])


def test_program_that_never_initialises_cuda_writes_nothing_and_says_so(tmp_path):
    result = proton_cli("--", "sh", "-c", "exit 4", cwd=tmp_path)
    assert result.returncode == 4
    assert "[PROTON] sh never initialised CUDA: no profile written" in result.stderr
    assert not list(tmp_path.iterdir())


@needs_cxx
def test_program_using_only_the_cpp_api_gets_its_cpu_profile(fake_app, tmp_path):
    result = proton_cli("-n", "cpu", str(fake_app), "nocuda", "exit", "4", cwd=tmp_path)
    assert result.returncode == 4
    assert "never initialised CUDA" not in result.stderr
    assert names(tree(tmp_path / "cpu.hatchet")) == ("ROOT", [("main", [("step", [])])])


@needs_cxx
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_launcher_writes_the_profile_and_ends_like_the_signal(
    fake_app, tmp_path, signum
):
    launcher = subprocess.Popen(
        [sys.executable, "-m", "proton", "-n", "sig", str(fake_app), "hang"],
        cwd=str(tmp_path),
        env=launcher_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert launcher.stdout.readline() == "ready\n"
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == -signum, stderr
    name = signal.Signals(signum).name
    assert f"[PROTON] profile written to sig.hatchet (on {name})" in stderr
    assert names(tree(tmp_path / "sig.hatchet")) == ("ROOT", [("main", [("step", [])])])


@needs_cxx
def test_rank_files_one_per_process(fake_app, tmp_path):
    app = shlex.quote(str(fake_app))
    job = f"RANK=0 WORLD_SIZE=2 {app} & RANK=1 WORLD_SIZE=2 {app}; wait"
    result = proton_cli("-n", "job", "--", "sh", "-c", job, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        path = tmp_path / f"job.rank{rank}.hatchet"
        assert names(tree(path)) == ("ROOT", [("main", [("step", [])])])


@needs_cxx
def test_program_built_against_the_package_uses_the_api_without_the_launcher(fake_app, tmp_path):
    env = launcher_env()
    result = subprocess.run(
        [str(fake_app), "nocuda", "self", "alone"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert names(tree(tmp_path / "alone.hatchet")) == ("ROOT", [("main", [("step", [])])])
    assert "never initialised" not in result.stderr  # no launcher, no report


def test_python3_script_under_the_launcher_is_profiled_like_a_script(tmp_path):
    (tmp_path / "p.py").write_text("import proton\nwith proton.scope('py_outer'):\n    pass\n")
    result = proton_cli("-n", "py", "python3", "p.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert names(tree(tmp_path / "py.hatchet")) == ("ROOT", [("py_outer", [])])
    assert "never initialised CUDA" not in result.stderr
