"""bench/ptx_variants.py compiles (no GPU) what bench/intra_kernel.py launches: Triton's
launch-time specialization (arguments divisible by 16) gives the vector add vector loads and
the attention-like loop its cp.async prefetch, in the plain kernel and in every variant."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

_BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def ptx_variants(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.syspath_prepend(str(_BENCH))
    spec = importlib.util.spec_from_file_location("bench_ptx_variants", _BENCH / "ptx_variants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    mp.undo()
    sys.modules.pop("intra_kernel", None)


def test_vector_add_variants_keep_the_launchs_vector_loads(ptx_variants):
    variants = ptx_variants.variants("vadd", 232448)
    assert set(variants) == {"plain", "kernel_scope", "tree", "tree_global", "warp_group", "trace"}
    for variant, (ptx, _shared) in variants.items():
        assert ptx.count("ld.global.v4.b32") == 4, variant  # 2 per input, 8 floats per thread


def test_attention_variants_keep_the_loops_cp_async_prefetch(ptx_variants):
    variants = ptx_variants.variants("attention", 232448)
    plain = variants["plain"][0].count("cp.async.cg.shared.global")
    assert plain > 0
    for variant, (ptx, _shared) in variants.items():
        assert ptx.count("cp.async.cg.shared.global") == plain, variant


def test_the_no_clock_variant_replaces_only_the_scopes_clock_reads(ptx_variants):
    ptx, _shared = ptx_variants.variants("softmax", 232448)["tree"]
    bare = ptx_variants.without_scope_clocks(ptx)
    # softmax: the kernel scope's two reads stay; "load"'s enter, its exit (which "reduce"'s
    # enter shares) and "reduce"'s exit become adds on a sum register (64-bit clocks, the
    # default).
    assert ptx.count("%clock64;") == 5
    assert bare.count("%clock64;") == 2
    assert bare.count("@%pt_lead mov.u64 \t%pt_s0, %clock64;") == 1
    assert bare.count("@%pt_lead add.u64 \t%pt_s1, %pt_a1, 3;") == 1
    assert bare.count("@%pt_lead add.u64 \t%pt_d8, %pt_a0, 7;") == 2
    assert bare.count("\n") == ptx.count("\n")  # one instruction for another
