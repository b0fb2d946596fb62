"""Periodic flushing (part files, bounded memory) and per-rank file names, without a GPU."""

import json
import socket

import proton
import pytest
from proton_test_utils import load_hatchet, names, run_python


def _child_names(path):
    return [c["frame"]["name"] for c in load_hatchet(path)[0]["children"]]


def test_each_advance_writes_the_finished_phase_and_frees_it(tmp_path):
    s = proton.start("run", mode="periodic_flushing")
    for step in range(3):
        with proton.scope(f"step{step}"):
            pass
        assert proton.data.advance_phase(s) == step + 1
        # The finished phase is on disk at once (no device work to wait for) ...
        assert _child_names(tmp_path / f"run.part_{step}.hatchet") == [f"step{step}"]
        # ... and no longer in memory.
        with pytest.raises(proton.ProfilerError, match=f"has no data for phase {step}"):
            proton.data.get(s, step)
    with proton.scope("last"):
        pass
    proton.finalize()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"run.part_{i}.hatchet" for i in range(4)]
    assert _child_names(tmp_path / "run.part_3.hatchet") == ["last"]
    meta = load_hatchet(tmp_path / "run.part_1.hatchet")[0]["proton_metadata"]
    assert (meta["phase"], meta["mode"]) == (1, "periodic_flushing")


def test_typed_mode_picks_the_part_format(tmp_path):
    s = proton.start("mp", mode=proton.mode.PeriodicFlushing(format="hatchet_msgpack"))
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    proton.finalize()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["mp.part_0.hatchet_msgpack", "mp.part_1.hatchet_msgpack"]
    assert (tmp_path / files[0]).read_bytes()[:1] == b"\x92"  # [root, devices]


def test_unknown_periodic_option_is_a_config_error():
    with pytest.raises(ValueError, match="Unknown option 'every' for mode 'periodic_flushing'"):
        proton.start("bad", mode="periodic_flushing:every=5")


def test_memory_holds_only_the_current_phase_over_many_phases(tmp_path):
    s = proton.start("long", mode="periodic_flushing")
    for step in range(2000):
        with proton.scope("step", metrics={"n": 1}):
            pass
        proton.data.advance_phase(s)
    # Every earlier phase was written and dropped; the current one is the only one held.
    for phase in (0, 1000, 1999):
        with pytest.raises(proton.ProfilerError):
            proton.data.get(s, phase)
    assert names(proton.data.get(s, 2000)[0]) == ("ROOT", [])
    proton.finalize()
    assert len(list(tmp_path.glob("long.part_*.hatchet"))) == 2001
    root = load_hatchet(tmp_path / "long.part_1234.hatchet")[0]
    assert root["children"][0]["metrics"] == {"n": 1}


RANK_PROGRAM = """
import proton, warnings
warnings.simplefilter("ignore")
proton.start("job")
with proton.scope("work"):
    pass
proton.finalize()
"""


# Launcher variables cleared, so the test's own environment cannot leak a rank in.
NO_RANK = {
    k: ""
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
}


@pytest.mark.parametrize(
    "env,expected,rank",
    [
        ({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}, "job.rank1.hatchet", (1, 2)),
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, "job.rank3.hatchet", (3, 4)),
        ({"RANK": "0", "WORLD_SIZE": "1"}, "job.hatchet", None),
        ({}, "job.hatchet", None),
    ],
)
def test_rank_in_the_environment_names_the_file(tmp_path, env, expected, rank):
    result = run_python(RANK_PROGRAM, tmp_path, env={**NO_RANK, **env, "PROTON_FORCE_NO_GPU": "1"})
    assert result.returncode == 0, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == [expected]
    meta = load_hatchet(tmp_path / expected)[0]["proton_metadata"]
    assert (meta.get("rank"), meta.get("world_size")) == (rank or (None, None))
    assert meta.get("host") == (socket.gethostname() if rank else None)


def test_two_ranks_with_one_name_do_not_clobber_each_other(tmp_path):
    import os
    import subprocess
    import sys

    from proton_test_utils import PYTHON_DIR

    procs = []
    for r in (0, 1):
        env = {**os.environ, **NO_RANK, "RANK": str(r), "WORLD_SIZE": "2"}
        env.update(PYTHONPATH=PYTHON_DIR, PROTON_FORCE_NO_GPU="1")
        code = RANK_PROGRAM.replace('"work"', f'"work{r}"')
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env))
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    for r in (0, 1):
        assert _child_names(tmp_path / f"job.rank{r}.hatchet") == [f"work{r}"]
    json.loads((tmp_path / "job.rank0.hatchet").read_text())  # complete, valid JSON
