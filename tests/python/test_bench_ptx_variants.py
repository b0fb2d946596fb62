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


def test_the_evict_first_experiment_hints_exactly_the_cta_record_store(ptx_variants):
    ptx, _shared = ptx_variants.variants("vadd", 232448)["tree"]
    hinted = ptx_variants.l2_evict_first(ptx)
    assert hinted.count("st.global.L2::cache_hint") == 1
    assert hinted.count("createpolicy.fractional.L2::evict_first.b64") == 1
    assert hinted.count("st.global") == ptx.count("st.global")  # no store added or lost
