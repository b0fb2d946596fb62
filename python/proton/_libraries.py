"""Where vendor libraries shipped inside Python packages live, found without importing them.

The C++ loader searches these after PROTON_CUPTI_LIB_PATH and any CUPTI already loaded in the
process, and before the CUDA toolkit and the system loader path.
"""

import importlib.util
import os
from typing import List


def _package_dirs(name: str) -> List[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return list(spec.submodule_search_locations or [])


def cupti_dirs() -> List[str]:
    """Directories that may hold libcupti of CUDA 12 or 13: NVIDIA's wheels, then Triton's copy.

    The C++ selector reads each library's major from its SONAME and searches these once per
    major, the preferred major first (see csrc/backends/cupti/cupti_select.h), so the order
    here only ranks libraries of the same major.
    """
    dirs = []
    for root in _package_dirs("nvidia"):
        for sub in ("cu13/lib", "cuda_cupti/lib", "cu12/lib"):
            dirs.append(os.path.join(root, sub))
    for root in _package_dirs("triton"):
        dirs.append(os.path.join(root, "backends", "nvidia", "lib", "cupti"))
    return [d for d in dirs if os.path.isdir(d)]
