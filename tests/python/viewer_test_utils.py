"""Helpers shared by the viewer tests: golden paths, running proton-viewer in-process and in
a subprocess."""

import os
import subprocess
import sys
from pathlib import Path

from proton.viewer.main import main
from proton_test_utils import PYTHON_DIR

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
KERNELS = str(GOLDEN / "viewer_kernels.hatchet")
KERNELS_MSGPACK = str(GOLDEN / "viewer_kernels.part_1.hatchet_msgpack")
PYTHON_FRAMES = str(GOLDEN / "viewer_python.hatchet")
TRITON = str(GOLDEN / "viewer_triton.hatchet")
RANK0 = str(GOLDEN / "viewer_rank0.hatchet")
RANK1 = str(GOLDEN / "viewer_rank1.hatchet")
ARCH75 = str(GOLDEN / "viewer_arch75.hatchet")

# An H100's device table, as profiles carry it.
DEVICES = {
    "CUDA": {
        "0": {
            "arch": "90",
            "num_sms": 132,
            "clock_rate": 1980000,
            "memory_clock_rate": 2619000,
            "bus_width": 5120,
        }
    }
}


def node(name, metrics=None, *children):
    """A Hatchet node as Proton writes it."""
    return {
        "frame": {"name": name, "type": "function"},
        "metrics": metrics or {},
        "children": list(children),
    }


STATS_LINES = [
    "",
    "Profile stats (nonzero: something was dropped or unmatched):",
    "  activity_records_dropped  2",
    "  correlations_unmatched    0",
]


def view(capsys, *argv):
    """(exit status, stdout lines, stderr) of proton-viewer run in this process."""
    try:
        main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def view_lines(capsys, *argv):
    """stdout lines of a run that must succeed."""
    code, lines, err = view(capsys, *argv)
    assert code == 0, err
    return lines


def run_viewer(*argv, cwd=None, preexec_fn=None):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "proton.viewer.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
        preexec_fn=preexec_fn,
    )
