"""What intra-kernel recording costs, with no profiler attached (docs/benchmarks.md, variants).

    python3 bench/ptx_variants.py [--rounds 30] [--kernels vadd,softmax,matmul,attention]
                                  [--triton] [--kernel-tracing]

Compiles each of intra_kernel.py's kernels (the set of docs/benchmarks.md) with the installed
Triton twice (plain, and with Proton's scope markers), rewrites the marked PTX with Proton's
own rewrite (`proton._C.instrument_ptx`) into variants, loads every variant with the CUDA
driver API and times N back-to-back launches of each with CUDA events behind a GPU spin,
variants shuffled within each round. No CUPTI and no session:
the ratio is the recording's cost alone. Variants:
- `plain`: the kernel without markers (the baseline);
- `kernel_scope`: the plain kernel with only its implicit scope (CTA records);
- `tree`: with its scopes, CTA records (the default, buffer_type="shared");
- `tree_ring`: the same binary, each launch recording into the next part of a 64 MB ring as
  a session's launches do, not into the same bytes (what streaming records through L2 costs);
- `no_clock`: `tree` with its scopes' clock reads replaced by register arithmetic (the
  kernel scope keeps its reads): the same added instructions without a single clock read in
  the kernel's body, which tells what the reads themselves cost beyond the sums around them;
- `reads_only`: the other half, `tree` with its scopes' clock reads kept and their sums and
  counts dropped (each reading is folded into the scope's record with one xor, so that ptxas
  keeps it): what the reads cost as the points ptxas schedules nothing across;
- `tree_global`: with its scopes, a record per warp (buffer_type="global");
- `warp_group`: with its scopes, one recording warp per 4;
- `trace`: with its scopes, data="trace" (events in shared memory, copied out as each warp
  returns, where they fit; stored to global memory as they happen otherwise).
With --triton, the kernel with Triton's own scopes compiled by Triton's own instrumentation
(`triton`, its default mode) is timed beside them the same way, without Triton's runtime (which
reads the buffer back after every launch): its recording cost alone, next to ours.
With --static, nothing runs and no GPU is needed: each variant's PTX is compiled with the
ptxas Triton uses, for sm_90a, and its SASS is read for the instruction count and the fixed
stall cycles (the stall field of each instruction's control bits: the cycles the scheduler
waits before the warp's next issue, variable latencies not included) of the whole kernel and
of its largest loop. In a loop that one warp per scheduler runs back to back (the
attention-like kernel's), these cycles are its issue time per iteration.
With --kernel-tracing, every variant, plain included, runs inside a Proton kernel-tracing
session (CUPTI), as an instrumentation session's kernels do: the ratios are then what the
recording adds on top of kernel tracing.
Needs an NVIDIA GPU (sm_90), PyTorch and Triton (only Triton with --static).
"""

import argparse
import ctypes
import os
import random
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from intra_kernel import define_kernels, queued_kernel_ms, spin_cycles_per_s

# Compile options, as intra_kernel.py launches each kernel.
OPTIONS = {
    "vadd": {"num_warps": 4},
    "softmax": {"num_warps": 4},
    "matmul": {"num_warps": 8, "num_stages": 3},
    "attention": {"num_warps": 4},
}


def _kernels(pl):
    """intra_kernel.py's kernels with pl's scopes; (kernel, signature, constexprs)."""
    k = define_kernels(pl)
    f32, f16 = "*fp32", "*fp16"
    return {
        "vadd": (k["vadd"], {"x": f32, "y": f32, "out": f32, "n": "i32"}, {"BLOCK": 1024}),
        "softmax": (k["softmax"], {"x": f32, "out": f32}, {"N": 1024}),
        "matmul": (
            k["matmul"],
            {"a": f16, "b": f16, "c": f32},
            {"K": 4096, "BM": 128, "BN": 128, "BK": 64},
        ),
        "attention": (  # one head: program_id(1) is 0
            k["attention"],
            {"q": f16, "k": f16, "v": f16, "o": f32},
            {"S": 4096, "D": 64, "BM": 64, "BN": 64},
        ),
    }


def _source(pl, name):
    """The kernel as Triton specializes intra_kernel.py's launches (PyTorch's tensors and
    n = 2^20): every pointer and integer argument divisible by 16 (vectorized loads; the
    attention loop's K and V loads then go through cp.async)."""
    import triton

    fn, signature, constexprs = _kernels(pl)[name]
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in signature}
    return triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)


def _target():
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", 90, 32)


