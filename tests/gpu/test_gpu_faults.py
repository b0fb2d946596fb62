"""A program whose kernel faults (an illegal address) under Proton: the program sees its own
error and keeps its exit code, the profile is written, and what the failed context took with
it (kernel times, intra-kernel records Proton had not read back yet) is said once, naming the
error, and counted; what a flush had read back before the fault is all there, and kernels
that ended well before it keep their times."""

import json

import pytest
from proton_test_utils import load_hatchet, run_program

pytest.importorskip("torch")
pytest.importorskip("triton")

PROGRAM = """
import sys, torch, triton, triton.language as tl, proton, proton.language as pl

@triton.jit
def good(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    with pl.scope("body"):
        v = tl.load(x + offs, mask=offs < n)
    tl.store(x + offs, v + 1, mask=offs < n)

@triton.jit
def bad(addr):
    tl.store(addr.to(tl.pointer_type(tl.float32)), 1.0)

kind, mode = sys.argv[1], sys.argv[2]
x = torch.zeros(4096, device="cuda")
good[(4,)](x, 4096, BLOCK=1024)  # compiled and loaded before the session
torch.cuda.synchronize()
options = {"cupti": {}, "tree": {"backend": "instrumentation"},
           "trace": {"backend": "instrumentation", "data": "trace"}}[kind]
proton.start("f", **options)
for _ in range(3):
    good[(4,)](x, 4096, BLOCK=1024)
torch.cuda.synchronize()
if mode == "flushed":  # read back before the fault
    proton.deactivate(0, flushing=True)
    proton.activate(0)
if mode == "aged":  # longer ago than Proton's period of having CUPTI hand records over (1 s)
    import time
    time.sleep(2.5)
bad[(1,)](1 << 44)
try:
    torch.cuda.synchronize()
except RuntimeError as e:
    print("CAUGHT", "illegal memory access" in str(e), flush=True)
    if mode == "uncaught":
        raise
proton.finalize()
print("FINALIZED", flush=True)
"""

WARNING = "[PROTON] the CUDA context of GPU 0 failed (CUDA_ERROR_ILLEGAL_ADDRESS"


def _run(tmp_path, kind, mode):
    r = run_program(PROGRAM, tmp_path, after=(kind, mode), timeout=180)
    assert "CAUGHT True" in r.stdout, r.stdout + r.stderr
    assert r.stderr.count(WARNING) == 1, r.stderr
    return r


def _untimed_since_the_last_hand_over(data, stats):
    """CUPTI gives the kernels of a failed context whose records it had not handed over yet
    their records without times; Proton has it hand them over every second, so the three
    vector adds, which ended moments before the fault, went either with it or before it."""
    if isinstance(data, dict):  # a trace: a kernel without a time has no slice
        slices = [e for e in data["traceEvents"] if e["ph"] == "X" and e["name"] == "good"]
        handed_over = len(slices) == 3
        assert len(slices) in (0, 3)
    else:
        good = next(c for c in data[0]["children"] if c["frame"]["name"] == "good")
        handed_over = good["metrics"]["time (ns)"] > 0
    assert stats["kernel_records_untimed"] == (1 if handed_over else 4)


def _stats(data):
    return data["otherData" if isinstance(data, dict) else 0]["proton_metadata"]["stats"]


@pytest.mark.parametrize("kind", ["cupti", "tree", "trace"])
def test_a_fault_the_program_catches_leaves_a_profile_that_says_what_was_lost(tmp_path, kind):
    r = _run(tmp_path, kind, "caught")
    assert r.returncode == 0 and "FINALIZED" in r.stdout, r.stderr
    if kind == "trace":
        data = json.loads((tmp_path / "f.chrome_trace").read_text())
        names = {e["name"] for e in data["traceEvents"] if e["ph"] == "X"}
        assert names <= {"good"}  # no warp slices: the ring was not read back
    else:
        data = load_hatchet(tmp_path / "f.hatchet")
        counts = {c["frame"]["name"]: c["metrics"]["count"] for c in data[0]["children"]}
        assert counts == {"good": 3, "bad": 1}
    stats = _stats(data)
    assert stats["gpu_contexts_failed"] == 1
    assert stats["kernels_never_completed"] == 0
    _untimed_since_the_last_hand_over(data, stats)
    if kind != "cupti":  # the ring could not be read back after the fault
        assert stats["instrumentation_launches_unrecorded"] == 4


@pytest.mark.parametrize("kind", ["cupti", "tree"])
def test_a_fault_the_program_does_not_catch_keeps_its_exit_code(tmp_path, kind):
    r = _run(tmp_path, kind, "uncaught")
    assert r.returncode == 1, r.stderr
    assert "illegal memory access" in r.stderr and "FINALIZED" not in r.stdout
    data = load_hatchet(tmp_path / "f.hatchet")  # written at exit
    stats = _stats(data)
    assert stats["gpu_contexts_failed"] == 1
    _untimed_since_the_last_hand_over(data, stats)


def test_what_a_flush_read_back_before_the_fault_is_all_there(tmp_path):
    r = _run(tmp_path, "tree", "flushed")
    assert r.returncode == 0, r.stderr
    data = load_hatchet(tmp_path / "f.hatchet")
    good = next(c for c in data[0]["children"] if c["frame"]["name"] == "good")
    assert good["metrics"]["count"] == 3 and good["metrics"]["time (ns)"] > 0
    (body,) = good["children"]
    assert body["frame"]["name"] == "body"
    assert body["metrics"]["count"] == 3 * 4 * 4  # launches x CTAs x warps
    stats = _stats(data)
    assert stats["kernel_records_untimed"] == 1  # the faulting kernel's own
    assert stats["instrumentation_launches_unrecorded"] == 1


def test_kernels_that_ended_seconds_before_the_fault_keep_their_times(tmp_path):
    # Proton has CUPTI hand its finished records over every second: only the kernels of the
    # last second before a fault lose their times (before, every kernel since the last flush
    # did, however long ago it ended).
    r = _run(tmp_path, "cupti", "aged")
    assert r.returncode == 0, r.stderr
    data = load_hatchet(tmp_path / "f.hatchet")
    times = {c["frame"]["name"]: c["metrics"]["time (ns)"] for c in data[0]["children"]}
    assert times["good"] > 0 and times["bad"] == 0
    assert _stats(data)["kernel_records_untimed"] == 1
