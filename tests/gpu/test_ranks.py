"""Multi-process runs: one profile per rank, merged by the viewer. NCCL kernels are kernels."""

import os
import subprocess
import sys

import pytest
from gpu_tree import kernels_under
from proton_test_utils import PYTHON_DIR, load_hatchet

torch = pytest.importorskip("torch")

STEPS = 20

TRAIN = f"""
import os, torch, torch.distributed as dist, proton
rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
device = local if os.environ.get("SHARE_ONE_GPU") != "1" else 0
torch.cuda.set_device(device)
backend = "gloo" if os.environ.get("SHARE_ONE_GPU") == "1" else "nccl"
dist.init_process_group(backend)
model = torch.nn.Linear(256, 256, device="cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, device="cuda")
grads = torch.zeros(256 * 256 + 256, device="cuda" if backend == "nccl" else "cpu")
dist.barrier()
torch.cuda.synchronize()
proton.start("ddp", backend="cupti")
for step in range({STEPS}):
    with proton.scope("step"):
        with proton.scope("forward_backward"):
            model(x).square().mean().backward()
        with proton.scope("all_reduce"):
            flat = torch.cat([p.grad.flatten() for p in model.parameters()])
            grads.copy_(flat)
            dist.all_reduce(grads)
        opt.step()
        opt.zero_grad()
torch.cuda.synchronize()
proton.finalize()
dist.destroy_process_group()
"""


def _torchrun(tmp_path, **env):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    full = {**os.environ, "PYTHONPATH": PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full.update(env)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        full.pop(k, None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    result = subprocess.run(
        [*cmd, str(script)], cwd=tmp_path, env=full, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    files = sorted(p.name for p in tmp_path.glob("ddp*.hatchet"))
    assert files == ["ddp.rank0.hatchet", "ddp.rank1.hatchet"]
    return [load_hatchet(tmp_path / f) for f in files]


def _under(root, *path):
    node = root
    for name in path:
        node = next(c for c in node["children"] if c["frame"]["name"] == name)
    return node


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_torchrun_two_gpus_writes_rank_files_with_nccl_kernels(tmp_path):
    profiles = _torchrun(tmp_path)
    pci = []
    for rank, (root, devices) in enumerate(profiles):
        meta = root["proton_metadata"]
        assert (meta["rank"], meta["world_size"]) == (rank, 2)
        # The device block names the GPU this rank used, by index and by PCI address.
        assert list(devices["CUDA"]) == [str(rank)]
        pci.append(devices["CUDA"][str(rank)]["pci_bus_id"])
        nccl = [(n, c) for n, c in kernels_under(_under(root, "step", "all_reduce")) if "nccl" in n]
        assert nccl and sum(c for _, c in nccl) == STEPS, nccl
        ids = {
            c["metrics"]["device_id"]
            for c in _under(root, "step", "all_reduce")["children"]
            if "device_id" in c["metrics"]
        }
        assert ids == {str(rank)}
    assert len(set(pci)) == 2 and all(len(p) == 12 for p in pci), pci
    # The viewer merges the rank files: the NCCL kernel shows, with the spread across ranks.
    viewer = subprocess.run(
        [
            sys.executable,
            "-m",
            "proton.viewer.main",
            "-m",
            "time/ms",
            "ddp.rank0.hatchet",
            "ddp.rank1.hatchet",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": PYTHON_DIR},
    )
    assert viewer.returncode == 0, viewer.stderr
    assert "nccl" in viewer.stdout
    assert "imbalance" in viewer.stdout.lower()


def test_two_processes_on_one_gpu_write_one_file_each(tmp_path):
    profiles = _torchrun(tmp_path, SHARE_ONE_GPU="1")
    counts = []
    for rank, (root, _) in enumerate(profiles):
        assert root["proton_metadata"]["rank"] == rank
        counts.append(sorted(kernels_under(_under(root, "step", "forward_backward"))))
    assert counts[0] == counts[1]  # the same program: the same kernels, the same counts
    assert all(c % STEPS == 0 for _, c in counts[0])
