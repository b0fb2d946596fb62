"""In-memory access to a session's data, phase by phase."""

import json
from typing import Optional

from . import _C
from .profile import _guard


def get(session: Optional[int] = 0, phase: int = 0):
    """The phase as Python objects: `[root, devices, metadata]` for tree data (the Hatchet
    layout), the Chrome trace dict for trace data."""
    if session is None:
        return None
    _guard(session, "be retrieved")
    return json.loads(_C.get_json(session, phase))


def get_msgpack(session: Optional[int] = 0, phase: int = 0) -> Optional[bytes]:
    """The phase as Hatchet MessagePack bytes (tree data)."""
    if session is None:
        return None
    _guard(session, "be retrieved")
    return _C.get_msgpack(session, phase)


def advance_phase(session: Optional[int] = 0) -> Optional[int]:
    """Start a new phase; returns its number. Later records go to it."""
    if session is None:
        return None
    _guard(session, "advance phase")
    return _C.advance_phase(session)


def is_phase_complete(session: Optional[int] = 0, phase: int = 0) -> bool:
    """True when the phase is over and every record of it has arrived."""
    if session is None:
        return False
    _guard(session, "check phase completion status")
    return _C.is_phase_complete(session, phase)


def clear(session: Optional[int] = 0, phase: int = 0, clear_up_to_phase: bool = False) -> None:
    """Drop a phase's data (or every phase up to it)."""
    if session is None:
        return
    _guard(session, "be cleared")
    _C.clear(session, phase, clear_up_to_phase)
