"""hook="triton" on a real GPU: launch metadata renames kernels and adds their metrics,
kernels launched inside a metadata function are filed apart, counts are exact with several
threads, and every autotuned config is visible."""

import threading

import proton
import pytest
from gpu_tree import dump, kernels_under
from proton_test_utils import find, load_hatchet

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

META = "__proton_launch_metadata"


def vadd_metadata(grid, kernel_metadata, args):
    n = args["n"]
    return {"name": f"vadd_{n}", "flops32": n, "bytes": 12 * n, "my_metric": 3}


@triton.jit(launch_metadata=vadd_metadata)
def meta_vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def probing_metadata(grid, kernel_metadata, args):
    total = args["x"].sum()  # a torch kernel launched by the metadata function
    return {"name": "probed_vadd", "flops": 1, "probe_was_nonneg": int(total.item() >= 0)}


@triton.jit(launch_metadata=probing_metadata)
def probed_vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@pytest.fixture
def tensors():
    ts = [torch.rand(4096, device="cuda") for _ in range(3)]
    torch.cuda.synchronize()
    return ts


def launch(kernel, a, b, c):
    kernel[(4,)](a, b, c, a.numel(), BLOCK=1024)


def test_renamed_kernel_gets_flops32_and_a_custom_metric(tensors):
    launch(meta_vadd_kernel, *tensors)  # compile first
    torch.cuda.synchronize()
    proton.start("renamed", backend="cupti", hook="triton")
    with proton.scope("tri"):
        for _ in range(20):
            launch(meta_vadd_kernel, *tensors)
    proton.finalize()
    root = load_hatchet("renamed.hatchet")[0]
    tri = find(root, "tri")
    assert [c["frame"]["name"] for c in tri["children"]] == ["vadd_4096"], dump(root)
    m = tri["children"][0]["metrics"]
    assert m["count"] == 20 and m["time (ns)"] > 0
    assert m["flops32"] == 20 * 4096
    assert m["bytes"] == 20 * 12 * 4096
    assert m["my_metric"] == 60
    assert tri["children"][0]["children"] == []  # the real kernel name is not nested below


def test_hooks_are_removed_when_the_session_ends(tensors):
    proton.start("gone", backend="cupti", hook="triton")
    proton.finalize()
    proton.start("after", backend="cupti")
    with proton.scope("plain"):
        launch(meta_vadd_kernel, *tensors)
    proton.finalize()
    root = load_hatchet("after.hatchet")[0]
    assert kernels_under(find(root, "plain")) == [("meta_vadd_kernel", 1)], dump(root)


def test_kernels_launched_inside_metadata_are_filed_apart_and_counted_once(tensors):
    launch(probed_vadd_kernel, *tensors)
    torch.cuda.synchronize()
    proton.start("probe", backend="cupti", hook="triton")
    with proton.scope("tri"):
        for _ in range(10):
            launch(probed_vadd_kernel, *tensors)
    proton.finalize()
    root = load_hatchet("probe.hatchet")[0]
    tri = find(root, "tri")
    renamed = find(tri, "probed_vadd")
    assert renamed["metrics"]["count"] == 10 and renamed["metrics"]["flops"] == 10
    assert renamed["metrics"]["probe_was_nonneg"] == 10
    probes = kernels_under(find(tri, META))
    assert sum(c for _, c in probes) == 10, dump(root)  # the .sum() reductions, once each
    assert sum(c for _, c in kernels_under(tri)) == 20, dump(root)


