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


def _path_to(node, name, above=()):
    for c in node["children"]:
        if c["frame"]["name"] == name:
            return list(above)
        found = _path_to(c, name, (*above, c["frame"]["name"]))
        if found is not None:
            return found
    return None


def test_python_native_unwinds_only_below_the_interpreter_however_deep_the_python_stack():
    # 60 levels of calls through __call__ (C slots between the interpreter's frames, as
    # nn.Module calls are) are some 200 native frames: unwound whole, the stack hit the
    # 128-frame cap (native_stacks_truncated). The unwind ends at the interpreter instead.
    class Layer:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self):
            return self.inner()

    def entered_here():
        with proton.scope("deep"):
            pass

    call = entered_here
    for _ in range(60):
        call = Layer(call)
    s = proton.start("deep", context="python,native")
    call()
    root = proton.data.get(s)[0]
    above = _path_to(root, "deep")
    assert dict(root["proton_metadata"]["stats"])["native_stacks_truncated"] == 0
    assert (
        above[-1].endswith("@entered_here")
        and sum(f.startswith(__file__) and f.endswith("@__call__") for f in above) == 60
    )
    assert all("+0x" not in f for f in above), above
    proton.finalize(s)


def test_python_native_files_scopes_under_python_frames_not_the_interpreters_c_frames():
    s = proton.start("pn", context="python,native")

    def entered_here():
        with proton.scope("inner"):
            pass

    entered_here()
    above = _path_to(proton.data.get(s)[0], "inner")
    # The Python frames; the interpreter's own C frames between them are gone, and the C/C++
    # frames below the last one (Proton's binding) are Proton's own, left out.
    assert above[-1].endswith("@entered_here"), above
    assert all("@" in f and "+0x" not in f for f in above), above
    proton.finalize(s)
