"""Writes the stored profiles of the HTML report's tests (tests/python/test_html_report.py).

    python3 tests/golden/html_goldens.py          # the deterministic ones
    python3 tests/golden/html_goldens.py --cpu    # also html_cpu.hatchet, by running Proton

html_kernels.hatchet   Proton, context="python": torch library frames above kernels that
                       carry flops8/16/32 and bytes, an instrumented kernel whose scopes
                       carry cycles, H100 device table
html_triton.hatchet    the shape triton.profiler writes: no Proton metadata, metrics
                       time (ns), count, flops16, bytes
html_intra.chrome_trace  an intra-kernel trace in Triton's layout (warp slices first, then
                       kernel slices, a CPU scope, flows): matmul (6 CTAs x 4 warps on 3 SMs,
                       scopes load/mma in a K loop) and two launches of vadd (4 CTAs x 2 warps)
html_intra_v1.chrome_trace  the same matmul launch in Proton's first layout (cat "warp",
                       integer pids and tids, lanes named "CTA c Warp w" by metadata events)
html_ranks.rank0/1.hatchet  two ranks of one step; rank 1's allreduce waits 3x longer
html_cpu.hatchet       (--cpu) a real CPU-only run: cpu_timed_scope times and user metrics
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
H100 = {
    "arch": "90",
    "num_sms": 132,
    "clock_rate": 1980000,
    "memory_clock_rate": 2619000,
    "bus_width": 5120,
}
SP = "/opt/venv/lib/python3.11/site-packages/"


def node(name, metrics=None, *children):
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics or {},
        "children": list(children),
    }


def kernel(name, time, count=1, **metrics):
    return node(
        name,
        {"time (ns)": time, "count": count, **metrics, "device_id": "0", "device_type": "CUDA"},
    )


def metadata(session, context):
    return {
        "tool": "proton",
        "version": "0.1.0",
        "command_line": "proton train.py",
        "start_time_unix_ns": 1700000000000000000,
        "session": session,
        "context": context,
        "data": "tree",
        "backend": "cupti",
        "mode": "",
        "phase": 0,
        "stats": {"activity_records_dropped": 0},
        "metric_aggregation": {
            "exclusive": ["cycles (exc)", "normalized_cycles (exc)"],
            "property": [],
        },
        "working_directory": "/home/u/proj",
        "script": "/home/u/proj/train.py",
    }


def write(name, document):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(document, f, separators=(",", ":"))
        f.write("\n")


def kernels_profile():
    call = SP + "torch/nn/modules/module.py:1790@_call_impl"
    wrapped = SP + "torch/nn/modules/module.py:1779@_wrapped_call_impl"
    linear = SP + "torch/nn/modules/linear.py:125@forward"
    gemm = kernel(
        "sm90_xmma_gemm_bf16", 4_000_000, 8, flops16=3_200_000_000_000, bytes=2_000_000_000
    )
    gemm_fp8 = kernel("sm90_gemm_fp8", 1_000_000, 4, flops8=1_600_000_000_000, bytes=600_000_000)
    softmax = kernel("softmax_kernel", 600_000, 8, flops32=1_000_000_000, bytes=3_000_000_000)
    norm = kernel("layer_norm_kernel", 400_000, 8, flops32=500_000_000, bytes=2_000_000_000)
    scoped = kernel(
        "matmul_kernel",
        2_000_000,
        2,
        flops16=1_200_000_000_000,
        bytes=400_000_000,
        **{"cycles (exc)": 3_960_000, "normalized_cycles (exc)": 123_750.0},
    )
    scoped["children"] = [
        node(
            "load", {"cycles (exc)": 1_600_000, "normalized_cycles (exc)": 50_000.0, "count": 1024}
        ),
        node(
            "mma", {"cycles (exc)": 1_920_000, "normalized_cycles (exc)": 60_000.0, "count": 1024}
        ),
        node(
            "epilogue", {"cycles (exc)": 320_000, "normalized_cycles (exc)": 10_000.0, "count": 64}
        ),
    ]
    copy = kernel("copy_kernel", 300_000, 2)
    root = node(
        "ROOT",
        {"time (ns)": 0, "count": 0},
        node(
            "/home/u/proj/train.py:40@main",
            {},
            node(
                "/home/u/proj/train.py:22@step",
                {},
                node(
                    wrapped,
                    {},
                    node(
                        call,
                        {},
                        node(linear, {}, gemm, gemm_fp8),
                        node("/home/u/proj/model.py:31@attention", {}, softmax, norm),
                    ),
                ),
                node("/home/u/proj/model.py:60@matmul", {}, scoped),
            ),
            node("/home/u/proj/train.py:30@save", {}, copy),
        ),
    )
    root["proton_metadata"] = metadata("html_kernels", "python")
    write("html_kernels.hatchet", [root, {"CUDA": {"0": H100}}])


def triton_profile():
    root = node(
        "ROOT",
        {"bytes": 0, "count": 0, "flops16": 0, "time (ns)": 0},
        node(
            "matmul",
            {},
            node(
                "matmul_kernel",
                {
                    "bytes": 50331648,
                    "count": 10,
                    "device_id": "0",
                    "device_type": "CUDA",
                    "flops16": 171798691840,
                    "time (ns)": 312000,
                },
            ),
        ),
        node(
            "softmax",
            {},
            node(
                "softmax_kernel",
                {
                    "bytes": 268435456,
                    "count": 10,
                    "device_id": "0",
                    "device_type": "CUDA",
                    "flops16": 1342177280,
                    "time (ns)": 98000,
                },
            ),
        ),
        node(
            "add_kernel",
            {
                "bytes": 12582912,
                "count": 1,
                "device_id": "0",
                "device_type": "CUDA",
                "flops16": 1048576,
                "time (ns)": 9000,
            },
        ),
    )
    write("html_triton.hatchet", [root, {"CUDA": {"0": H100}}])


def ranks_profiles():
    for rank, wait in ((0, 1_000_000), (1, 3_000_000)):
        root = node(
            "ROOT",
            {"time (ns)": 0, "count": 0},
            node(
                "step",
                {},
                node(
                    "forward",
                    {},
                    kernel("gemm", 5_000_000 + rank * 200_000, 4),
                    kernel("softmax", 1_000_000, 4),
                ),
                node("backward", {}, kernel("gemm_bwd", 9_000_000, 4)),
                kernel("allreduce", wait, 1),
            ),
            node("optimizer", {}, kernel("adam", 800_000 - rank * 100_000, 1)),
        )
        root["proton_metadata"] = dict(metadata("html_ranks", "shadow"), rank=rank)
        write(f"html_ranks.rank{rank}.hatchet", [root, {"CUDA": {"0": H100}}])


# ---------------------------------------------------------------------- traces
def _us(ns):
    return round(ns / 1000, 3)


def matmul_warps():
    """(kernel, sm, cta, warp, name, start ns, end ns, scope_path) of one matmul launch: 6
    CTAs, 2 per SM one after the other, 4 warps each, 3 K iterations of load then mma."""
    out = []
    for cta in range(6):
        sm = cta % 3
        begin = 10_000 + (cta // 3) * 16_000 + sm * 300
        for w in range(4):
            t = begin + w * 40
            spans = []
            for k in range(3):
                load = 1_500 + (w * 97 + cta * 53 + k * 31) % 900
                spans.append(("load", t, t + load))
                t += load + 50
                spans.append(("mma", t, t + 2_800))
                t += 2_850
            if w == 0:
                spans.append(("epilogue", t, t + 1_200))
                t += 1_200
            out.append(("matmul_kernel", sm, cta, w, "matmul_kernel", begin, t + 100, []))
            out += [("matmul_kernel", sm, cta, w, n, a, b, [n]) for n, a, b in spans]
    return out


def vadd_warps(start):
    return [
        (
            "vadd_kernel",
            cta,
            cta,
            w,
            "vadd_kernel",
            start + 200 + cta * 90 + w * 20,
            start + 2_600 + cta * 90 + w * 20 + (cta * 7 + w * 13) % 400,
            [],
        )
        for cta in range(4)
        for w in range(2)
    ]


def trace_triton():
    warps = matmul_warps() + vadd_warps(50_000) + vadd_warps(60_000)
    warps.sort(key=lambda e: (e[0] != "matmul_kernel", e[5] >= 60_000, e[1], e[2], e[3], e[5]))
    events = []
    for kern, sm, cta, w, name, a, b, path in warps:
        stack = ["ROOT", "step", kern]
        events.append(
            {
                "ph": "X",
                "name": name,
                "cat": kern,
                "ts": _us(a),
                "dur": _us(b - a),
                "pid": f"{kern} Core{sm} CTA{cta}",
                "tid": f"warp {w}",
                "args": {
                    "call_stack": stack,
                    "Init Time (ns)": 0,
                    "Post Final Time (ns)": 0,
                    "Finalization Time (ns)": 0,
                    "Frequency (MHz)": 1980.0,
                    "sm": sm,
                    "cycles": round((b - a) * 1.98),
                    "scope_path": path or [kern],
                },
            }
        )
    for name, a, b, corr in (
        ("matmul_kernel", 9_800, 44_000, 1),
        ("vadd_kernel", 50_000, 53_500, 2),
        ("vadd_kernel", 60_000, 63_500, 3),
    ):
        events.append(
            {
                "ph": "X",
                "name": name,
                "cat": "kernel",
                "ts": _us(a),
                "dur": _us(b - a),
                "pid": "GPU 0",
                "tid": "Stream 7",
                "args": {"call_stack": ["ROOT", "step", name]},
            }
        )
        events.append(
            {
                "ph": "s",
                "name": "launch->kernel",
                "cat": "flow",
                "id": corr,
                "ts": _us(a - 3_000),
                "pid": "CPU",
                "tid": "Thread 1234",
            }
        )
        events.append(
            {
                "ph": "f",
                "name": "launch->kernel",
                "cat": "flow",
                "id": corr,
                "ts": _us(a),
                "pid": "GPU 0",
                "tid": "Stream 7",
                "bp": "e",
            }
        )
    events.append(
        {
            "ph": "X",
            "name": "step",
            "cat": "scope",
            "ts": 0.0,
            "dur": 65.0,
            "pid": "CPU",
            "tid": "Thread 1234",
            "args": {"call_stack": ["ROOT", "step"]},
        }
    )
    meta = dict(metadata("html_intra", "shadow"), data="trace", backend="instrumentation")
    write(
        "html_intra.chrome_trace",
        {"displayTimeUnit": "us", "traceEvents": events, "otherData": {"proton_metadata": meta}},
    )


def trace_v1():
    """Proton's first layout: pid 1 (GPU 0), tid 2^40 + lane, lanes named by metadata."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "GPU 0"}}]
    lanes = {}
    slices = []
    for _, sm, cta, w, name, a, b, path in matmul_warps():
        tid = (1 << 40) + cta * 64 + w
        lanes[tid] = f"CTA {cta} Warp {w}"
        stack = ["ROOT", "step", "matmul_kernel"] + path
        slices.append(
            {
                "ph": "X",
                "name": name,
                "cat": "warp",
                "ts": _us(a),
                "dur": _us(b - a),
                "pid": 1,
                "tid": tid,
                "args": {"call_stack": stack, "sm": sm, "cycles": round((b - a) * 1.98)},
            }
        )
    for tid, lane in sorted(lanes.items()):
        events.append(
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": lane}}
        )
    events.append(
        {
            "ph": "X",
            "name": "matmul_kernel",
            "cat": "kernel",
            "ts": 9.8,
            "dur": 34.2,
            "pid": 1,
            "tid": 7,
            "args": {"call_stack": ["ROOT", "step", "matmul_kernel"]},
        }
    )
    write("html_intra_v1.chrome_trace", {"displayTimeUnit": "us", "traceEvents": events + slices})


def cpu_profile():
    """A real CPU-only run (no GPU: Proton records scopes, their CPU times and metrics)."""
    import warnings

    import proton

    warnings.simplefilter("ignore", RuntimeWarning)
    path = os.path.join(HERE, "html_cpu")
    session = proton.start(path)

    def busy(n):
        return sum(i * i for i in range(n))

    with proton.cpu_timed_scope("train", {"epochs": 1}):
        for step in range(2):
            with proton.cpu_timed_scope("step", {"tokens": 4096}):
                with proton.cpu_timed_scope("data_loader"):
                    busy(60_000)
                with proton.cpu_timed_scope("forward"):
                    with proton.cpu_timed_scope("embedding"):
                        busy(40_000)
                    with proton.cpu_timed_scope("attention"):
                        busy(120_000)
                    with proton.cpu_timed_scope("mlp"):
                        busy(90_000)
                with proton.cpu_timed_scope("backward"):
                    busy(200_000)
        with proton.cpu_timed_scope("checkpoint"):
            busy(50_000)
    proton.finalize(session)


if __name__ == "__main__":
    kernels_profile()
    triton_profile()
    ranks_profiles()
    trace_triton()
    trace_v1()
    if "--cpu" in sys.argv:
        cpu_profile()
