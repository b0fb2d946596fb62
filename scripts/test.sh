#!/usr/bin/env bash
# Runs every test this machine can run: format checks, C++ unit tests, Python tests, fuzzing
# (GPU tests are skipped without an NVIDIA GPU). Run from anywhere inside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

echo "== install proton and test dependencies"
"$PY" -m pip install -q --disable-pip-version-check ".[test]" ruff

echo "== format checks"
clang-format --dry-run --Werror $(find csrc -name '*.h' -o -name '*.cc')
"$PY" -m ruff format --check python tests bench examples

echo "== C++ unit tests"
cmake -S . -B build/tests -G Ninja -DPROTON_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/tests
ctest --test-dir build/tests --output-on-failure

echo "== Python tests"
# From tests/, so that `import proton` finds the installed package, not the source tree.
"$PY" -m pytest tests -q -p no:cacheprovider

echo "== fuzz every profile reader (fixed number of executions)"
# Needs clang with libFuzzer and atheris (see fuzz/run.sh); .ci/run installs them and sets
# PROTON_REQUIRE_FUZZ=1 so that a missing tool fails instead of skipping.
if command -v clang++ >/dev/null && "$PY" -c "import atheris" 2>/dev/null; then
  bash fuzz/run.sh
elif [ "${PROTON_REQUIRE_FUZZ:-0}" = 1 ]; then
  echo "fuzzing needs clang++ and atheris" && exit 1
else
  echo "skipped: needs clang++ (with libFuzzer) and atheris; see fuzz/run.sh"
fi
