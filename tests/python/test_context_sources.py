"""The `context` option's comma-separated list: what it accepts and how it refuses."""

import proton
import pytest
from proton import _C


@pytest.mark.parametrize(
    "context, message",
    [
        (
            "shadow,python",
            "[PROTON] context 'shadow,python' is not supported: 'shadow' (the annotated scopes "
            "alone) cannot be combined; scopes are part of every context, so leave it out",
        ),
        ("python,python", "[PROTON] context 'python,python' names 'python' twice"),
        (
            "python,",
            "[PROTON] context 'python,' has an empty entry; expected a comma-separated list "
            "such as 'python,torch'",
        ),
        (
            "python,jax",
            "[PROTON] Unknown context source: 'jax'. Allowed values: shadow, python, native, "
            "torch, or a comma-separated list of python, native, torch",
        ),
    ],
)
def test_bad_context_lists_raise_config_error_naming_them(context, message):
    with pytest.raises(proton.ConfigError) as info:
        proton.start("ctx", context=context)
    assert str(info.value) == message
    assert _C.live_sessions() == []


def test_python_native_is_spelled_canonically_in_the_profile():
    s = proton.start("pn", context=" Native , PYTHON ")
    assert proton.data.get(s)[0]["proton_metadata"]["context"] == "python,native"
    proton.finalize(s)


@pytest.mark.parametrize("first, second", [("python", "native"), ("python,native", "python")])
def test_sessions_whose_stacks_differ_cannot_run_together(first, second):
    s = proton.start("a", context=first)
    with pytest.raises(proton.ConfigError, match="cannot run"):
        proton.start("b", context=second)
    proton.finalize(s)