def triton_variant(name):
    """(ptx, dynamic shared bytes, profile scratch bytes per CTA) of the kernel compiled with
    Triton's own instrumentation (enable_semantic("triton"), its default mode), or None when
    the installed Triton cannot. Compiled while a Triton instrumentation session is open (its
    passes are registered then), launched later without its runtime."""
    import triton
    import triton.profiler as tp
    import triton.profiler.language as tpl

    try:
        tpl.enable_semantic("triton")
        tp.start(f"ptx_variants_triton_{name}", backend="instrumentation")
        try:
            mode = triton.knobs.compilation.instrumentation_mode  # keys the compile cache
            k = triton.compile(
                _source(tpl, name),
                target=_target(),
                options={**OPTIONS[name], "instrumentation_mode": mode},
            )
        finally:
            tp.finalize()
    except Exception as e:  # noqa: BLE001 - a Triton without it leaves the other variants
        print(f"{name}: Triton's instrumentation did not compile: {e}", file=sys.stderr)
        return None
    return k.asm["ptx"], k.metadata.shared, k.metadata.profile_scratch_size


def variants(name, max_shared):
    """{variant: (ptx, dynamic shared bytes)} for one kernel."""
    import proton.language as pl
    import triton
    from proton import _C, instrumentation

    src, target, options = _source(pl, name), _target(), OPTIONS[name]
    plain = triton.compile(src, target=target, options=options)
    tree = instrumentation.config_string(instrumentation._as_mode("default"), "tree")
    # With the mode in its options, proton.language leaves markers; no session rewrites them.
    marked = triton.compile(src, target=target, options={**options, "instrumentation_mode": tree})
    shared = plain.metadata.shared
    out = {"plain": (plain.asm["ptx"], shared)}
    per_warp = tree.replace("cta_sums,", "")
    trace = instrumentation.config_string(instrumentation._as_mode("default"), "trace")
    group = per_warp.replace(":tree:1:", ":tree:4:")
    for variant, ptx, mode in (
        ("kernel_scope", plain.asm["ptx"], tree),
        ("tree", marked.asm["ptx"], tree),
        ("tree_global", marked.asm["ptx"], per_warp),
        ("warp_group", marked.asm["ptx"], group),
        ("trace", marked.asm["ptx"], trace),
    ):
        new_ptx, _table, new_shared = _C.instrument_ptx(ptx, mode, shared, max_shared)
        out[variant] = (new_ptx, new_shared or shared)
    return out


CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class _Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")

    def check(self, result, what):
        if result != 0:
            raise RuntimeError(f"{what} failed: CUresult {result}")

    def function(self, ptx, name, shared):
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.cu.cuModuleLoadData(ctypes.byref(module), ptx.encode() + b"\0"), "load")
        self.check(self.cu.cuModuleGetFunction(ctypes.byref(func), module, name.encode()), "get")
        if shared > 48 << 10:  # past the default: opted in per function, as Triton does
            self.check(
                self.cu.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED, shared),
                "shared memory opt-in",
            )
        return func

    def launch(self, func, grid, threads, shared, stream, params):
        self.check(
            self.cu.cuLaunchKernel(
                func, *grid, 1, threads, 1, 1, shared, ctypes.c_void_p(stream), params, None
            ),
            "launch",
        )


def _params(ptx, values):
    head = ptx[ptx.index(".entry") : ptx.index(")", ptx.index(".entry"))]
    kinds = re.findall(r"\.param \.(u64|u32)", head)
    if len(kinds) != len(values):
        raise RuntimeError(f"kernel takes {len(kinds)} parameters, {len(values)} given")
    held = [ctypes.c_uint64(v) if k == "u64" else ctypes.c_uint32(v) for k, v in zip(kinds, values)]
    array = (ctypes.c_void_p * len(held))(
        *[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in held]
    )
    return held, array


def without_scope_clocks(ptx):
    """The tree variant with each scope's clock reads (not the kernel scope's) replaced by an
    add on a register that changes every iteration, so that ptxas can neither fold it nor
    treat it as a clock read."""
    wide = "mov.u64 \t%pt_s0, %clock64;" in ptx
    # 64-bit clocks (the tree's default) add onto the scope's 64-bit sum, 32-bit ones onto its
    # count.
    width, source = ("u64", "%pt_a") if wide else ("u32", "%pt_c")
    ptx, enters = re.subn(
        rf"@%pt_lead mov\.{width} \t%pt_s([1-9]\d*), %clock(?:64)?;",
        lambda m: f"@%pt_lead add.{width} \t%pt_s{m.group(1)}, {source}{m.group(1)}, 3;",
        ptx,
    )
    reg = "%pt_d8" if wide else "%pt_w9"
    exit_read = f"@%pt_lead mov.{width} \t{reg}, %clock{'64' if wide else ''};"
    head, _, last = ptx.rpartition(exit_read)  # the last one ends the kernel scope
    if not enters or exit_read not in head:
        raise RuntimeError("no scope clock reads to replace")
    replaced = f"@%pt_lead add.{width} \t{reg}, {source}0, 7;"
    return head.replace(exit_read, replaced) + exit_read + last


