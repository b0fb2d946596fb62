#!/usr/bin/env bash
# Runs Triton's own profiler tests (third_party/proton/test of triton-lang/triton) against Proton:
# `import triton.profiler` (and every triton.profiler.X) is Proton in the pytest process and in
# every process it starts (sitecustomize.py + redirect.py on PYTHONPATH), the rest of `triton` is
# the installed Triton.
#
#   bash scripts/triton_compat/run.sh TESTS_DIR OUT_DIR [pytest args]
#
# Two pytest runs, both with -p no:cacheprovider -rA -v and a JUnit XML file: test_api.py,
# test_profile.py, test_cmd.py and test_viewer.py together ("main"), then test_instrumentation.py
# ("instrumentation"), --continue-on-collection-errors (a file that fails to import does not stop
# the others). Extra arguments (-k EXPR, -x, --device=...) go to both. The tests run in
# OUT_DIR/work (files they write to the current directory land there).
#
# OUT_DIR gets: preflight.log (versions, and a check that triton.profiler is Proton),
# pytest_<run>.log, junit_<run>.xml, files/<test file>.log (each test's outcome and failure
# text), summary.txt / summary.json (passed/failed/skipped/error counts per file, failing ids).
#
# Exits 0 whatever the tests do (the counts are the result); 2 when it cannot run them (no such
# directory, or the redirect does not take effect). TRITON_COMPAT_TIMEOUT=SECONDS bounds each
# pytest run (default: none; a run cut short is counted from its log); PYTHON picks the
# interpreter (default python3).
set -u
if [ $# -lt 2 ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
TESTS=$(cd "$1" 2>/dev/null && pwd) || {
  echo "run.sh: no tests directory '$1'" >&2
  exit 2
}
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
shift 2
EXTRA=("$@")
PYTHON=${PYTHON:-python3}
TIMEOUT=${TRITON_COMPAT_TIMEOUT:-0}

export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
unset PROTON_TRITON_REDIRECT

# The redirect must be in place before anything imports Triton's own profiler, here and in
# subprocesses; check it as the tests will see it.
"$PYTHON" - "$TESTS" >"$OUT/preflight.log" 2>&1 <<'EOF'
import os, shutil, sys
redirect = sys.modules.get("_proton_triton_redirect")
print("python", sys.version.split()[0], sys.executable)
print("tests", sys.argv[1])
assert redirect is not None and redirect.installed(), "sitecustomize did not install the redirect"
import triton
import triton.profiler
import proton
print("triton", getattr(triton, "__version__", "?"), os.path.dirname(triton.__file__))
print("proton", getattr(proton, "__version__", "?"), os.path.dirname(proton.__file__))
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)
except Exception as error:  # noqa: BLE001
    print("torch: not importable:", error)
for tool in ("proton", "proton-viewer"):
    print(tool, shutil.which(tool))
assert triton.profiler is proton, "triton.profiler is not proton"
try:  # a submodule too; one that fails to import is the tests' business, not the redirect's
    import triton.profiler.viewer
    assert triton.profiler.viewer is sys.modules["proton.viewer"], "two viewer modules"
except Exception as error:  # noqa: BLE001
    if isinstance(error, AssertionError):
        raise
    print("warning: triton.profiler.viewer does not import:", repr(error))
foreign = redirect.foreign_modules()
assert not foreign, f"Triton's own profiler modules are loaded: {foreign}"
print("redirect: ok (triton.profiler is proton)")
EOF
preflight=$?
cat "$OUT/preflight.log"
if [ $preflight -ne 0 ]; then
  echo "run.sh: preflight failed, see $OUT/preflight.log" >&2
  exit 2
fi

mkdir -p "$OUT/work"
# Names the tests import that this Triton lacks become placeholders that skip the tests using
# them (shim.py): the files are run from a patched copy.
"$PYTHON" "$HERE/shim.py" "$TESTS" "$OUT/tests" >"$OUT/shim.log" 2>&1 || {
  echo "run.sh: shim failed, see $OUT/shim.log" >&2
  exit 2
}
cat "$OUT/shim.log"
TESTS="$OUT/tests"
groups=()
run_group() { # name test-files... (pytest arguments from EXTRA)
  local name=$1
  shift
  local files=()
  local f
  for f in "$@"; do
    if [ -f "$TESTS/$f" ]; then
      files+=("$TESTS/$f")
    else
      echo "run.sh: $TESTS/$f missing, not run" | tee -a "$OUT/preflight.log" >&2
    fi
  done
  [ ${#files[@]} -gt 0 ] || return 0
  local wrap=()
  if [ "$TIMEOUT" != 0 ]; then
    wrap=(timeout --kill-after=30 "$TIMEOUT")
  fi
  local start rc
  start=$(date +%s)
  echo "pytest $name: ${files[*]##*/}"
  (cd "$OUT/work" && ${wrap[@]+"${wrap[@]}"} "$PYTHON" -m pytest "${files[@]}" --rootdir="$TESTS" \
    -p no:cacheprovider -rA -v --continue-on-collection-errors -o junit_family=xunit1 \
    --junitxml="$OUT/junit_$name.xml" \
    ${EXTRA[@]+"${EXTRA[@]}"}) \
    >"$OUT/pytest_$name.log" 2>&1
  rc=$?
  tail -n 1 "$OUT/pytest_$name.log"
  local names="${files[*]##*/}"
  groups+=("$name:$rc:$(($(date +%s) - start)):${names// /,}")
}

rm -f "$OUT"/junit_*.xml "$OUT"/pytest_*.log
run_group main test_api.py test_profile.py test_cmd.py test_viewer.py
run_group instrumentation test_instrumentation.py

echo
"$PYTHON" "$HERE/summarize.py" "$OUT" "${groups[@]}"
exit 0
