"""The build finds CUPTI and CUDA headers for both CUPTI majors in NVIDIA's pip wheels, with no
CUDA toolkit (cmake/ProtonCudaHeaders.cmake). Configure-only: no compiler runs in the first
tests, which lay out wheel-shaped header trees; the last configures the real project against
the NVIDIA wheels installed in this Python."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _header_set(include: Path, cupti_api: int, cuda_version: int, nvtx=True, cuda_dir=None):
    _write(include / "cupti.h", "/* cupti */\n")
    _write(include / "cupti_version.h", f"#define CUPTI_API_VERSION {cupti_api}\n")
    _write((cuda_dir or include) / "cuda.h", f"#define CUDA_VERSION {cuda_version}\n")
    if nvtx:
        _write(include / "nvtx3" / "nvToolsExt.h", "/* nvtx */\n")


def _wheels(root: Path) -> Path:
    """The layout of nvidia-cuda-cupti-cu12 + nvidia-cuda-runtime-cu12 + nvidia-nvtx-cu12 and
    of their CUDA 13 counterparts (all under nvidia/cu13/)."""
    nvidia = root / "site-packages" / "nvidia"
    _header_set(
        nvidia / "cuda_cupti" / "include",
        28,
        12090,
        nvtx=False,
        cuda_dir=nvidia / "cuda_runtime" / "include",
    )
    _write(nvidia / "nvtx" / "include" / "nvtx3" / "nvToolsExt.h", "/* nvtx */\n")
    _header_set(nvidia / "cu13" / "include", 130500, 13050)
    return nvidia


def _probe(tmp_path: Path, *defines: str, env_extra=None) -> dict:
    """Configures a project that only includes the header finder; returns {12: dirs, 13: dirs}."""
    probe = tmp_path / "probe"
    _write(
        probe / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(probe NONE)\n"
        f'include("{REPO}/cmake/ProtonCudaHeaders.cmake")\n'
        'message(STATUS "HEADERS12=${PROTON_CUDA12_HEADERS}")\n'
        'message(STATUS "HEADERS13=${PROTON_CUDA13_HEADERS}")\n',
    )
    env = dict(os.environ, CUDA_HOME="", CUDA_PATH="")
    env.update(env_extra or {})
    out = subprocess.run(
        ["cmake", "-S", str(probe), "-B", str(tmp_path / "build"), *defines],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for major in (12, 13):
        value = re.search(rf"HEADERS{major}=(.*)", out).group(1).strip()
        found[major] = [Path(p) for p in value.split(";")] if value else []
    return found


def test_both_majors_come_from_the_wheels_without_a_toolkit(tmp_path):
    nvidia = _wheels(tmp_path)
    found = _probe(tmp_path, "-DPROTON_USE_CUDA_TOOLKIT=OFF", f"-DPROTON_CUDA_WHEEL_ROOTS={nvidia}")
    assert found[12] == [
        nvidia / "cuda_cupti" / "include",
        nvidia / "cuda_runtime" / "include",
        nvidia / "nvtx" / "include",
    ]
    assert found[13] == [nvidia / "cu13" / "include"]


def test_a_toolkit_serves_its_own_major_and_the_wheels_the_other(tmp_path):
    nvidia = _wheels(tmp_path)
    toolkit = tmp_path / "cuda-13.0" / "include"
    _header_set(toolkit, 130001, 13000)
    found = _probe(
        tmp_path, f"-DPROTON_CUDA_INCLUDE_DIRS={toolkit}", f"-DPROTON_CUDA_WHEEL_ROOTS={nvidia}"
    )
    assert found[13] == [toolkit]
    assert found[12][0] == nvidia / "cuda_cupti" / "include"


def test_headers_of_mixed_majors_are_not_used_together(tmp_path):
    nvidia = tmp_path / "nvidia"
    # CUDA 12's CUPTI next to CUDA 13's cuda.h: neither major may build from it.
    _header_set(
        nvidia / "cuda_cupti" / "include", 28, 13000, cuda_dir=nvidia / "cuda_runtime" / "include"
    )
    found = _probe(tmp_path, "-DPROTON_USE_CUDA_TOOLKIT=OFF", f"-DPROTON_CUDA_WHEEL_ROOTS={nvidia}")
    assert found == {12: [], 13: []}


def test_nvtx_headers_are_borrowed_from_the_other_major(tmp_path):
    nvidia = _wheels(tmp_path)
    shutil.rmtree(nvidia / "nvtx")  # no nvidia-nvtx-cu12: CUDA 13's nvtx3 serves both
    found = _probe(tmp_path, "-DPROTON_USE_CUDA_TOOLKIT=OFF", f"-DPROTON_CUDA_WHEEL_ROOTS={nvidia}")
    assert found[12][-1] == nvidia / "cu13" / "include"


def _installed_wheel_roots():
    try:
        import nvidia  # noqa: F401  (namespace package of NVIDIA's wheels)
    except ImportError:
        return []
    roots = [Path(p) for p in nvidia.__path__]
    have12 = any((r / "cuda_cupti" / "include" / "cupti.h").exists() for r in roots)
    have13 = any((r / "cu13" / "include" / "cupti.h").exists() for r in roots)
    return roots if have12 and have13 else []


@pytest.mark.skipif(
    not _installed_wheel_roots(), reason="needs NVIDIA's cu12 and cu13 header wheels"
)
def test_the_project_configures_both_backends_from_installed_wheels(tmp_path):
    env = dict(os.environ, CUDA_HOME="", CUDA_PATH="")
    out = subprocess.run(
        [
            "cmake",
            "-S",
            str(REPO),
            "-B",
            str(tmp_path / "build"),
            "-DPROTON_USE_CUDA_TOOLKIT=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    roots = _installed_wheel_roots()
    for major in (12, 13):
        line = re.search(rf"Proton: CUPTI {major} backend on \(headers: (.*)\)", out)
        assert line, out
        dirs = [Path(p) for p in line.group(1).split(";")]
        assert all(any(root in d.parents for root in roots) for d in dirs), dirs