def reads_only(ptx):
    """The tree variant (64-bit clocks) with its scopes' clock reads kept and the sums, counts
    and copies of readings around them gone (the kernel scope keeps all of its own): each
    reading is xor-ed into its scope's sum, which the record stores, so ptxas keeps the read."""
    read = "@%pt_lead mov.u64 \t%pt_d8, %clock64;"
    head, _, last = ptx.rpartition(read)  # the last exit read ends the kernel scope
    out, changed = [], 0
    for line in head.split("\n"):
        body = line.strip()
        enter = re.fullmatch(r"@%pt_lead mov\.u64 \t%pt_s([1-9]\d*), %clock64;", body)
        exit_ = re.fullmatch(r"sub\.u64 \t%pt_d6, %pt_d8, %pt_s([1-9]\d*);", body)
        if enter:
            out.append("\t" + read)
        if enter or exit_:
            i = (enter or exit_).group(1)
            out.append(f"\txor.b64 \t%pt_a{i}, %pt_a{i}, %pt_d8;")
            changed += 1
        elif not re.fullmatch(
            r"(add\.u64 \t%pt_a|add\.u32 \t%pt_[ce]|mov\.u64 \t%pt_s)[1-9]\d*, .*", body
        ):
            out.append(line)
    if not changed:
        raise RuntimeError("no scope clock reads found (reads_only takes 64-bit clocks)")
    return "\n".join(out) + read + last


def make_launch(driver, func, ptx, values, grid, threads, shared, stream, ring=None):
    """One launch of func on grid (x, y) with values as its parameters (the last one the
    record buffer). With
    ring (a device tensor), each launch records into the next part of it, the slot after the
    previous launch's, as a session's launches do, so that the records stream through the L2
    cache; without, every launch records into the same bytes."""
    if ring is None:
        held, array = _params(ptx, values)

        def launch(held=held):  # held: the parameter values the array points at
            driver.launch(func, grid, threads, shared, stream, array)

        return launch
    ctas = grid[0] * grid[1]
    stride = (16 + ctas * 64 + 255) // 256 * 256  # a CTA record is at most 64 bytes here
    state = {"offset": 0}

    def ring_launch():
        held, array = _params(ptx, values[:-1] + [ring.data_ptr() + state["offset"]])
        state["offset"] = (state["offset"] + stride) % (ring.numel() - stride)
        driver.launch(func, grid, threads, shared, stream, array)  # copies the parameters
        del held

    return ring_launch


def _sass(ptx):
    """SASS text of ptx compiled for sm_90a by the ptxas that Triton uses."""
    import subprocess
    import tempfile

    from triton import knobs
    from triton.backends.nvidia import compiler

    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        ptxas = compiler.get_ptxas(90).path
        subprocess.run([ptxas, "--gpu-name", "sm_90a", src, "-o", cubin], check=True)
        dump = [knobs.nvidia.cuobjdump.path, "-sass", cubin]
        return subprocess.run(dump, check=True, capture_output=True, text=True).stdout


def sass_issue(sass):
    """(instructions, fixed stall cycles) of the whole kernel and of its largest loop (the
    span of its longest backward branch; None when it has none). An instruction is printed as
    its address and text, then its control word (the second 64 bits), whose bits 41-44 are
    the stall count."""
    code = re.findall(
        r"/\*([0-9a-f]{4,})\*/\s+([^;]*);\s*/\* 0x[0-9a-f]{16} \*/\s*\n\s*/\* (0x[0-9a-f]{16}) \*/",
        sass,
    )
    ins = [(int(a, 16), text.strip(), int(ctl, 16) >> 41 & 0xF) for a, text, ctl in code]
    ins = [i for i in ins if not i[1].startswith("NOP")]
    spans = [
        (int(m.group(1), 16), at)
        for at, text, _ in ins
        if (m := re.search(r"BRA (0x[0-9a-f]+)", text)) and int(m.group(1), 16) < at
    ]

    def issue(part):
        return len(part), sum(stall for _, _, stall in part)

    loop = None
    if spans:
        lo, hi = max(spans, key=lambda s: s[1] - s[0])
        loop = issue([i for i in ins if lo <= i[0] <= hi])
    return issue(ins), loop


