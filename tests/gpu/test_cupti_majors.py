"""Both CUPTI majors in one build (issue 14, item 2), on a GPU: which libcupti a process ends
up with, that it is the only one mapped, and that kernels are counted exactly with it.

Each case runs in a fresh process (a process chooses its CUPTI once). Expected machine: a
driver for CUDA 13, CUDA 13's libcupti.so.13 on the loader path, and Triton's bundled CUDA 12
CUPTI in triton/backends/nvidia/lib/cupti. Cases whose library is absent are skipped."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Runs in the child: optionally preloads a libcupti (as PyTorch or another tool would), profiles
# 10 launches of one kernel inside a scope, and reports the kernels and every libcupti mapped.
CHILD = textwrap.dedent(
    """
    import ctypes, json, os, sys
    preload = os.environ.get("PRELOAD_CUPTI")
    if preload:
        ctypes.CDLL(preload, mode=ctypes.RTLD_GLOBAL)
    import proton
    if os.environ.get("NO_TORCH"):
        # A plain CUDA program: PyTorch would map its own libcupti at import, and a process
        # keeps the CUPTI it already has. The driver API, a PTX kernel, ten launches.
        cu = ctypes.CDLL("libcuda.so.1")
        def ok(r):
            assert r == 0, r
        ok(cu.cuInit(0))
        dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        ok(cu.cuDeviceGet(ctypes.byref(dev), 0))
        ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        ok(cu.cuCtxSetCurrent(ctx))
        ptx = b".version 7.0\\n.target sm_70\\n.address_size 64\\n.visible .entry noop() { ret; }\\n"
        ok(cu.cuModuleLoadData(ctypes.byref(mod), ptx))
        ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"noop"))
        def run():
            for _ in range(10):
                ok(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None))
            ok(cu.cuCtxSynchronize())
        sync = lambda: cu.cuCtxSynchronize()
    else:
        import torch
        x = torch.zeros(1024, device="cuda")
        def run():
            for _ in range(10):
                x.add_(1)
        sync = torch.cuda.synchronize
    sync()
    proton.start("majors", backend="cupti")
    with proton.scope("ten"):
        run()
    sync()
    proton.finalize()
    with open("/proc/self/maps") as f:
        mapped = sorted({l.split()[-1] for l in f if "libcupti.so" in l})
    versions = []
    for path in mapped:
        v = ctypes.c_uint32()
        ctypes.CDLL(path).cuptiGetVersion(ctypes.byref(v))
        versions.append(v.value)
    with open("majors.hatchet") as f:
        tree = json.load(f)[0]
    print("RESULT " + json.dumps({"mapped": mapped, "versions": versions, "tree": tree}))
    """
)


def _major(version):
    return version // 10000 if version >= 10000 else 12


def _run(tmp_path, **env):
    full = dict(os.environ)
    full.pop("PROTON_CUPTI_LIB_PATH", None)
    full.update(env)
    r = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    result = json.loads(lines[0][len("RESULT ") :])
    assert len(result["mapped"]) == 1, result["mapped"]  # one CUPTI, never two
    ten = [c for c in result["tree"]["children"] if c["frame"]["name"] == "ten"]
    assert len(ten) == 1, [c["frame"]["name"] for c in result["tree"]["children"]]
    counts = [c["metrics"].get("count", 0) for c in ten[0]["children"]]
    assert sum(counts) == 10, ten[0]
    return result["mapped"][0], _major(result["versions"][0])


# Loads a libcupti in a throwaway process (never in this one, where it would become "the CUPTI
# already loaded" for every later GPU test) and prints its file and API version.
PROBE = textwrap.dedent(
    """
    import ctypes, sys
    lib = ctypes.CDLL(sys.argv[1])
    v = ctypes.c_uint32()
    lib.cuptiGetVersion(ctypes.byref(v))
    with open("/proc/self/maps") as f:
        paths = sorted({l.split()[-1] for l in f if "libcupti.so" in l})
    print(paths[0], v.value)
    """
)


def _probe(name_or_path):
    """(file, CUDA major) of a loadable libcupti, or None."""
    r = subprocess.run(
        [sys.executable, "-c", PROBE, name_or_path],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if r.returncode != 0 or not r.stdout.strip():
        return None
    path, version = r.stdout.split()
    return path, _major(int(version))


def _triton_cupti12():
    try:
        import triton
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "lib", "cupti")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.startswith("libcupti.so"):
            found = _probe(os.path.join(d, name))
            if found and found[1] == 12:
                return os.path.join(d, name)
    return None


def _cupti13():
    """libcupti.so.13 as the system loader finds it, resolved to its file."""
    found = _probe("libcupti.so.13")
    return found[0] if found and found[1] == 13 else None


def _built():
    from proton import _C

    return set(_C.cupti_majors())


CUPTI12 = _triton_cupti12()
CUPTI13 = _cupti13()
BUILT = _built()
# A case needs the library on the machine and a backend for its major in this build (a build
# without CUDA 12's headers has only the CUDA 13 backend, and the reverse).
need12 = pytest.mark.skipif(
    CUPTI12 is None or 12 not in BUILT,
    reason="no CUDA 12 CUPTI in the Triton wheel"
    if CUPTI12 is None
    else f"this build has no CUPTI 12 backend (built: {sorted(BUILT)})",
)
need13 = pytest.mark.skipif(
    CUPTI13 is None or 13 not in BUILT,
    reason="no libcupti.so.13 on the loader path"
    if CUPTI13 is None
    else f"this build has no CUPTI 13 backend (built: {sorted(BUILT)})",
)


@need12
@need13
def test_default_is_the_policy_major_when_both_are_available(tmp_path):
    path, major = _run(tmp_path)
    assert major == 13, path  # preferredCuptiMajor(): the newest the driver runs


@need13
def test_override_selects_cuda13(tmp_path):
    path, major = _run(tmp_path, PROTON_CUPTI_LIB_PATH=CUPTI13)
    assert major == 13, path


@need12
def test_override_directory_selects_cuda12(tmp_path):
    path, major = _run(tmp_path, NO_TORCH="1", PROTON_CUPTI_LIB_PATH=os.path.dirname(CUPTI12))
    assert major == 12, path


@need12
@need13
def test_an_override_cannot_replace_the_cupti_pytorch_already_loaded(tmp_path):
    # PyTorch (cu13) maps CUDA 13's CUPTI when imported: one CUPTI per process, so it is used.
    path, major = _run(tmp_path, PROTON_CUPTI_LIB_PATH=os.path.dirname(CUPTI12))
    assert major == 13, path


@need13
def test_a_cuda13_cupti_already_loaded_is_used_and_no_other(tmp_path):
    # Without PyTorch, which would map its own wheel's copy beside a toolkit's preloaded one.
    path, major = _run(tmp_path, NO_TORCH="1", PRELOAD_CUPTI=CUPTI13)
    assert major == 13, path


@need12
@need13
def test_a_loaded_cupti_wins_over_an_override_of_the_other_major(tmp_path):
    path, major = _run(tmp_path, NO_TORCH="1", PRELOAD_CUPTI=CUPTI12, PROTON_CUPTI_LIB_PATH=CUPTI13)
    assert major == 12, path
