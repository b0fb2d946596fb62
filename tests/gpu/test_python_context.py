"""context="python" on a real GPU: torch and Triton kernels are filed under the Python lines
that launched them (this file's), with scopes and states on top, exact counts."""

import inspect
import os
import threading

import proton
import pytest
from proton_test_utils import load_hatchet

torch = pytest.importorskip("torch")

PROTON_DIR = os.path.dirname(os.path.abspath(proton.__file__)) + os.sep


def line():
    """The caller's current line."""
    return inspect.currentframe().f_back.f_lineno


def here(lineno, function):
    return f"{__file__}:{lineno}@{function}"


def kernel_paths(node, prefix=()):
    """(path of names below ROOT, count) of every kernel leaf."""
    out = []
    for child in node["children"]:
        path = (*prefix, child["frame"]["name"])
        if child["metrics"].get("count") and not child["children"]:
            out.append((path, child["metrics"]["count"]))
        out.extend(kernel_paths(child, path))
    return out


def dump(paths):
    return "\n".join(f"{c:6d} {' / '.join(p)}" for p, c in paths)


@pytest.fixture
def x():
    t = torch.zeros(4096, device="cuda")
    torch.cuda.synchronize()
    return t


def test_torch_kernels_are_filed_under_the_launching_line(x):
    proton.start("torch_lines", context="python", backend="cupti")
    launch_line = line() + 2
    for _ in range(10):
        x.add_(1)
    proton.finalize()
    paths = kernel_paths(load_hatchet("torch_lines.hatchet")[0])
    assert len(paths) == 1, dump(paths)
    path, count = paths[0]
    assert count == 10
    assert path[-2] == here(launch_line, "test_torch_kernels_are_filed_under_the_launching_line")
    assert "elementwise" in path[-1]
    assert not [p for p in path if p.startswith(PROTON_DIR)], dump(paths)
    assert int(x[0].item()) == 10


def test_two_lines_two_nodes_and_scopes_states_on_top(x):
    proton.start("lines_scopes", context="python", backend="cupti")
    first = line() + 1
    x.add_(1)
    with proton.scope("outer"), proton.state("st"):
        second = line() + 1
        x.mul_(2)
    proton.finalize()
    fn = "test_two_lines_two_nodes_and_scopes_states_on_top"
    paths = dict(kernel_paths(load_hatchet("lines_scopes.hatchet")[0]))
    by_parent = {p[-2] if p[-2] != "st" else p[-4:-1]: c for p, c in paths.items()}
    assert by_parent[here(first, fn)] == 1, dump(paths.items())
    assert by_parent[(here(second, fn), "outer", "st")] == 1, dump(paths.items())
    assert sum(paths.values()) == 2


def test_triton_kernel_shows_this_files_line(x):
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def pyctx_add_kernel(ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + offs, tl.load(ptr + offs, mask=offs < n) + 1, mask=offs < n)

    pyctx_add_kernel[(4,)](x, x.numel(), BLOCK=1024)  # compile before profiling
    torch.cuda.synchronize()
    proton.start("triton_lines", context="python", backend="cupti")
    launch_line = line() + 2
    for _ in range(20):
        pyctx_add_kernel[(4,)](x, x.numel(), BLOCK=1024)
    proton.finalize()
    paths = kernel_paths(load_hatchet("triton_lines.hatchet")[0])
    assert len(paths) == 1, dump(paths)
    path, count = paths[0]
    assert count == 20 and path[-1] == "pyctx_add_kernel"
    # Triton's launcher frames (jit.py) may follow; this file's line is in the stack.
    assert here(launch_line, "test_triton_kernel_shows_this_files_line") in path, dump(paths)
    assert not [p for p in path if p.startswith(PROTON_DIR)], dump(paths)


def test_threads_are_filed_under_their_own_stacks():
    bufs = [torch.zeros(1024, device="cuda") for _ in range(2)]
    torch.cuda.synchronize()
    proton.start("thread_lines", context="python", backend="cupti")
    launch_line = line() + 4

    def work(i):
        for _ in range(50):
            bufs[i].add_(1)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    paths = kernel_paths(load_hatchet("thread_lines.hatchet")[0])
    assert sum(c for _, c in paths) == 100, dump(paths)
    for path, _ in paths:
        assert path[-2] == here(launch_line, "work"), dump(paths)
        assert not [p for p in path if p.startswith(PROTON_DIR)], dump(paths)
