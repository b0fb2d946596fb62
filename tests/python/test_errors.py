"""The exception hierarchy, option validation, modes, backends and command-line guards."""

import dataclasses

import proton
import pytest
from proton import _C
from proton.flags import flags

# ---------------------------------------------------------------- hierarchy


@pytest.mark.parametrize(
    "cls, extra",
    [
        (proton.ConfigError, ValueError),
        (proton.ScopeError, ValueError),
        (proton.MetricTypeError, TypeError),
        (proton.OutputError, OSError),
        (proton.SessionError, None),
        (proton.BackendUnavailableError, None),
    ],
)
def test_every_error_is_a_profiler_error_and_a_runtime_error(cls, extra):
    assert issubclass(cls, proton.ProfilerError)
    assert issubclass(cls, RuntimeError)
    if extra is not None:
        assert issubclass(cls, extra)
    assert issubclass(proton.ProfilerError, RuntimeError)


def test_errors_are_exported_from_proton_errors():
    from proton import errors

    for name in errors.__all__:
        assert getattr(errors, name) is getattr(proton, name)


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"context": "bogus"},
            "[PROTON] Unknown context source: 'bogus'. Allowed values: shadow, python, native, torch,"
            " or a comma-separated list of python, native, torch",
        ),
        ({"data": "bogus"}, "[PROTON] Unknown data: 'bogus'. Allowed values: tree, trace"),
        (
            {"backend": "bogus"},
            "[PROTON] Unknown backend: 'bogus'. Allowed values: cupti, roctracer, rocprofiler, instrumentation",
        ),
        (
            {"mode": "bogus"},
            "[PROTON] Unknown mode: 'bogus'. Allowed values: default, pcsampling, periodic_flushing, mma, instrumentation",
        ),
    ],
)
def test_unknown_option_values_raise_config_error_listing_allowed_values(kwargs, message):
    with pytest.raises(proton.ConfigError) as info:
        proton.start("opts", **kwargs)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == message
    assert _C.live_sessions() == []


def test_option_values_are_case_insensitive():
    s = proton.start("case", context="SHADOW", data="Tree")
    assert proton.data.get(s)[0]["proton_metadata"]["context"] == "shadow"


def test_malformed_mode_option_raises_config_error():
    with pytest.raises(
        proton.ConfigError, match="Malformed mode option 'interval': expected key=value"
    ):
        proton.start("m", mode="pcsampling:interval")


@pytest.mark.parametrize(
    "mode, message",
    [
        (
            "default:bufer_size=4096",
            "[PROTON] Unknown option 'bufer_size' in mode 'default:bufer_size=4096'. Allowed "
            "options: metric_type, sampling_strategy, sampling_options, granularity, "
            "buffer_strategy, buffer_type, buffer_size, optimizations, trace_layout",
        ),
        ("mma:buffer_size=lots", "[PROTON] buffer_size must be a number of bytes, got 'lots'"),
        # Past 2^24 bytes a unit's size no longer fits the device layout's 32-bit fields, and
        # ids past 31 name no warp: before, start() took them and every kernel then ran
        # uninstrumented, with a warning per kernel.
        (
            "default:buffer_size=4294967296",
            "[PROTON] buffer_size must be a number of bytes from 0 (the default) to 16777216, "
            "got 4294967296",
        ),
        (
            "default:sampling_strategy=selective:sampling_options=0;4294967296",
            "[PROTON] sampling_options must list warp (or unit) ids from 0 to 31 like '0,4', "
            "got '0,4294967296'",
        ),
        (
            "default:sampling_strategy=selective:sampling_options=-1",
            "[PROTON] sampling_options must list warp (or unit) ids from 0 to 31 like '0,4', "
            "got '-1'",
        ),
        (
            "default:sampling_strategy=selective:sampling_options=a",
            "[PROTON] sampling_options must list warp (or unit) ids from 0 to 31 like '0,4', "
            "got 'a'",
        ),
    ],
)
def test_bad_instrumentation_mode_strings_raise_config_error(mode, message):
    # Before: a TypeError from the mode's constructor, and a ValueError from int().
    with pytest.raises(proton.ConfigError) as info:
        proton.start("bad_mode", backend="instrumentation", mode=mode)
    assert str(info.value) == message
    assert _C.live_sessions() == []