def test_two_threads_hundred_hooked_launches_each(tensors):
    per_thread = [[torch.rand(2048 * (i + 1), device="cuda") for _ in range(3)] for i in range(2)]
    for ts in per_thread:
        launch(meta_vadd_kernel, *ts)
    torch.cuda.synchronize()
    proton.start("threads", backend="cupti", hook="triton")

    def work(i):
        with proton.scope(f"t{i}"):
            for _ in range(100):
                launch(meta_vadd_kernel, *per_thread[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = load_hatchet("threads.hatchet")[0]
    for i in range(2):
        n = 2048 * (i + 1)
        node = find(root, f"t{i}", f"vadd_{n}")
        assert node["metrics"]["count"] == 100, dump(root)
        assert node["metrics"]["flops32"] == 100 * n
        assert node["metrics"]["my_metric"] == 300
        assert kernels_under(find(root, f"t{i}")) == [(f"vadd_{n}", 100)], dump(root)


def test_python_context_and_hook_together(tensors):
    launch(meta_vadd_kernel, *tensors)
    torch.cuda.synchronize()
    proton.start("pyhook", context="python", backend="cupti", hook="triton")
    for _ in range(5):
        launch(meta_vadd_kernel, *tensors)
    proton.finalize()
    leaves = kernels_under(load_hatchet("pyhook.hatchet")[0])
    assert leaves == [("vadd_4096", 5)], leaves


def autotune_metadata(grid, kernel_metadata, args):
    return {"name": f"tuned_B{args['BLOCK']}", "bytes": 12 * args["n"]}


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 512, 1024)], key=["n"]
)
@triton.jit(launch_metadata=autotune_metadata)
def tuned_vadd_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def test_every_autotuned_config_is_visible():
    a, b, c = (torch.rand(1 << 16, device="cuda") for _ in range(3))
    torch.cuda.synchronize()
    proton.start("autotune", backend="cupti", hook="triton")
    with proton.scope("auto"):
        for _ in range(5):
            tuned_vadd_kernel[lambda meta: (triton.cdiv(a.numel(), meta["BLOCK"]),)](
                a, b, c, a.numel()
            )
    proton.finalize()
    root = load_hatchet("autotune.hatchet")[0]
    counts = {}
    for name, count in kernels_under(find(root, "auto")):
        counts[name] = counts.get(name, 0) + count
    for block in (256, 512, 1024):
        assert counts.get(f"tuned_B{block}", 0) >= 1, dump(root)  # benchmarked, so visible
    best = tuned_vadd_kernel.best_config.kwargs["BLOCK"]
    assert counts[f"tuned_B{best}"] >= 5


def mixed_flops_metadata(grid, kernel_metadata, args):
    n = args["n"]
    # Launch-metadata functions often give 2 * M * N * K (an int) for one shape and
    # 2.0 * ... (a float) for another; bytes likewise.
    if n % 2:
        return {"name": "mixed", "flops": 2 * n, "bytes": 4.0 * n}
    return {"name": "mixed", "flops": 0.5 * n, "bytes": 4 * n}


@triton.jit(launch_metadata=mixed_flops_metadata)
def mixed_flops_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def conflicting_metadata(grid, kernel_metadata, args):
    # A string is no metric (it is left out, as in triton.profiler); a list of numbers (a
    # 1-d tensor of two) is one, of another type than a float: a real conflict.
    return {"name": "conflicting", "flops": torch.tensor([1.0, 2.0]) if args["n"] % 2 else 1.0}


@triton.jit(launch_metadata=conflicting_metadata)
def conflicting_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


def test_int_and_float_launch_metrics_of_one_name_are_all_kept(tensors, capfd):
    a, b, c = tensors
    for n in (4096, 4095):
        mixed_flops_kernel[(4,)](a, b, c, n, BLOCK=1024)  # compile both specialisations
    torch.cuda.synchronize()
    proton.start("mixed", backend="cupti", hook="triton")
    for _ in range(3):
        for n in (4096, 4095):
            mixed_flops_kernel[(4,)](a, b, c, n, BLOCK=1024)
    proton.finalize()
    root = load_hatchet("mixed.hatchet")[0]
    meta = root["proton_metadata"]
    (kernel,) = [c for c in root["children"] if c["frame"]["name"] == "mixed"]
    m = kernel["metrics"]
    assert m["count"] == 6
    assert m["flops"] == 3 * (0.5 * 4096 + 2 * 4095) and isinstance(m["flops"], float)
    assert m["bytes"] == 3 * 4 * (4096 + 4095) and isinstance(m["bytes"], int)
    assert meta["stats"]["metrics_dropped_type_conflict"] == 0
    assert "Metric value type mismatch" not in capfd.readouterr().err


def test_a_real_conflict_drops_counts_and_names_metric_and_kernel_once(tensors, capfd):
    a, b, c = tensors
    for n in (4096, 4095):
        conflicting_kernel[(4,)](a, b, c, n, BLOCK=1024)
    torch.cuda.synchronize()
    capfd.readouterr()
    proton.start("conflict", backend="cupti", hook="triton")
    for _ in range(3):
        for n in (4096, 4095):
            conflicting_kernel[(4,)](a, b, c, n, BLOCK=1024)
    proton.finalize()
    root = load_hatchet("conflict.hatchet")[0]
    meta = root["proton_metadata"]
    (kernel,) = [c for c in root["children"] if c["frame"]["name"] == "conflicting"]
    assert kernel["metrics"]["count"] == 6 and kernel["metrics"]["flops"] == 3.0
    assert meta["stats"]["metrics_dropped_type_conflict"] == 3
    err = capfd.readouterr().err
    line = (
        "[PROTON] Metric value type mismatch for 'flops': current=float, new=list; the metrics "
        "given at 'conflicting' are dropped (counted in metrics_dropped_type_conflict; said once)"
    )
    assert err.count(line) == 1, err
