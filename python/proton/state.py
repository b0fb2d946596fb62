"""States: a non-nesting tag appended as the innermost frame of what is recorded while set."""

import functools

from . import _C

COMPUTE_METADATA_SCOPE_NAME = "__proton_launch_metadata"


class state:
    """Context manager and decorator setting the thread's state tag."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise _C.ConfigError(f"[PROTON] state name must be a str, got {type(name).__name__}")
        self.name = name

    def __enter__(self):
        _C.enter_state(self.name)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _C.exit_state()

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with state(self.name):
                return func(*args, **kwargs)

        return wrapper


class metadata_state(state):
    """The state under which launch metadata functions run: kernels launched there are
    filed under `__proton_launch_metadata`, never under the user's kernel."""

    def __init__(self) -> None:
        super().__init__(COMPUTE_METADATA_SCOPE_NAME)


def enter_state(name: str) -> None:
    _C.enter_state(name)


def exit_state() -> None:
    _C.exit_state()