@pytest.mark.parametrize(
    "variable, value, message",
    [
        (
            "PROTON_INSTRUMENTATION_RING_MB",
            "lots",
            "[PROTON] PROTON_INSTRUMENTATION_RING_MB='lots': expected a whole number from 1 to "
            "1048576 (default 256)",
        ),
        (
            "PROTON_INSTRUMENTATION_RING_MB",
            "0",
            "[PROTON] PROTON_INSTRUMENTATION_RING_MB='0': expected a whole number from 1 to "
            "1048576 (default 256)",
        ),
        (
            "PROTON_INSTRUMENTATION_TRACE_EVENTS",
            "1e6",
            "[PROTON] PROTON_INSTRUMENTATION_TRACE_EVENTS='1e6': expected a whole number from 1 "
            "to 1099511627776 (default 1048576)",
        ),
    ],
)
def test_bad_instrumentation_limits_raise_config_error_before_a_session(
    monkeypatch, variable, value, message
):
    # Checked before anything else (before: a ValueError from int() once the session had
    # started on the GPU, which then stayed live).
    monkeypatch.setenv(variable, value)
    with pytest.raises(proton.ConfigError) as info:
        proton.start("bad_limit", backend="instrumentation")
    assert str(info.value) == message
    assert _C.live_sessions() == []


def test_instrumentation_limits_read_their_variables(monkeypatch):
    from proton import instrumentation

    monkeypatch.delenv("PROTON_INSTRUMENTATION_RING_MB", raising=False)
    assert instrumentation.limit("PROTON_INSTRUMENTATION_RING_MB") == 256
    monkeypatch.setenv("PROTON_INSTRUMENTATION_RING_MB", " 64 ")
    assert instrumentation.limit("PROTON_INSTRUMENTATION_RING_MB") == 64


def test_mode_of_the_wrong_type_raises_type_error():
    with pytest.raises(TypeError, match="mode must be a str or a proton.mode object, got int"):
        proton.start("m", mode=5)


@pytest.mark.parametrize("mode", ["default", proton.mode.Default(), "", None])
def test_default_mode_starts_a_session(mode):
    s = proton.start("defmode", mode=mode)
    assert proton.data.get(s)[0]["proton_metadata"]["mode"] == ""


def test_backend_cupti_without_a_gpu_raises_backend_unavailable_with_the_reason():
    available, _, reason = _C.probe_gpu()
    if available:
        pytest.skip("this test needs a machine without an NVIDIA driver")
    with pytest.raises(proton.BackendUnavailableError) as info:
        proton.start("gpu", backend="cupti")
    message = str(info.value)
    assert message.startswith("[PROTON] backend='cupti' needs an NVIDIA GPU, but ")
    assert reason and reason in message
    assert "libcuda" in message
    assert "Leave backend and mode unset to record CPU scopes and metrics only." in message
    assert isinstance(info.value, RuntimeError)
    assert _C.live_sessions() == []


def test_mode_mma_outside_instrumentation_is_refused_naming_its_backend():
    # "mma" is triton.profiler's intra-kernel mode (its compiler runs the default passes for
    # it); with any other backend it means nothing, and is refused rather than ignored.
    with pytest.raises(proton.ConfigError) as info:
        proton.start("mma", mode=proton.mode.MMA())
    assert str(info.value) == (
        "[PROTON] mode='mma' is an intra-kernel instrumentation mode: use it with "
        "backend='instrumentation'."
    )
    assert _C.live_sessions() == []


def test_pcsampling_without_a_gpu_raises_backend_unavailable_not_a_cpu_profile():
    if _C.probe_gpu()[0]:
        pytest.skip("this test needs a machine without an NVIDIA driver")
    with pytest.raises(
        proton.BackendUnavailableError,
        match=r"^\[PROTON\] mode='pcsampling:interval=5' needs an NVIDIA GPU, but ",
    ):
        proton.start("pc", mode=proton.mode.PCSampling(interval=5))
    assert _C.live_sessions() == []


def test_unsupported_hook_raises_value_error():
    with pytest.raises(ValueError, match=r"^Unsupported hook: 'torch'$"):
        proton.start("hook", hook="torch")


