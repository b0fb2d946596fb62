#!/usr/bin/env bash
# Fuzzes every profile reader for a fixed number of executions (issue 7), deterministically
# (-seed=1, fresh working corpora), and exits non-zero if any target crashes, reports a
# sanitizer error, raises an unexpected exception or hangs. About 2-3 minutes on 2 cores,
# the builds included. Targets (each source file's header says what it checks):
#
#   hatchet_json     libFuzzer + ASan/UBSan  C++ readHatchetJson, tree checks, renderer
#   hatchet_msgpack  libFuzzer + ASan/UBSan  C++ readHatchetMsgpack, the same checks
#   viewer_load      atheris (libFuzzer)     proton.viewer.load (C++ fast path included)
#                                            against a plain json/MessagePack reading, render
#   msgpack          atheris (libFuzzer)     proton.viewer.msgpack.unpackb vs `msgpack`
#
# Each target also runs every file of fuzz/regressions/<target>/ and its seed corpora once
# (the C++ readers also get the Python loader's regressions, which are profile files too).
# On a fresh Debian machine (what CI needs on top of .ci/run's g++ cmake ninja-build;
# libclang-rt-dev holds libFuzzer and the sanitizer runtimes, which clang only recommends):
#
#   apt-get install -y -qq clang libclang-rt-dev python3-dev
#   python3 -m pip install -q --disable-pip-version-check atheris nanobind msgpack
#   bash fuzz/run.sh
#
# Options (environment): PROTON_FUZZ_SCALE=10 runs ten times as many executions (a longer
# local session); PYTHON picks the interpreter. A crash leaves its input in
# build/fuzz/artifacts/<target>/: minimise it, save it in fuzz/regressions/<target>/, fix
# the reader and add a test (tests/python/test_fuzz_regressions.py runs that directory).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SCALE=${PROTON_FUZZ_SCALE:-1}
OUT=build/fuzz
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)

# build DIR TARGET CMAKE_ARGS...: configures and builds with clang; output only on failure.
build() {
  local dir=$1 target=$2
  shift 2
  mkdir -p "$dir"
  { cmake -B "$dir" "${GENERATOR[@]}" -DCMAKE_CXX_COMPILER=clang++ "$@" &&
    cmake --build "$dir" --target "$target" -j2; } >"$dir.log" 2>&1 || { cat "$dir.log" && return 1; }
}

for module in atheris nanobind; do
  "$PY" -c "import $module" 2>/dev/null ||
    { echo "fuzz/run.sh needs $module: $PY -m pip install atheris nanobind msgpack" && exit 1; }
done

echo "== build the C++ fuzz targets and proton._C with clang in $OUT"
build "$OUT/cc" all -S fuzz
# The Python targets load this working tree's package with its extension built next to it.
build "$OUT/py" _C -S . -DPROTON_BUILD_PYTHON=ON -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$PY")"
rm -rf "$OUT/pkg" && mkdir -p "$OUT/pkg"
cp -r python/proton "$OUT/pkg/"
rm -f "$OUT"/pkg/proton/_C.*so
cp "$OUT"/py/_C.*so "$OUT/pkg/proton/"
cat fuzz/hatchet_json.dict fuzz/hatchet_msgpack.dict >"$OUT/viewer_load.dict"

# Files written by viewer_load go to memory where it can: a disk write per input costs more
# than the load itself.
SCRATCH=$(mktemp -d -p /dev/shm proton-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT

# fuzz TARGET RUNS DICT SEEDS... -- COMMAND...: runs COMMAND with libFuzzer's flags.
fuzz() {
  local target=$1 runs=$(($2 * SCALE)) dict=$3
  shift 3
  local seeds=()
  while [ "$1" != "--" ]; do
    seeds+=("$1")
    shift
  done
  shift
  [ -d "fuzz/regressions/$target" ] && seeds+=("fuzz/regressions/$target")
  rm -rf "$OUT/work/$target" "$OUT/artifacts/$target"
  mkdir -p "$OUT/work/$target" "$OUT/artifacts/$target"
  "$@" -runs="$runs" -seed=1 -max_len=4096 -timeout=10 -rss_limit_mb=2048 -dict="$dict" \
    -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$target/" \
    "$OUT/work/$target" "${seeds[@]}" >"$OUT/logs/$target.log" 2>&1
}

mkdir -p "$OUT/logs"
export PYTHONHASHSEED=0 PYTHONPATH="$OUT/pkg:fuzz" TMPDIR="$SCRATCH"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
echo "== fuzz (logs in $OUT/logs)"
start=$SECONDS
# Two lanes for two cores, each about as long as the other; a lane goes on past a failure,
# which the summary below reports.
(
  fuzz hatchet_json 600000 fuzz/hatchet_json.dict fuzz/corpus/json tests/golden \
    fuzz/regressions/viewer_load -- \
    "$OUT/cc/hatchet_json_fuzzer" || true
  fuzz viewer_load 100000 "$OUT/viewer_load.dict" fuzz/corpus/json fuzz/corpus/msgpack \
    tests/golden -- "$PY" fuzz/viewer_load_fuzzer.py || true
) &
(
  fuzz hatchet_msgpack 600000 fuzz/hatchet_msgpack.dict fuzz/corpus/msgpack tests/golden \
    fuzz/regressions/viewer_load -- \
    "$OUT/cc/hatchet_msgpack_fuzzer" || true
  fuzz msgpack 40000 fuzz/hatchet_msgpack.dict fuzz/corpus/msgpack tests/golden -- \
    "$PY" fuzz/msgpack_fuzzer.py || true
) &
wait

failed=0
for target in hatchet_json hatchet_msgpack viewer_load msgpack; do
  log="$OUT/logs/$target.log"
  done_line=$(grep -E '^Done [0-9]+ runs' "$log" 2>/dev/null || true)
  crashes=$(ls "$OUT/artifacts/$target" 2>/dev/null)
  if [ -n "$done_line" ] && [ -z "$crashes" ]; then
    echo "ok      $target: $done_line"
  else
    failed=1
    echo "FAILED  $target (log: $log; inputs: $OUT/artifacts/$target/)"
    grep -v -E '^#[0-9]+ +(NEW|REDUCE|pulse)|^INFO: Instrumenting' "$log" | tail -40
  fi
done
echo "== fuzzing took $((SECONDS - start)) s"
exit $failed
