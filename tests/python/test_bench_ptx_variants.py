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


def test_the_reads_only_variant_keeps_the_reads_and_drops_the_sums_around_them(ptx_variants):
    ptx, _shared = ptx_variants.variants("softmax", 232448)["tree"]
    reads = ptx_variants.reads_only(ptx)
    # Every clock read stays: the kernel scope's two, "load"'s enter, its exit (which
    # "reduce"'s enter shares) and "reduce"'s exit.
    assert reads.count("%clock64;") == ptx.count("%clock64;") == 5
    # Each of the three scope readings is xor-ed into its scope's sum, and nothing else
    # touches the scopes' sums, counts or enter readings; the kernel scope keeps its own.
    assert reads.count("xor.b64 \t%pt_a1, %pt_a1, %pt_d8;") == 2
    assert reads.count("xor.b64 \t%pt_a2, %pt_a2, %pt_d8;") == 1
    for gone in (
        "add.u64 \t%pt_a1,",
        "add.u64 \t%pt_a2,",
        "add.u32 \t%pt_c1,",
        "add.u32 \t%pt_e2,",
    ):
        assert gone in ptx and gone not in reads, gone
    assert "mov.u64 \t%pt_s2, %pt_d8;" in ptx and "%pt_s2, %pt_d8" not in reads
    assert reads.count("add.u64 \t%pt_a0, %pt_a0, %pt_d6;") == 1


def test_sass_issue_counts_instructions_and_stall_cycles_of_the_kernel_and_its_loop(
    ptx_variants,
):
    def line(address, text, stall):
        control = stall << 41 | 0x000FE2  # other control bits set, not the stall's
        return (
            f"        /*{address:04x}*/                   {text} ;  /* 0x{address:016x} */\n"
            f"                                                 /* 0x{control:016x} */\n"
        )

    sass = (
        line(0x00, "S2R R0, SR_TID.X", 1)
        + line(0x10, "IADD3 R1, R0, 0x1, RZ", 4)  # the loop: 0x10 to 0x30
        + line(0x20, "NOP", 15)  # padding: not an instruction the warp issues
        + line(0x30, "@!P0 BRA 0x10", 7)
        + line(0x40, "EXIT", 5)
        + line(0x50, "BRA 0x50", 0)  # the trailing self-loop is no loop body
    )
    assert ptx_variants.sass_issue(sass) == ((5, 17), (2, 11))
    assert ptx_variants.sass_issue(line(0x00, "EXIT", 5)) == ((1, 5), None)


def test_static_table_reads_the_sass_of_every_variant(ptx_variants, capsys):
    ptx_variants.static_table(["vadd"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r[1] for r in rows] == [
        "plain",
        "kernel_scope",
        "tree",
        "tree_global",
        "warp_group",
        "trace",
        "no_clock",
        "reads_only",
    ]
    counts = {r[1]: int(r[2]) for r in rows}
    assert all(n > counts["plain"] for v, n in counts.items() if v != "plain")
