#!/usr/bin/env bash
# Builds and installs Proton on a GPU machine that has PyTorch's NVIDIA wheels but no package
# registry, with no CUDA toolkit headers in the compile (PROTON_USE_CUDA_TOOLKIT=OFF):
# CUDA 13's CUPTI/driver headers come from the interpreter's `nvidia` wheels (cu13/include),
# CUDA 12's from a folder of header trees extracted from NVIDIA's cu12 wheels:
#
#   EXTRA_WHEEL_ROOTS=".carry/cu12/nvidia .carry/cu13crt/nvidia" bash scripts/gpu_build.sh
#
# (.carry/cu12/nvidia/{cuda_cupti,cuda_runtime,nvtx,cuda_nvcc}/include and nvidia-cuda-crt's
# cu13/include/crt, headers only, extracted from the wheels, so no CUDA 12 library lands on
# sys.path). Prints which CUPTI majors were built.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
roots=$("$PY" -c "import nvidia; print(';'.join(nvidia.__path__))")
for extra in ${EXTRA_WHEEL_ROOTS:-}; do
  roots="$roots;$(cd "$extra" && pwd)"
done
export CMAKE_ARGS="-DPROTON_USE_CUDA_TOOLKIT=OFF -DPROTON_CUDA_WHEEL_ROOTS=$roots ${CMAKE_ARGS:-}"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
"$PY" -m pip install -v --no-build-isolation --no-deps . 2>&1 | tee /tmp/proton_build.log |
  grep -E "Proton: |error|Successfully installed" || true
grep -q "Successfully installed" /tmp/proton_build.log