# ---------------------------------------------------------------- mode objects


@pytest.mark.parametrize("interval", [0, -1, 1.5, "10"])
def test_pcsampling_interval_must_be_a_positive_integer(interval):
    with pytest.raises(ValueError, match="Interval must be a positive integer."):
        proton.mode.PCSampling(interval=interval)


def test_mode_string_forms():
    assert str(proton.mode.PCSampling(interval=5)) == "pcsampling:interval=5"
    assert str(proton.mode.PCSampling()) == "pcsampling:interval=1000"
    assert str(proton.mode.PeriodicFlushing()) == "periodic_flushing:format=hatchet"
    assert (
        str(proton.mode.PeriodicFlushing(format="chrome_trace"))
        == "periodic_flushing:format=chrome_trace"
    )
    assert str(proton.mode.Default()) == "default"
    assert str(proton.mode.MMA()) == "mma"
    assert proton.mode.to_string(None) == ""
    assert proton.mode.to_string("pcsampling") == "pcsampling"


def test_periodic_flushing_rejects_unknown_formats():
    with pytest.raises(
        ValueError,
        match="Unknown format: 'csv'. Allowed values: hatchet, hatchet_msgpack, chrome_trace",
    ):
        proton.mode.PeriodicFlushing(format="csv")


def test_mode_objects_are_immutable():
    m = proton.mode.PCSampling(interval=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.interval = 6


# ---------------------------------------------------------------- command-line guards


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: proton.activate(),
            "Only one session can be activated when running from the command line.",
        ),
        (
            lambda: proton.activate(1),
            "Only one session can be activated when running from the command line.",
        ),
        (
            lambda: proton.deactivate(),
            "Only one session can be deactivated when running from the command line.",
        ),
        (
            lambda: proton.deactivate(1),
            "Only one session can be deactivated when running from the command line.",
        ),
        (
            lambda: proton.finalize(1),
            "Only one session can be finalized when running from the command line.",
        ),
        (
            lambda: proton.data.get(1),
            "Only one session can be retrieved when running from the command line.",
        ),
        (
            lambda: proton.data.get_msgpack(1),
            "Only one session can be retrieved when running from the command line.",
        ),
        (
            lambda: proton.data.clear(1),
            "Only one session can be cleared when running from the command line.",
        ),
    ],
)
def test_command_line_guards(call, message):
    flags.command_line = True
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: proton.data.advance_phase(1),
            "Only one session can advance phase when running from the command line.",
        ),
        (
            lambda: proton.data.is_phase_complete(1),
            "Only one session can check phase completion status when running from the command line.",
        ),
    ],
)
def test_command_line_guards_for_phases(call, message):
    flags.command_line = True
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_command_line_guard_lets_session_zero_and_finalize_all_through(tmp_path):
    flags.command_line = True
    assert proton.start("cli") is None
    proton.finalize()  # finalize-all has no guard
    # Session 0 passes the guard and reaches the core (which no longer knows it here).
    for call in (
        lambda: proton.activate(0),
        lambda: proton.deactivate(0),
        lambda: proton.data.get(0),
        lambda: proton.data.advance_phase(0),
    ):
        with pytest.raises(proton.SessionError):
            call()


def test_trace_layout_is_a_mode_option_with_two_values():
    assert proton.mode.Default().trace_layout == "full"
    assert str(proton.mode.Default(trace_layout="triton")).endswith(":trace_layout=triton")
    with pytest.raises(proton.ConfigError, match="Unknown trace_layout: 'perfetto'"):
        proton.mode.Default(trace_layout="perfetto")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"buffer_strategy": "flush"}, "buffer_strategy='flush' (copying a full buffer out"),
        ({"optimizations": "sched_stores"}, "optimization 'sched_stores' (triton.profiler's store"),
        ({"optimizations": "time_shift,sched_barriers"}, "optimization 'sched_barriers'"),
    ],
)
def test_triton_options_proton_does_not_implement_are_refused_not_ignored(fields, message):
    with pytest.raises(proton.ConfigError) as info:
        proton.mode.Default(**fields)
    assert str(info.value).startswith("[PROTON] " + message)
    assert proton.mode.Default(buffer_strategy="circular").buffer_strategy == "circular"