def static_table(kernels):
    """The --static table: per kernel and variant, SASS instructions and fixed stall cycles."""
    print(
        f"{'kernel':10s} {'variant':14s} {'instrs':>7s} {'stall':>6s} {'loop instrs':>12s} "
        f"{'loop stall':>11s}"
    )
    for name in kernels:
        found = variants(name, 232448)  # an H100's opt-in shared memory per block
        tree = found["tree"][0]
        found["no_clock"] = (without_scope_clocks(tree), 0)
        found["reads_only"] = (reads_only(tree), 0)
        for variant, (ptx, _shared) in found.items():
            (n, stall), loop = sass_issue(_sass(ptx))
            cells = f"{loop[0]:12d} {loop[1]:11d}" if loop else f"{'':12s} {'':11s}"
            print(f"{name:10s} {variant:14s} {n:7d} {stall:6d} {cells}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--kernels", default="vadd,softmax,matmul,attention")
    ap.add_argument("--kernel-tracing", action="store_true", help="time inside a CUPTI session")
    ap.add_argument("--triton", action="store_true", help="add Triton's own instrumentation")
    ap.add_argument("--static", action="store_true", help="read the SASS, run nothing")
    args = ap.parse_args()
    if args.static:
        return static_table(args.kernels.split(","))

    import torch

    dev = "cuda"
    torch.zeros(1, device=dev)
    max_shared = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    n, S, D = 1 << 20, 4096, 64
    x, y, o = (torch.randn(n, device=dev) for _ in range(3))
    rows, rows_out = torch.randn(4096, 1024, device=dev), torch.empty(4096, 1024, device=dev)
    q, k, v = (torch.randn(S, D, device=dev, dtype=torch.float16) for _ in range(3))
    att_out = torch.empty(S, D, device=dev)
    K = 4096
    a, b = (torch.randn(K, K, device=dev, dtype=torch.float16) for _ in range(2))
    c = torch.empty(K, K, device=dev)
    scratch = torch.zeros(64 << 20, dtype=torch.uint8, device=dev)  # Proton's buffer stand-in
    setups = {  # grid, parameters (Triton adds global and profile scratch), launches per timing
        "vadd": ((n // 1024, 1), [x, y, o, n], 200),
        "softmax": ((4096, 1), [rows, rows_out], 100),
        "matmul": ((K // 128, K // 128), [a, b, c], 10),
        "attention": ((S // 64, 1), [q, k, v, att_out], 50),
    }
    driver, stream = _Driver(), torch.cuda.current_stream().cuda_stream
    launches, buffers = {}, []  # buffers: Triton's profile buffers, alive while timed
    for name in args.kernels.split(","):
        grid, tensors, count = setups[name]
        threads = OPTIONS[name]["num_warps"] * 32
        values = [t.data_ptr() if torch.is_tensor(t) else t for t in tensors] + [
            0,
            scratch.data_ptr(),
        ]
        for variant, (ptx, shared) in variants(name, max_shared).items():
            func = driver.function(ptx, name, shared)
            launches[(name, variant)] = (
                make_launch(driver, func, ptx, values, grid, threads, shared, stream),
                count,
            )
            if variant == "tree":
                launches[(name, "tree_ring")] = (
                    make_launch(driver, func, ptx, values, grid, threads, shared, stream, scratch),
                    count,
                )
                for derived, changed in (
                    ("no_clock", without_scope_clocks(ptx)),
                    ("reads_only", reads_only(ptx)),
                ):
                    func = driver.function(changed, name, shared)
                    launches[(name, derived)] = (
                        make_launch(driver, func, changed, values, grid, threads, shared, stream),
                        count,
                    )

        built = triton_variant(name) if args.triton else None
        if built:
            ptx, shared, per_cta = built
            buffer = torch.zeros(max(grid[0] * grid[1] * per_cta, 1), dtype=torch.uint8, device=dev)
            buffers.append(buffer)
            launches[(name, "triton")] = (
                make_launch(
                    driver,
                    driver.function(ptx, name, shared),
                    ptx,
                    values[:-1] + [buffer.data_ptr()],
                    grid,
                    threads,
                    shared,
                    stream,
                ),
                count,
            )

    spin_rate = spin_cycles_per_s()
    if args.kernel_tracing:
        import proton

        proton.start("ptx_variants_kernel_tracing")

    def timed_us(launch, count):
        return queued_kernel_ms(launch, count, spin_rate) * 1e3

    times = {key: [] for key in launches}
    for r in range(args.rounds):
        keys = list(launches)
        random.shuffle(keys)
        for key in keys:
            times[key].append(timed_us(*launches[key]))
        print(f"round {r + 1}/{args.rounds}", flush=True)
    if args.kernel_tracing:
        proton.finalize()
    print(f"{'kernel':10s} {'variant':14s} {'us':>8s} {'ratio':>7s}  interquartile")
    for name in args.kernels.split(","):
        base = statistics.median(times[(name, "plain")])
        for (kernel, variant), ts in times.items():
            if kernel != name:
                continue
            r = sorted(t / base for t in ts)
            q1, q3 = r[len(r) // 4], r[3 * len(r) // 4]
            med = statistics.median(ts)
            print(f"{name:10s} {variant:14s} {med:8.3f} {med / base:7.3f}  [{q1:.3f}, {q3:.3f}]")


if __name__ == "__main__":
    main()
