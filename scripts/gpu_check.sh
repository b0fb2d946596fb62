#!/usr/bin/env bash
# Builds Proton on a GPU machine and runs its GPU tests (and, when given, Triton's own profiler
# tests against it), writing every log under OUT (default: ./gpu_logs). Test failures do not
# stop the script: the logs and the summary are the result.
#
#   bash scripts/gpu_check.sh [build] [gpu[:PYTEST_ARGS]] [triton:TESTS_DIR] [cmd:COMMAND] ...
#
#   build               scripts/gpu_build.sh with the header trees in .carry/ (see that script)
#   gpu                 pytest -m gpu tests/gpu; gpu:ARGS passes ARGS instead (files, -k ...)
#   triton:DIR          scripts/triton_compat/run.sh DIR (Triton's third_party/proton/test)
#   cmd:COMMAND         any command, its output in OUT/cmd_<n>.log
#
# Wheels in .whl/ (llnl-hatchet and its needs, for tests that read profiles with it) are
# installed into /tmp/site first, which goes on PYTHONPATH.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >"$OUT/wheels.log" 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
n=0
summary="$OUT/summary.txt"
: >"$summary"
for step in "$@"; do
  n=$((n + 1))
  start=$(date +%s)
  case "$step" in
    build)
      EXTRA_WHEEL_ROOTS="${EXTRA_WHEEL_ROOTS:-.carry/cu12/nvidia .carry/cu13crt/nvidia}" \
        bash scripts/gpu_build.sh >"$OUT/build.log" 2>&1
      rc=$?
      cp /tmp/proton_build.log "$OUT/build_full.log" 2>/dev/null
      ;;
    gpu | gpu:*)
      args=${step#gpu}
      args=${args#:}
      # shellcheck disable=SC2086
      (cd tests && python3 -m pytest ${args:-gpu} -m gpu -q -p no:cacheprovider -rfEs \
        --junitxml="$OUT/gpu_$n.xml") >"$OUT/gpu_$n.log" 2>&1
      rc=$?
      ;;
    triton:*)
      bash scripts/triton_compat/run.sh "${step#triton:}" "$OUT/triton" >"$OUT/triton_run.log" 2>&1
      rc=$?
      # Few files come back from a GPU machine: the whole result as one archive.
      tar czf "$OUT/triton.tgz" -C "$OUT" --exclude=work --exclude=tests triton && rm -rf "$OUT/triton"
      ;;
    cmd:*)
      bash -c "${step#cmd:}" >"$OUT/cmd_$n.log" 2>&1
      rc=$?
      ;;
    *)
      echo "unknown step: $step" >>"$summary"
      continue
      ;;
  esac
  echo "step $n '$step': exit $rc in $(($(date +%s) - start)) s" >>"$summary"
  case "$step" in
    gpu*) tail -n 1 "$OUT/gpu_$n.log" >>"$summary" ;;
  esac
done
cat "$summary"
