"""proton.viewer: read tree profiles into plain Python objects, derive metrics, render and
export them. The `proton-viewer` command is `proton.viewer.main:main`.

    from proton import viewer
    profile = viewer.load("run.hatchet")          # Proton's or Triton's .hatchet(_msgpack)
    times = viewer.derive(profile, "time/ms").values   # one value per node, pre-order
    df = profile.to_dataframe()                    # when pandas is installed
"""

from .derive import Column, derive
from .errors import ViewerError
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
]
