"""triton.profiler compatibility on a real GPU (issue 13): Triton's knobs read at start()
(item 7), the launch hook as a configured object with its launch id (item 8), and the
`proton` launcher's own frames left out of context="python" (item 10)."""

import os
import sys
import sysconfig

import proton
import pytest
from gpu_tree import kernels_under, total_count
from proton_test_utils import PYTHON_DIR, find, load_hatchet
from proton_test_utils import run_program as shared_run_program

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from proton.hooks import launch as launch_module  # noqa: E402

# ---- item 7: triton.knobs.proton ------------------------------------------------------------

NVTX_KNOB_PROGRAM = """
import os, sys
import torch, triton, proton
if sys.argv[1] == "knob_off":
    triton.knobs.proton.enable_nvtx = False
x = torch.zeros(1024, device="cuda"); torch.cuda.synchronize()
proton.start("nvtx", backend="cupti")
print("PROTON_ENABLE_NVTX after start:", os.environ.get("PROTON_ENABLE_NVTX"))
torch.cuda.nvtx.range_push("outer")
for _ in range(5):
    x.add_(1)
torch.cuda.nvtx.range_pop()
x.add_(1)
proton.finalize()
"""


def run_program(code, tmp_path, *args, env=None):
    return shared_run_program(
        code,
        tmp_path,
        after=args,
        env=env,
        drop=("PROTON_ENABLE_NVTX", "TRITON_ENABLE_NVTX", "TRITON_PROTON_DISABLE"),
    )


@pytest.mark.parametrize("setting", ["default", "knob_off"])
def test_knob_enable_nvtx_decides_whether_nvtx_ranges_become_frames(tmp_path, setting):
    r = run_program(NVTX_KNOB_PROGRAM, tmp_path, setting)
    assert r.returncode == 0, r.stderr
    assert "PROTON_ENABLE_NVTX after start: None" in r.stdout  # set only while starting
    root = load_hatchet(tmp_path / "nvtx.hatchet")[0]
    assert total_count(root) == 6
    names = [c["frame"]["name"] for c in root["children"]]
    if setting == "knob_off":
        assert "outer" not in names, names
    else:
        assert sum(c for _, c in kernels_under(find(root, "outer"))) == 5


DISABLE_KNOB_PROGRAM = """
import torch, triton, proton
triton.knobs.proton.disable = True
x = torch.zeros(1024, device="cuda")
print("SESSION", proton.start("disabled", backend="cupti"))
x.add_(1); torch.cuda.synchronize()
proton.finalize()
triton.knobs.proton.disable = False
print("SESSION", proton.start("enabled", backend="cupti"))
x.add_(1); torch.cuda.synchronize()
proton.finalize()
"""


def test_knob_disable_turns_start_off_until_cleared(tmp_path):
    r = run_program(DISABLE_KNOB_PROGRAM, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["SESSION None", "SESSION 0"]
    assert not (tmp_path / "disabled.hatchet").exists()
    assert total_count(load_hatchet(tmp_path / "enabled.hatchet")[0]) == 1


def test_triton_variable_disables_a_program_that_never_imports_triton(tmp_path):
    code = "import proton\nprint('SESSION', proton.start('off'))\n"
    r = run_program(code, tmp_path, env={"TRITON_PROTON_DISABLE": "1"})
    assert r.returncode == 0, r.stderr
    assert "SESSION None" in r.stdout


# ---- item 8: the launch hook as an object -----------------------------------------------------

ids_seen = []
skipped_calls = []


def ids_metadata(grid, kernel_metadata, args):
    ids_seen.append(launch_module.id.get())
    return {"name": f"ids_{args['n']}", "flops32": args["n"], "bytes": 12 * args["n"]}


def skipped_metadata(grid, kernel_metadata, args):
    skipped_calls.append(1)
    return {"name": "never_renamed", "flops32": 1}


@triton.jit(launch_metadata=ids_metadata)
def ids_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit(launch_metadata=skipped_metadata)
def skipped_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * tl.load(y + offs, mask=m), mask=m)


def launch(kernel, a, b, c):
    kernel[(4,)](a, b, c, a.numel(), BLOCK=1024)


def test_configured_hook_object_evaluates_only_included_kernels_and_sets_launch_ids():
    a, b, c = (torch.rand(4096, device="cuda") for _ in range(3))
    launch(ids_kernel, a, b, c)
    launch(skipped_kernel, a, b, c)
    torch.cuda.synchronize()
    ids_seen.clear()
    skipped_calls.clear()
    hook = proton.hooks.launch.LaunchHook()
    assert hook is proton.hooks.launch.LaunchHook()
    hook.configure(include="ids_")
    try:
        proton.start("hook_object", backend="cupti", hook=hook)
        ids_after = []
        with proton.scope("work"):
            for _ in range(3):
                launch(ids_kernel, a, b, c)
                ids_after.append(launch_module.id.get())
                launch(skipped_kernel, a, b, c)
        torch.cuda.synchronize()
        proton.finalize()
    finally:
        hook.configure()
    assert skipped_calls == []
    assert ids_seen == ids_after  # inside the metadata function and after the launch alike
    assert len(set(ids_after)) == 3 and ids_after == sorted(ids_after)
    work = find(load_hatchet("hook_object.hatchet")[0], "work")
    renamed = find(work, "ids_4096")
    assert renamed["metrics"]["count"] == 3
    assert renamed["metrics"]["flops32"] == 3 * 4096
    assert renamed["metrics"]["bytes"] == 3 * 12 * 4096
    plain = find(work, "skipped_kernel")
    assert plain["metrics"]["count"] == 3
    assert "flops32" not in plain["metrics"]


def test_unsupported_hook_value_raises_value_error_before_starting():
    with pytest.raises(ValueError, match="Unsupported hook"):
        proton.start("bad_hook", backend="cupti", hook="launch")
    assert proton._C.live_sessions() == []


# ---- item 10: the launcher's frames under context="python" ------------------------------------

PYTHON_CONTEXT_PROGRAM = """\
import torch

x = torch.ones(1 << 20, device="cuda")


def step():
    return x * 2


for _ in range(3):
    step()
torch.cuda.synchronize()
"""


def all_names(node):
    yield node["frame"]["name"]
    for child in node["children"]:
        yield from all_names(child)


@pytest.mark.parametrize("form", ["python -m proton", "console script"])
def test_python_context_under_the_command_line_starts_at_the_program(tmp_path, form):
    (tmp_path / "prog.py").write_text(PYTHON_CONTEXT_PROGRAM)
    if form == "console script":
        script = os.path.join(sysconfig.get_path("scripts"), "proton")
        if not os.path.exists(script):
            pytest.skip("proton is not installed as a console script here")
        command = [sys.executable, script]
    else:
        command = [sys.executable, "-m", "proton"]
    import subprocess

    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PROTON_DISABLE", None)
    r = subprocess.run(
        [*command, "-c", "python", "-n", "py", "prog.py"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    root = load_hatchet(tmp_path / "py.hatchet")[0]
    program = str(tmp_path / "prog.py")
    assert root["children"], "no frames recorded"
    assert all(c["frame"]["name"].startswith(program + ":") for c in root["children"])
    names = list(all_names(root))
    assert not [n for n in names if "runpy" in n or "/bin/proton" in n], names
    step = find(root, f"{program}:11@<module>", f"{program}:7@step")
    assert sum(c for _, c in kernels_under(step)) == 3
