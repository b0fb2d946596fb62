"""proton.viewer: read tree profiles into plain Python objects, derive metrics, render and
export them. The `proton-viewer` command is `proton.viewer.main:main`.

    from proton import viewer
    profile = viewer.load("run.hatchet")          # Proton's or Triton's .hatchet(_msgpack)
    times = viewer.derive(profile, "time/ms").values   # one value per node, pre-order
    df = profile.to_dataframe()                    # when pandas is installed

With llnl-hatchet installed, triton.profiler.viewer's functions work here too (parse, read,
get_raw_metrics, derive_metrics, filter_frames, format_frames, apply_diff_profile,
get_min_time_flops, get_min_time_bytes; see hatchet_api.py).
"""

from .derive import Column, derive
from .errors import ViewerError
from . import hatchet_api
from .hatchet_api import (
    apply_diff_profile,
    derive_metrics,
    filter_frames,
    format_frames,
    get_min_time_bytes,
    get_min_time_flops,
    get_raw_metrics,
    parse,
    read,
)
from .model import Node, Profile, align, hide_launch_metadata, load, select
from .render import render

__all__ = [
    "Column",
    "Node",
    "Profile",
    "ViewerError",
    "align",
    "derive",
    "hide_launch_metadata",
    "load",
    "render",
    "select",
    *hatchet_api.__all__,
]
