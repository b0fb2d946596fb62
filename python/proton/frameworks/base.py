"""The interface one framework adapter implements (see docs/design-frameworks.md)."""

from typing import Tuple


class FrameworkAdapter:
    """What Proton needs from a framework. Every method is cheap and safe to call when the
    framework is not installed: an adapter imports its framework lazily and does nothing
    without it.

    - name: the context source that turns its frames on (context="torch").
    - backward_worker_prefixes: OS thread names of the threads its engine runs backward
      passes on; their kernels are filed under the context of the thread that asked for the
      pass (context/backward_borrow.h).
    - install(): at `import proton`, sets up what must watch the framework from the start,
      session or not (records its compiler keeps only while it compiles); imports nothing of
      the framework's and costs nothing until the framework runs; idempotent.
    - check(): raises ConfigError when a session cannot record its frames here (framework
      missing), before the session exists.
    - install_backward(): wraps the entry points that start a backward pass (now, or when the
      framework is imported) so that they publish the caller's context
      (_C.enter_backward / _C.exit_backward); idempotent.
    - start_frames() / stop_frames(): turn its frame sources on and off (module hooks,
      operator observer, compiled-kernel frames) while a session's context lists it.
    """

    name: str = ""
    backward_worker_prefixes: Tuple[str, ...] = ()

    def install(self) -> None:
        pass

    def check(self) -> None:
        pass

    def install_backward(self) -> None:
        pass

    def start_frames(self) -> None:
        pass

    def stop_frames(self) -> None:
        pass
