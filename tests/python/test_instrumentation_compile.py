"""backend="instrumentation" compile path without a GPU: Triton compiles a kernel with
proton.language scopes for sm_90 offline, through Proton's compile step; markers become
recording code, the scope table lands in the kernel's metadata, and everything Proton set in
Triton is put back afterwards."""

import dataclasses
import gc
import re
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from proton import _C, instrumentation  # noqa: E402
from proton import language as pl  # noqa: E402
from proton import mode as _mode  # noqa: E402


@triton.jit
def scoped_kernel(x, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    with pl.scope("load"):
        v = tl.load(x + offs)
    pl.enter_scope("math")
    v = v * 2.0
    pl.exit_scope("math")
    tl.store(out + offs, v)


@triton.jit
def event_kernel(x, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    event = pl.allocate_event("copy")
    pl.start_event(event)
    v = tl.load(x + offs)
    for i in tl.range(3):  # Triton rebuilds the event from its type inside the loop
        pl.end_event(event)
        tl.store(out + i * N + offs, v)
        pl.start_event(event)
        v = tl.load(x + (i + 1) * N + offs)
    pl.end_event(event)
    tl.store(out + 3 * N + offs, v)


def compile_for_hopper(config, fn=None):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(
        fn or scoped_kernel,
        signature={"x": "*fp32", "out": "*fp32", "N": "constexpr"},
        constexprs={"N": 256},
    )
    options = {"num_warps": 4}
    if config:
        options["instrumentation_mode"] = config
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


@pytest.fixture
def session(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    mode = _mode.Default(granularity="warp", optimizations="time_shift")
    instrumentation.prepare(mode, "tree")
    before = triton.knobs.runtime.add_stages_inspection_hook
    instrumentation.activate(12345, mode, "tree")
    yield instrumentation.config_string(mode, "tree")
    instrumentation.deactivate(12345)
    assert triton.knobs.runtime.add_stages_inspection_hook is before
    assert triton.knobs.compilation.instrumentation_mode == ""


def table_paths(fields):
    """The scope paths of a kernel's table (ptx_rewrite.cc's encodeTable, v3): after 16 fixed
    fields and the names of the scopes whose markers were dropped."""
    assert fields[0] == "v3"
    return [bytes.fromhex(p).decode() for p in fields[16 + int(fields[15]) :]]


def event_scopes(fields):
    """The scope ids a kernel's table marks as events (its bit mask, field 14)."""
    mask = int(fields[14])
    return [i for i in range(64) if mask >> i & 1]


# Proton's registers in the rewritten PTX, whatever the rewrite names them.
REG = r"%pt_\w+"


def clock_reads_after_markers(ptx):
    """Per marker of `ptx`, the clock reads between it and the kernel's next instruction (the
    code its scope boundary became)."""
    lines = ptx.split("\n")
    reads = []
    for i, line in enumerate(lines):
        if "// @proton:" not in line or not line.strip().startswith("mov.u32"):
            continue
        n = 0
        for after in lines[i + 1 :]:
            code = after.strip()
            if "// @proton:" in code or (
                code and not code.startswith(("//", ".loc")) and "%pt_" not in code
            ):
                break
            n += len(re.findall(r"%clock(64)?;", code))
        reads.append(n)
    return reads


def test_scopes_compile_into_recording_code_with_their_table(session):
    kernel = compile_for_hopper(session)
    ptx = kernel.asm["ptx"]
    # Each marker keeps its line and reads the clock where it is (time_shift: every marker
    # its own read), each read by the recording lane alone.
    assert ptx.count("// @proton:E:") == 2 and ptx.count("// @proton:X:") == 2
    assert clock_reads_after_markers(ptx) == [1, 1, 1, 1]
    assert len(re.findall(rf"@{REG} mov\.u(32|64) \t{REG}, %clock(64)?;", ptx)) >= 4
    # Each recording warp adds its own sums (the GPU's shared-memory limit is unknown here, so
    # no CTA sums): its lanes add the record's 8 chunks into their places in one coalesced
    # reduction (a CUDA graph's replays add into one slot), no atomics that wait.
    assert len(re.findall(rf"red\.global\.add\.u64 \t\[{REG}\], {REG};", ptx)) == 1
    assert "atom." not in ptx
    assert ptx.count("shfl.sync.idx.b32 \t%pt_") == 2 + 3 * 3
    # ptxas (Triton's) accepted the rewritten PTX.
    assert len(kernel.asm["cubin"]) > 0
    table = kernel.metadata.proton_instrumentation.split("\t")
    assert bytes.fromhex(table[1]).decode() == "scoped_kernel"
    assert table_paths(table) == ["", "load", "math"]
    # Per CTA: its warps' records (granularity "warp": every warp), 16 + 16 * 3 bytes each.
    assert kernel.metadata.profile_scratch_size == kernel.metadata.num_warps * 64
    assert triton.knobs.compilation.instrumentation_mode == session


def test_an_event_started_and_ended_in_a_loop_compiles_as_a_scope_of_its_name(session):
    # triton.profiler.language's async events, started and ended in one warp: each start and
    # end is a scope boundary of the event's name, in source order (a slice per iteration).
    kernel = compile_for_hopper(session, event_kernel)
    ptx = kernel.asm["ptx"]
    # (The compiler may unroll the loop: as many starts as ends, none unmatched or crossing.)
    starts, ends = ptx.count("// @proton:S:"), ptx.count("// @proton:X:")
    assert starts == ends >= 2
    assert "// @proton:U:" not in ptx and "// @proton:C:" not in ptx
    assert "// @proton:F:" not in ptx  # every end where its start is
    fields = kernel.metadata.proton_instrumentation.split("\t")
    assert table_paths(fields) == ["", "copy"]
    assert event_scopes(fields) == [1]
    assert len(kernel.asm["cubin"]) > 0


def test_an_event_in_a_gluon_kernel_compiles_as_a_scope_of_its_name(session):
    gluon = pytest.importorskip("triton.experimental.gluon")
    gl = pytest.importorskip("triton.experimental.gluon.language")
    from triton.backends.compiler import GPUTarget

    @gluon.jit
    def gluon_event_kernel(x, out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout=layout)
        event = pl.allocate_event("copy")
        pl.start_event(event)
        v = gl.load(x + offs)
        for t in range(1, 3):
            pl.end_event(event)
            gl.store(out + offs, v)
            pl.start_event(event)
            v = gl.load(x + t * N + offs)
        pl.end_event(event)
        gl.store(out + offs, v)

    src = gluon._runtime.GluonASTSource(
        gluon_event_kernel,
        signature={"x": "*fp32", "out": "*fp32", "N": "constexpr"},
        constexprs={"N": 128},
    )
    options = {"num_warps": 4, "instrumentation_mode": session}
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    ptx = kernel.asm["ptx"]
    starts, ends = ptx.count("// @proton:S:"), ptx.count("// @proton:X:")
    assert starts == ends >= 2
    assert "// @proton:U:" not in ptx and "// @proton:C:" not in ptx
    assert table_paths(kernel.metadata.proton_instrumentation.split("\t")) == ["", "copy"]


def compile_warp_specialized_event_kernel(monkeypatch, tmp_path):
    """Triton's test_gluon_warp_specialized_event's kernel, compiled for a trace session."""
    gluon = pytest.importorskip("triton.experimental.gluon")
    from gluon_event_kernels import warp_specialized_event_kernel
    from triton.backends.compiler import GPUTarget

    ws_kernel = warp_specialized_event_kernel()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    mode = _mode.Default()
    instrumentation.prepare(mode, "trace")
    instrumentation.activate(12346, mode, "trace")
    try:
        config = instrumentation.config_string(mode, "trace")
        src = gluon._runtime.GluonASTSource(ws_kernel, signature={}, constexprs={})
        options = {"num_warps": 4, "instrumentation_mode": config}
        try:
            return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
        except TypeError as e:  # an older Gluon's warp_specialize signature
            pytest.skip(f"this Triton's gl.warp_specialize differs: {e}")
    finally:
        instrumentation.deactivate(12346)


def test_an_event_started_in_one_partition_and_ended_in_another_compiles_as_a_link(
    monkeypatch, tmp_path
):
    # In trace data the end is an exit of the event's scope, which the decoder links to a start
    # in another warp (the table marks the scope as an event); nothing is unmatched at compile
    # time.
    kernel = compile_warp_specialized_event_kernel(monkeypatch, tmp_path)
    ptx = kernel.asm["ptx"]
    assert ptx.count("// @proton:S:") == 1 and ptx.count("// @proton:F:") == 1
    assert "// @proton:U:" not in ptx
    fields = kernel.metadata.proton_instrumentation.split("\t")
    assert table_paths(fields) == ["", "warp_specialized"]
    assert event_scopes(fields) == [1]


def test_an_event_left_open_in_a_partition_keeps_nothing_alive_after_the_compile(
    monkeypatch, tmp_path
):
    # The producer's start is still open when its partition's code ends, and the consumer's end
    # looked the event up: the nesting state of each code generator goes with its builder
    # (before, a module-level map held both builders, and what they held, for good).
    builders = []
    marker = pl._marker

    def spy(kind, path, semantic):
        if all(b is not semantic.builder for b in builders):
            builders.append(semantic.builder)
        marker(kind, path, semantic)

    monkeypatch.setattr(pl, "_marker", spy)
    compile_warp_specialized_event_kernel(monkeypatch, tmp_path)
    assert len(builders) == 2  # the kernel's (with the consumer) and the producer's
    gc.collect()  # the code generators' own reference cycles
    while builders:
        builder = builders.pop()
        assert sys.getrefcount(builder) == 2  # `builder` and getrefcount's argument


@triton.jit
def plain_value_event_kernel(x, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    pl.start_event(0)  # not from allocate_event: an event handed over from elsewhere
    tl.store(out + offs, tl.load(x + offs))


def test_an_event_that_is_not_allocated_in_the_function_is_not_recorded_and_warns(session):
    with pytest.warns(UserWarning, match="not an event from pl.allocate_event"):
        kernel = compile_for_hopper(session, plain_value_event_kernel)
    ptx = kernel.asm["ptx"]
    assert "// @proton:E:" not in ptx and "// @proton:X:" not in ptx
    assert len(kernel.asm["cubin"]) > 0


def test_cta_sums_take_shared_memory_past_the_kernels_own_and_one_record_per_cta(
    monkeypatch, tmp_path
):
    # buffer_type="shared" (the default) on a GPU whose CTAs may have 227 KB: the warps of a
    # CTA leave their sums in shared memory and one record per CTA is stored.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "plain"))
    plain_shared = compile_for_hopper("").metadata.shared
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(instrumentation, "_max_shared", lambda: 232448)
    mode = _mode.Default()
    assert "cta_sums" in instrumentation.config_string(mode, "tree")
    assert "cta_sums" not in instrumentation.config_string(
        _mode.Default(buffer_type="global"), "tree"
    )
    instrumentation.prepare(mode, "tree")
    instrumentation.activate(12346, mode, "tree")
    try:
        kernel = compile_for_hopper(instrumentation.config_string(mode, "tree"))
    finally:
        instrumentation.deactivate(12346)
    ptx = kernel.asm["ptx"]
    # Each warp's sums go to its slot, the CTA's threads meet once more (at barrier 0, which
    # Triton's own code uses for the whole CTA), and no atomics are used.
    plain_bars = compile_for_hopper("").asm["ptx"].count("bar.sync \t0;")
    assert ptx.count("bar.sync \t0;") == plain_bars + 1
    assert "atom." not in ptx and "st.global.v2.u64" not in ptx
    assert kernel.metadata.profile_scratch_size == 16 + 16 * 3  # one record per CTA
    # A slot per warp past the kernel's own shared memory.
    assert kernel.metadata.shared == ((plain_shared + 15) // 16) * 16 + 4 * (16 + 16 * 3)


def test_a_kernel_compiled_outside_the_session_compiles_again_with_its_scopes(session):
    # A user's kernel that Inductor (or the user, by hand) compiled without the session and
    # launches through its CompiledKernel: Proton compiles its source again with the options
    # it was compiled with and the session's configuration, so its scopes record.
    from proton import _triton_launcher

    plain = compile_for_hopper("")
    assert "%pt_" not in plain.asm["ptx"]
    again = _triton_launcher.compile_with_scopes(plain, session)
    assert again.asm["ptx"].count("// @proton:E:") == 2 and "%pt_lead" in again.asm["ptx"]
    assert table_paths(again.metadata.proton_instrumentation.split("\t")) == ["", "load", "math"]
    assert again.metadata.profile_scratch_size == plain.metadata.num_warps * 64
    assert again.metadata.instrumentation_mode == session
    for option in ("num_warps", "num_stages", "num_ctas", "enable_fp_fusion", "arch", "debug"):
        assert getattr(again.metadata, option) == getattr(plain.metadata, option), option
    # Options as Inductor's compile gave them, read back from JSON (lists for tuples).
    wide = triton.compile(
        plain.src,
        target=plain.metadata.target,
        options={"num_warps": 8, "num_stages": 2, "enable_fp_fusion": False},
    )
    as_json = type(plain.metadata)(
        **{
            **wide.metadata._asdict(),
            "supported_fp8_dtypes": list(wide.metadata.supported_fp8_dtypes),
        }
    )
    wide.metadata = as_json
    again = _triton_launcher.compile_with_scopes(wide, session)
    assert (again.metadata.num_warps, again.metadata.num_stages) == (8, 2)
    # Inductor's metadata, read back in its own way, can keep the target as a dict.
    wide.metadata = wide.metadata._replace(target=dataclasses.asdict(wide.metadata.target))
    again = _triton_launcher.compile_with_scopes(wide, session)
    assert (again.metadata.num_warps, again.metadata.target.arch) == (8, 90)
    assert again.metadata.enable_fp_fusion is False
    assert again.metadata.profile_scratch_size == 8 * 64


def worker_compiled(plain, monkeypatch, names):
    """`plain` as Inductor's parent process holds a kernel compiled in a worker: its
    JITFunction without its Python function, the CachingAutotuner that holds it able to load
    it again. Returns the list of those loads."""
    import copy
    import sys
    import types

    from proton import _inductor_source

    plain.src = copy.copy(plain.src)
    plain.src.fn = types.SimpleNamespace(fn=None, __name__="scoped_kernel")
    reloads = []

    class CachingAutotuner:
        def __init__(self, kernel):
            self.compile_results = [types.SimpleNamespace(kernel=kernel)]

        def _reload_kernel(self):
            reloads.append(self)
            return types.SimpleNamespace(fn=scoped_kernel)

    module = types.ModuleType(_inductor_source._HEURISTICS)
    module.CachingAutotuner = CachingAutotuner
    module.holders = [CachingAutotuner(object()), CachingAutotuner(plain)]
    monkeypatch.setitem(sys.modules, _inductor_source._HEURISTICS, module)
    monkeypatch.setattr(_inductor_source, "scoped_kernel_names", set(names))
    return reloads


def test_a_kernel_compiled_in_an_inductor_worker_compiles_again_from_its_reloaded_function(
    session, monkeypatch
):
    from proton import _triton_launcher

    plain = compile_for_hopper("")
    reloads = worker_compiled(plain, monkeypatch, {"scoped_kernel"})
    again = _triton_launcher.compile_with_scopes(plain, session)
    assert len(reloads) == 1 and reloads[0].compile_results[0].kernel is plain
    assert table_paths(again.metadata.proton_instrumentation.split("\t")) == ["", "load", "math"]


def test_a_worker_compiled_kernel_that_got_no_proton_imports_is_not_reloaded(session, monkeypatch):
    # Inductor's own kernels (and user kernels without scopes) come from workers too: no look
    # over the live objects, no reload, for a name that never got proton imports.
    from proton import _triton_launcher

    plain = compile_for_hopper("")
    reloads = worker_compiled(plain, monkeypatch, {"another_kernel"})
    assert _triton_launcher.compile_with_scopes(plain, session) is None and reloads == []


def test_a_kernel_compiled_for_another_instrumentation_is_left_to_the_rewrite(session):
    # A sanitizer's binary (Triton's instrumentation_mode "consan") is not compiled again
    # without its sanitizer.
    from proton import _triton_launcher

    plain = compile_for_hopper("")
    plain.metadata = plain.metadata._replace(instrumentation_mode="consan")
    assert _triton_launcher.compile_with_scopes(plain, session) is None


def test_a_kernel_without_scopes_is_not_compiled_again(session):
    from proton import _triton_launcher
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def unscoped(x, out, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(out + offs, tl.load(x + offs) + 1.0)

    src = ASTSource(unscoped, signature={"x": "*fp32", "out": "*fp32", "N": "constexpr"},
                    constexprs={"N": 128})  # fmt: skip
    plain = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert _triton_launcher.compile_with_scopes(plain, session) is None  # its PTX is rewritten


def test_without_a_session_the_scopes_compile_to_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    ptx = compile_for_hopper("").asm["ptx"]
    assert "@proton" not in ptx and "%pt_" not in ptx


def test_tree_scopes_read_64_bit_clocks_unless_clock32_is_asked_for():
    # As in triton.profiler, clock32 is an optimization to ask for: 32-bit deltas wrap, unsaid,
    # in a scope run of 2^32 cycles. (Before, a tree read only the 32-bit %clock, always.)
    vadd = (Path(__file__).parent.parent / "golden" / "instrumentation_vadd.ptx").read_text()
    wide = instrumentation.config_string(_mode.Default(), "tree")
    narrow = instrumentation.config_string(_mode.Default(optimizations="clock32"), "tree")
    assert "clock64" in wide.split(":")[-1].split(",")
    assert "clock32" in narrow.split(":")[-1].split(",") and "clock64" not in narrow
    wide_ptx = _C.instrument_ptx(vadd, wide, 0, 0)[0]
    narrow_ptx = _C.instrument_ptx(vadd, narrow, 0, 0)[0]
    assert wide_ptx.count("%clock64;") == 2 and "%clock;" not in wide_ptx  # the kernel scope
    assert narrow_ptx.count("%clock;") == 2 and "%clock64;" not in narrow_ptx


def test_the_buffer_layout_keys_the_compile_cache():
    # Triton keys its caches by the mode string: it names the layout the rewrite writes, so a
    # binary cached by a Proton with another layout is never loaded and decoded wrongly.
    config = instrumentation.config_string(_mode.Default(), "tree")
    assert config.endswith(f"layout{_C.INSTRUMENTATION_LAYOUT}")
    stale = config.replace(f"layout{_C.INSTRUMENTATION_LAYOUT}", "layout1")
    with pytest.raises(_C.ConfigError, match="layout 1"):
        _C.instrument_ptx(".version 8.7\n.target sm_90a\n", stale)


def test_the_rewrite_refuses_ptx_it_cannot_instrument():
    with pytest.raises(_C.ConfigError):
        _C.instrument_ptx(".version 8.7\n.target sm_90a\n", "proton:tree:1:256:*:")


def test_gluon_kernels_get_the_same_compile_step(session):
    gluon = pytest.importorskip("triton.experimental.gluon")
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    @gluon.jit
    def gluon_add(x, out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout=layout)
        with pl.scope("load"):
            v = gl.load(x + offs)
        gl.store(out + offs, v + 1.0)

    src = GluonASTSource(
        gluon_add,
        signature={"x": "*fp32", "out": "*fp32", "N": "constexpr"},
        constexprs={"N": 128},
    )
    kernel = triton.compile(
        src,
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 4, "instrumentation_mode": session},
    )
    assert table_paths(kernel.metadata.proton_instrumentation.split("\t")) == ["", "load"]
    assert "%pt_lead" in kernel.asm["ptx"]


def test_semantics_can_be_named_as_in_triton_profiler_and_turned_off(session):
    # triton.profiler.language records Triton-DSL kernels only after enable_semantic("triton");
    # the same call is accepted here (both are on by default), and disable_semantic turns a
    # language's scopes into nothing for sessions started after it: the kernel keeps its
    # implicit scope only. The choice is in the mode string, so it keys Triton's cache.
    mode = _mode.Default(granularity="warp", optimizations="time_shift")
    pl.enable_semantic("triton")
    pl.enable_semantic("gluon")
    try:
        pl.disable_semantic("triton")
        off = instrumentation.config_string(mode, "tree")
        assert off.endswith(",no_triton,layout" + str(_C.INSTRUMENTATION_LAYOUT))
        kernel = compile_for_hopper(off)
        assert "// @proton:" not in kernel.asm["ptx"]
        assert table_paths(kernel.metadata.proton_instrumentation.split("\t")) == [""]
    finally:
        pl.enable_semantic("triton")
    assert instrumentation.config_string(mode, "tree") == session
    assert compile_for_hopper(session).asm["ptx"].count("// @proton:E:") == 2
    with pytest.raises(ValueError, match="Allowed values: triton, gluon"):
        pl.enable_semantic("cuda")


def test_after_the_session_a_binary_compiled_in_it_gets_no_buffer_rather_than_an_error():
    # A CompiledKernel compiled in the session and kept by the program asks Triton's profile
    # allocator for a buffer at every launch, after finalize() too. Triton 3.6's launcher
    # calls the null allocator, which raises ("no allocator was set"): Proton leaves one that
    # hands out none (recording off). Later Tritons allocate a default buffer when none is
    # set: theirs is put back as it was.
    from triton.runtime import _allocation

    mode = _mode.Default()
    _allocation.set_profile_allocator(None)
    instrumentation.prepare(mode, "tree")
    instrumentation.activate(777, mode, "tree")
    instrumentation.deactivate(777)
    try:
        after = _allocation._profile_allocator.get()
        if hasattr(_allocation, "has_profile_allocator"):
            assert isinstance(after, _allocation.NullAllocator)
            assert not _allocation.has_profile_allocator()
        else:
            assert after(4096, 256, 0) == 0
    finally:
        _allocation.set_profile_allocator(None)


def test_after_the_session_the_program_s_own_profile_allocator_is_back():
    from triton.runtime import _allocation

    def own(size, alignment, stream):
        return 0x1000

    mode = _mode.Default()
    _allocation.set_profile_allocator(own)
    try:
        instrumentation.prepare(mode, "tree")
        instrumentation.activate(778, mode, "tree")
        assert _allocation._profile_allocator.get() is not own
        instrumentation.deactivate(778)
        assert _allocation._profile_allocator.get() is own
    finally:
        _allocation.set_profile_allocator(None)


def test_a_finalize_that_fails_for_another_session_still_takes_the_compile_step_out(tmp_path):
    # finalize() writes and drops every session it can and raises for the one it cannot (kept,
    # to be finalized again). Proton's compile step, mode knob and launcher went only after a
    # finalize that raised nothing: the instrumentation session, dropped, left kernels
    # compiled with instrumentation after it.
    # No GPU here: the instrumentation session is started as start() does it on one.
    import shutil

    import proton

    before = triton.knobs.runtime.add_stages_inspection_hook
    instr = proton.start(str(tmp_path / "instr"))
    instrumentation.activate(instr, _mode.Default(), "tree")
    gone = tmp_path / "gone"
    gone.mkdir()
    other = proton.start(str(gone / "other"))
    shutil.rmtree(gone)
    with pytest.raises(proton.ProfilerError):
        proton.finalize()
    try:
        assert proton._C.live_sessions() == [other]
        assert instrumentation.live_sessions() == set()
        assert triton.knobs.compilation.instrumentation_mode == ""
        assert triton.knobs.runtime.add_stages_inspection_hook is before
    finally:
        gone.mkdir()
        proton.finalize()


def test_instrumentation_sessions_start_one_at_a_time(monkeypatch):
    # The check that a session compiles with the configuration of those live (prepare) and
    # its activation happen under one lock: two threads starting sessions of other modes both
    # passed the check before either was active, and the second compiled with the first's.
    import sys

    import proton

    _profile = sys.modules["proton.profile"]  # proton.profile is the decorator
    held = []

    def prepare(mode, data):
        held.append(_profile._instrumentation_starts.locked())
        raise proton.ConfigError("[PROTON] stop here")

    monkeypatch.setattr(instrumentation, "prepare", prepare)
    with pytest.raises(proton.ConfigError, match="stop here"):
        proton.start("one_at_a_time", backend="instrumentation")
    assert held == [True]
    assert not _profile._instrumentation_starts.locked()
