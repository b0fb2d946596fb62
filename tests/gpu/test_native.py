"""`proton ./app` (CUDA injection) and the C++ API on the GPU: examples/native/vector_add.cu
built with nvcc, exact kernel counts under NVTX ranges and C++ scopes, exit status, SIGTERM,
rank files, and the C ABI next to `import proton` in one process."""

import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_tree import dump
from proton import native
from proton_test_utils import PYTHON_DIR, load_hatchet

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "native"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)
STEPS = 4
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def env(**extra):
    e = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in ("PROTON_DISABLE", "CUDA_INJECTION64_PATH", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        e.pop(k, None)
    e.update(extra)
    return e


def proton_cli(*argv, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "proton", *argv],
        cwd=str(cwd),
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def vector_add(tmp_path_factory):
    """The example, built as the README says: nvcc app.cu $(proton --cflags --ldflags)."""
    if NVCC is None:
        pytest.skip("needs nvcc")
    out = tmp_path_factory.mktemp("native") / "vector_add"
    flags = shlex.split(native.cflags()) + shlex.split(native.ldflags(nvcc_style=True))
    command = [NVCC, "-std=c++17", "-arch=native", str(EXAMPLE / "vector_add.cu"), "-o", str(out)]
    result = subprocess.run(
        [*command, *flags], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr
    return out


def kernel(name):
    """'void vector_add(float const*, ...)' -> 'vector_add'."""
    base = name.split("(")[0].strip()
    return base.split(" ")[-1]


def kernels(node):
    """{kernel: count} of the kernel leaves directly under node."""
    out = {}
    for c in node["children"]:
        if c["metrics"].get("count") and not c["children"]:
            out[kernel(c["frame"]["name"])] = (
                out.get(kernel(c["frame"]["name"]), 0) + c["metrics"]["count"]
            )
    return out


def child(node, name):
    matches = [c for c in node["children"] if c["frame"]["name"] == name]
    assert len(matches) == 1, f"{name!r} under {node['frame']['name']!r}:\n{dump(node)}"
    return matches[0]


def assert_example_tree(root, steps=STEPS):
    """The tree vector_add.cu's header comment promises."""
    text = dump(root)
    assert kernels(child(root, "setup")) == {"fill": 1}, text
    iterations = child(root, "iterations")
    assert iterations["metrics"]["flops"] == 2.0 * (1 << 20) * steps, text
    assert iterations["metrics"]["bytes"] == 12 * (1 << 20) * steps, text
    assert kernels(child(iterations, "step")) == {"vector_add": steps, "scale": steps}, text
    assert kernels(child(root, "worker")) == {"scale": 2}, text
    assert kernels(root) == {}, text  # nothing unattributed


@needs_nvcc
def test_injected_example_has_exact_counts_under_nvtx_and_cpp_scopes(vector_add, tmp_path):
    result = proton_cli("-n", "va", str(vector_add), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "c[0] = 1.00" in result.stdout
    assert "[PROTON] profile written to va.hatchet (at exit)" in result.stderr
    root = load_hatchet(tmp_path / "va.hatchet")[0]
    assert_example_tree(root)
    assert root["proton_metadata"]["backend"] == "cupti"
    assert root["proton_metadata"]["command_line"] == f"proton -n va {vector_add}"


@needs_nvcc
def test_exit_status_passes_through_and_the_profile_is_written(vector_add, tmp_path):
    result = proton_cli(str(vector_add), "3", "7", cwd=tmp_path)
    assert result.returncode == 7, result.stderr
    assert_example_tree(load_hatchet(tmp_path / "proton.hatchet")[0], steps=3)


@needs_nvcc
def test_sigterm_writes_the_profile_and_the_launcher_dies_of_it(vector_add, tmp_path):
    launcher = subprocess.Popen(
        [sys.executable, "-m", "proton", "-n", "term", str(vector_add), "--hang"],
        cwd=str(tmp_path),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [launcher.stdout.readline(), launcher.stdout.readline()]
        assert lines[-1] == "waiting for a signal\n", lines
        launcher.send_signal(signal.SIGTERM)
        _, stderr = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == -signal.SIGTERM, stderr
    assert "profile written to term.hatchet (on SIGTERM)" in stderr
    assert_example_tree(load_hatchet(tmp_path / "term.hatchet")[0])


@needs_nvcc
def test_rank_files_one_per_process(vector_add, tmp_path):
    app = shlex.quote(str(vector_add))
    job = f"RANK=0 WORLD_SIZE=2 {app} & RANK=1 WORLD_SIZE=2 {app} 2; wait"
    result = proton_cli("-n", "job", "--", "sh", "-c", job, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("job*.hatchet")) == [
        "job.rank0.hatchet",
        "job.rank1.hatchet",
    ]
    assert_example_tree(load_hatchet(tmp_path / "job.rank0.hatchet")[0])
    assert_example_tree(load_hatchet(tmp_path / "job.rank1.hatchet")[0], steps=2)


@needs_nvcc
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun")
def test_mpirun_gives_one_file_per_rank(vector_add, tmp_path):
    result = proton_cli(
        "-n", "mpi", "--", "mpirun", "--allow-run-as-root", "-n", "2", str(vector_add),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        assert_example_tree(load_hatchet(tmp_path / f"mpi.rank{rank}.hatchet")[0])


@needs_nvcc
def test_program_start_is_the_command_lines_session_under_the_launcher(vector_add, tmp_path):
    result = proton_cli("-n", "cmd", str(vector_add), "--self", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "vector_add.hatchet").exists()
    assert_example_tree(load_hatchet(tmp_path / "cmd.hatchet")[0])


@needs_nvcc
def test_program_profiles_itself_without_the_launcher(vector_add, tmp_path):
    result = subprocess.run(
        [str(vector_add), "--self"], cwd=tmp_path, env=env(), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # NVTX is seen when the program's first NVTX call comes after start(), as in Python.
    assert_example_tree(load_hatchet(tmp_path / "vector_add.hatchet")[0])


def kernel_paths(node, path=()):
    """(path of names above the kernel, kernel, count) for every kernel leaf."""
    out = []
    for c in node["children"]:
        if c["metrics"].get("count") and not c["children"]:
            out.append((path, kernel(c["frame"]["name"]), c["metrics"]["count"]))
        out.extend(kernel_paths(c, (*path, c["frame"]["name"])))
    return out


@needs_nvcc
def test_native_context_files_kernels_under_their_call_stacks(vector_add, tmp_path):
    result = proton_cli("-c", "native", "-n", "nc", str(vector_add), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = load_hatchet(tmp_path / "nc.hatchet")[0]
    text = dump(root)
    paths = kernel_paths(root)
    counts = {}
    for _, k, n in paths:
        counts[k] = counts.get(k, 0) + n
    assert counts == {"fill": 1, "vector_add": STEPS, "scale": STEPS + 2}, text
    frames = {name for path, _, _ in paths for name in path}
    # Launch machinery (Proton, CUPTI, the driver, the CUDA runtime) and process start-up are
    # left out; what remains are the program's own frames, "function (module+0xoffset)".
    for name in frames:
        for word in ("libcuda", "libcupti", "libproton", "proton::", "cudaLaunchKernel", "libc.so"):
            assert word not in name, text
    main_frame = "main (vector_add+0x"
    for path, k, n in paths:
        if "worker" in path:
            # The second thread's stack starts in its lambda, under no frame of main.
            assert k == "scale" and n == 2, text
            assert not path[0].startswith(main_frame), text
            assert any("lambda" in f and "(vector_add+0x" in f for f in path), text
        else:
            assert path[0].startswith(main_frame), text
            # NVTX ranges and C++ scopes come after the call stack, as Python scopes do.
            scopes = [f for f in path if "(" not in f]
            expected = ["setup"] if k == "fill" else ["iterations", "step"]
            assert scopes == expected, text
    per_site = {(path, k): n for path, k, n in paths if "step" in path}
    assert sorted(per_site.values()) == [STEPS, STEPS], text  # one call site per kernel


@needs_nvcc
def test_trace_data_has_every_kernel(vector_add, tmp_path):
    result = proton_cli("-n", "tr", "-d", "trace", str(vector_add), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "tr.chrome_trace") as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    counts = {}
    for e in gpu:
        counts[kernel(e["name"])] = counts.get(kernel(e["name"]), 0) + 1
    assert counts == {"fill": 1, "vector_add": STEPS, "scale": STEPS + 2}, counts


@needs_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_example_builds_with_the_cmake_config_package(tmp_path):
    build = tmp_path / "build"
    configure = [
        "cmake", "-S", str(EXAMPLE), "-B", str(build), f"-Dproton_DIR={native.get_cmake_dir()}",
        f"-DCMAKE_CUDA_COMPILER={NVCC}", "-DCMAKE_CUDA_ARCHITECTURES=native",
    ]  # fmt: skip
    for command in (configure, ["cmake", "--build", str(build)]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    result = proton_cli("-n", "cm", str(build / "vector_add"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_example_tree(load_hatchet(tmp_path / "cm.hatchet")[0])


def test_cpp_scopes_from_the_c_abi_hold_python_launched_kernels(tmp_path):
    torch = pytest.importorskip("torch")
    import proton

    lib = ctypes.CDLL(native.library_path())
    lib.proton_enter_scope.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.proton_exit_scope.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    session = proton.start(str(tmp_path / "mixed"), backend="cupti")
    with proton.scope("python"):
        assert lib.proton_enter_scope(b"cpp", None, 0) == 0
        for _ in range(3):
            x.mul_(2)
        assert lib.proton_exit_scope(b"cpp", None, 0) == 0
    torch.cuda.synchronize()
    proton.finalize(session)
    root = load_hatchet(tmp_path / "mixed.hatchet")[0]
    cpp = child(child(root, "python"), "cpp")
    assert sum(c["metrics"].get("count", 0) for c in cpp["children"]) == 3, dump(root)


def test_python3_script_under_the_launcher_is_profiled_in_process(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "t.py").write_text(
        "import torch, proton\n"
        "x = torch.ones(1024, device='cuda')\n"
        "with proton.scope('py'):\n"
        "    for _ in range(5):\n"
        "        x.add_(1)\n"
        "torch.cuda.synchronize()\n"
    )
    result = proton_cli("-n", "py", "python3", "t.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = load_hatchet(tmp_path / "py.hatchet")[0]
    assert sum(c["metrics"].get("count", 0) for c in child(root, "py")["children"]) == 5, dump(root)


def build_scoped_app(tmp_path_factory, rdc=False):
    """tests/gpu/native/scoped_app.cu, built with nvcc against proton/instrument.cuh; with rdc,
    as relocatable device code together with scoped_app_part.cu."""
    if NVCC is None:
        pytest.skip("needs nvcc")
    import proton

    out = tmp_path_factory.mktemp("scoped") / "scoped_app"
    native_dir = Path(__file__).parent / "native"
    sources = [str(native_dir / "scoped_app.cu")]
    if rdc:
        sources += ["-rdc=true", "-DSCOPED_APP_RDC", str(native_dir / "scoped_app_part.cu")]
    command = [NVCC, "-std=c++17", "-arch=native", f"-I{proton.get_include()}", *sources]
    result = subprocess.run(
        [*command, "-lcuda", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def scoped_app(tmp_path_factory):
    return build_scoped_app(tmp_path_factory)


def scaled_kernels(node):
    """Every `scaled` kernel node under node (eager launches, and replays under <captured_at>)."""
    here = [node] if node["frame"]["name"].startswith("scaled") else []
    return here + [k for c in node["children"] for k in scaled_kernels(c)]


@pytest.mark.parametrize("mode", ["plain", "reset", "capture", "cooperative"])
def test_instrumented_native_program_records_its_scopes_and_exits_cleanly(
    scoped_app, tmp_path, mode
):
    # The injected session writes its profile from an atexit function, after the main thread's
    # thread_local objects are destroyed: interning the scope names there used the string
    # table's destroyed per-thread cache, and the program died of SIGSEGV with no profile.
    # With cudaDeviceReset, the scopes recorded before it went with the context, unsaid, and
    # the module loaded again after it was taken as instrumented already: none recorded.
    # With the kernel's first launches in a capture on a blocking stream, setting its module up
    # (allocations, synchronous copies on the legacy stream) ended the capture. Cooperative
    # launches (cuLaunchCooperativeKernel) were not taken for launches of the module.
    args = [] if mode == "plain" else [mode]
    r = proton_cli("-b", "instrumentation", "-n", "scoped", str(scoped_app), *args, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "done 0" in r.stdout
    root = load_hatchet(tmp_path / "scoped.hatchet")[0]
    launches = {"plain": 10, "reset": 15, "capture": 10 + 3 * 2, "cooperative": 10}[mode]
    kernels = scaled_kernels(root)
    assert sum(k["metrics"]["count"] for k in kernels) == launches, dump(root)
    assert all([c["frame"]["name"] for c in k["children"]] == ["body"] for k in kernels)
    bodies = [k["children"][0]["metrics"] for k in kernels]
    assert sum(b["count"] for b in bodies) == launches * 64 * 4, dump(root)  # one per warp
    assert all(b["cycles"] > 0 for b in bodies), dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_native_events_unattributed", 0) == 0, stats
    assert stats.get("instrumentation_native_events_lost", 0) == 0, stats


def test_native_scopes_of_two_contexts_on_one_gpu_stay_with_their_launches(scoped_app, tmp_path):
    # %gridid numbers launches per context by PTX's definition (an H100 numbered the second
    # context's launches on from the first's). Launches are found by context and grid id: each
    # NVTX range holds its own launches, and each launch the scopes of its 4 warps x 64 CTAs.
    r = proton_cli("-b", "instrumentation", "-n", "ctx", str(scoped_app), "contexts", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "done 0" in r.stdout
    root = load_hatchet(tmp_path / "ctx.hatchet")[0]
    for rng, launches in (("primary", 10), ("second", 5)):
        kernels = scaled_kernels(child(root, rng))
        assert sum(k["metrics"]["count"] for k in kernels) == launches, dump(root)
        bodies = [
            c["metrics"] for k in kernels for c in k["children"] if c["frame"]["name"] == "body"
        ]
        assert sum(b["count"] for b in bodies) == launches * 64 * 4, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_native_events_unattributed", 0) == 0, stats
    assert stats.get("instrumentation_native_modules", 0) == 2, stats


def test_relocatable_device_code_records_the_scopes_of_every_unit(tmp_path_factory, tmp_path):
    # With -rdc=true nvcc renamed a static control global per unit: Proton did not find it, and
    # the kernels ran with no scopes and nothing said. Units linked into one module now share
    # one weak global: 10 launches of one unit's kernel and 5 of the other's, 4 warps x 64 CTAs.
    app = build_scoped_app(tmp_path_factory, rdc=True)
    r = proton_cli("-b", "instrumentation", "-n", "rdc", str(app), "rdc", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "done 0" in r.stdout
    root = load_hatchet(tmp_path / "rdc.hatchet")[0]
    for kernel, scope, launches in (("scaled", "body", 10), ("shifted", "part", 5)):
        nodes = [c for c in root["children"] if c["frame"]["name"].startswith(kernel)]
        assert sum(k["metrics"]["count"] for k in nodes) == launches, dump(root)
        scopes = [c["metrics"] for k in nodes for c in k["children"] if c["frame"]["name"] == scope]
        assert sum(m["count"] for m in scopes) == launches * 64 * 4, dump(root)
    stats = dict(root["proton_metadata"]["stats"])
    assert stats.get("instrumentation_native_modules", 0) == 1, stats
    assert stats.get("instrumentation_native_events_unattributed", 0) == 0, stats
