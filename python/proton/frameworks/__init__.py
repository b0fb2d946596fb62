"""Framework adapters: what Proton knows about a framework (PyTorch today), behind one small
interface (FrameworkAdapter in base.py), so that another framework is one more adapter.

An adapter gives:
- the context source named after it (context="torch"): module frames, operator frames and
  backward-node frames pushed on the launching thread's context while a session lists it;
- backward attribution for every session: the threads its engine runs backward passes on,
  and the entry points that start a pass, so their kernels file under the caller's context.

    frameworks.session_started("python,torch")   # profile.start calls these
    frameworks.session_ended()
"""

from typing import Dict, Iterable

from .base import FrameworkAdapter
from .pytorch import TorchAdapter

ADAPTERS: Dict[str, FrameworkAdapter] = {"torch": TorchAdapter()}

_frames_on: Dict[str, int] = {}  # adapter name -> live sessions whose context lists it


def _listed(context: str) -> Iterable[FrameworkAdapter]:
    for item in (context or "").split(","):
        adapter = ADAPTERS.get(item.strip().lower())
        if adapter is not None:
            yield adapter


def install() -> None:
    """What every adapter watches from `import proton` on."""
    for adapter in ADAPTERS.values():
        adapter.install()


def check_context(context: str) -> None:
    """Raises ConfigError when the context lists a framework that cannot run here."""
    for adapter in _listed(context):
        adapter.check()


def session_started(context: str) -> None:
    """Backward attribution for every adapter whose framework is (or gets) imported; frames
    for those the context lists."""
    for adapter in ADAPTERS.values():
        adapter.install_backward()
    for adapter in _listed(context):
        if _frames_on.get(adapter.name, 0) == 0:
            adapter.start_frames()
        _frames_on[adapter.name] = _frames_on.get(adapter.name, 0) + 1


def session_ended(context: str) -> None:
    for adapter in _listed(context):
        left = _frames_on.get(adapter.name, 0) - 1
        _frames_on[adapter.name] = max(left, 0)
        if left == 0:
            adapter.stop_frames()


__all__ = [
    "ADAPTERS",
    "FrameworkAdapter",
    "install",
    "check_context",
    "session_started",
    "session_ended",
]
