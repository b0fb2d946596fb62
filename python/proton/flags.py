"""Process-wide switches of the Python layer (as in triton.profiler.flags)."""

from dataclasses import dataclass


@dataclass
class ProfilerFlags:
    # True from start() until finalize() of every session.
    profiling_on: bool = False
    # True while the `proton` command line owns session 0.
    command_line: bool = False


flags = ProfilerFlags()
