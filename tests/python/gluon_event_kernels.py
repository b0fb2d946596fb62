"""Triton's test_gluon_warp_specialized_event kernel, shared by the compile test (CPU) and the
GPU test: the producer partition (4 warps) starts the event, the consumer (the default
partition, 4 warps) ends it."""

import pytest
from proton import language as pl


def warp_specialized_event_kernel():
    """The @gluon.jit kernel (no arguments; launch it on one CTA of 4 warps); skips the test
    where this Triton has no Gluon or no Hopper mbarrier."""
    gluon = pytest.importorskip("triton.experimental.gluon")
    gl = pytest.importorskip("triton.experimental.gluon.language")
    hopper = pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    mbarrier = hopper.mbarrier

    @gluon.jit
    def consumer(barrier, event):
        mbarrier.wait(barrier, phase=0)
        pl.end_event(event)

    @gluon.jit
    def producer(barrier, event):
        pl.start_event(event)
        mbarrier.arrive(barrier, count=1)

    @gluon.jit
    def ws_event_kernel():
        barrier = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(barrier, count=1)
        event = pl.allocate_event("warp_specialized")
        gl.warp_specialize([(consumer, (barrier, event)), (producer, (barrier, event))], [4], [24])

    return ws_event_kernel
