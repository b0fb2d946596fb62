"""A @triton.jit kernel with proton.language scopes, compiled the way torch.compile compiles a
user's kernel (no GPU, no PyTorch): from a copy of its source in a module that imports only
Triton. Without Proton's imports after the copy the kernel does not compile (NameError: pl);
with them it compiles to the plain binary outside a session and records its scopes in one."""

import importlib.util
import sys

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import proton.language as pl  # noqa: E402
from proton import _inductor_source, instrumentation  # noqa: E402
from proton import mode as _mode  # noqa: E402
from proton.language import scope as sc  # noqa: E402

# Inductor's closure function, as torch/_inductor/codegen/wrapper.py writes it for a kernel:
# its source, then each @triton.jit function it calls, decorated.
FAKE_WRAPPER = """
def user_defined_triton_kernel_transitive_closure_source_code(kernel):
    parts, seen = [kernel.src], {kernel.__name__}

    def traverse(jit):
        for name in jit.fn.__code__.co_names:
            value = jit.fn.__globals__.get(name)
            if name not in seen and hasattr(value, "src") and hasattr(value, "fn"):
                seen.add(name)
                parts.append("@triton.jit\\n" + value.src)
                traverse(value)

    traverse(kernel)
    return "\\n".join(parts)
"""


@triton.jit
def doubled(x):
    with sc("double"):
        y = x * 2.0
    return y


@triton.jit
def user_kernel(x, out, N: tl.constexpr):
    offs = tl.arange(0, N)
    with pl.scope("load"):
        v = tl.load(x + offs)
    tl.store(out + offs, doubled(v))


@pytest.fixture
def wrapper(tmp_path, monkeypatch):
    """'Inductor's wrapper module', imported after proton.language as torch.compile does."""
    pkg = tmp_path / "fakeinductor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "wrapper.py").write_text(FAKE_WRAPPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    _inductor_source._hook.install("fakeinductor.wrapper")
    try:
        yield tmp_path
    finally:
        sys.modules.pop("fakeinductor.wrapper", None)
        _inductor_source.install()  # back to waiting for PyTorch's


def inductor_module(folder, source, name):
    """The module Inductor writes for the kernel, and loads."""
    path = folder / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n" + source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_for_hopper(kernel, config=""):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(
        kernel, signature={"x": "*fp32", "out": "*fp32", "N": "constexpr"}, constexprs={"N": 256}
    )
    options = {"num_warps": 4, **({"instrumentation_mode": config} if config else {})}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def test_the_copy_gets_the_imports_of_the_kernel_s_proton_names(wrapper):
    import fakeinductor.wrapper as w

    source = w.user_defined_triton_kernel_transitive_closure_source_code(user_kernel)
    assert source.endswith(
        "\n\nimport proton.language as pl\nfrom proton.language import scope as sc\n"
    )
    assert _inductor_source.import_lines(doubled) == ["from proton.language import scope as sc"]
    tuned = triton.autotune(configs=[triton.Config({})], key=[])(user_kernel)
    assert _inductor_source.import_lines(tuned) == _inductor_source.import_lines(user_kernel)


def test_without_the_imports_the_copy_does_not_compile(wrapper):
    import fakeinductor.wrapper as w

    original = w.user_defined_triton_kernel_transitive_closure_source_code.__closure__[0]
    source = original.cell_contents(user_kernel)  # Inductor's function, unpatched
    module = inductor_module(wrapper, source, "copy_without_imports")
    with pytest.raises(Exception, match="pl is not defined"):
        compile_for_hopper(module.user_kernel)


def test_the_copy_compiles_to_the_plain_binary_outside_a_session(wrapper):
    import fakeinductor.wrapper as w

    source = w.user_defined_triton_kernel_transitive_closure_source_code(user_kernel)
    module = inductor_module(wrapper, source, "copy_outside")
    assert module.pl is pl and module.sc is sc
    copy, own = compile_for_hopper(module.user_kernel), compile_for_hopper(user_kernel)
    assert "// @proton:" not in copy.asm["ptx"]
    assert code_of(copy.asm["ptx"]) == code_of(own.asm["ptx"])


def code_of(ptx: str) -> list:
    """The PTX's instructions and declarations, without source locations and debug sections."""
    kept = (line.strip() for line in ptx.split(".section")[0].splitlines())
    return [line for line in kept if line and not line.startswith((".loc", ".file", "//"))]


def test_the_copy_records_its_scopes_when_compiled_for_a_session(wrapper):
    import fakeinductor.wrapper as w

    source = w.user_defined_triton_kernel_transitive_closure_source_code(user_kernel)
    module = inductor_module(wrapper, source, "copy_in_session")
    mode = _mode.Default(granularity="warp")
    instrumentation.prepare(mode, "tree")
    instrumentation.activate(4242, mode, "tree")
    try:
        config = instrumentation.config_string(mode, "tree")
        compiled = compile_for_hopper(module.user_kernel, config)
    finally:
        instrumentation.deactivate(4242)
    ptx = compiled.asm["ptx"]
    assert ptx.count("// @proton:E:") == 2 and ptx.count("// @proton:X:") == 2
    table = compiled.metadata.proton_instrumentation.split("\t")
    assert bytes.fromhex(table[1]).decode() == "user_kernel"
    assert [bytes.fromhex(p).decode() for p in table[16 + int(table[15]) :]] == [
        "",
        "load",
        "double",
    ]


def test_a_wrapper_module_loaded_before_proton_language_is_patched_at_once(wrapper):
    import fakeinductor.wrapper as w

    sys.modules.pop("fakeinductor.wrapper")
    _inductor_source._hook.remove()
    import fakeinductor.wrapper as loaded_first  # noqa: F811 - a fresh import, not patched

    assert loaded_first is not w and not _inductor_source._hook.waiting
    unpatched = loaded_first.user_defined_triton_kernel_transitive_closure_source_code
    assert "import proton" not in unpatched(user_kernel)
    _inductor_source._hook.install("fakeinductor.wrapper")
    patched = loaded_first.user_defined_triton_kernel_transitive_closure_source_code
    assert patched is not unpatched and "import proton.language as pl" in patched(user_kernel)
    _inductor_source._hook.install("fakeinductor.wrapper")  # twice: wrapped once
    assert loaded_first.user_defined_triton_kernel_transitive_closure_source_code is patched


def test_a_wrapper_module_without_the_function_loads_as_it_is(tmp_path, monkeypatch):
    (tmp_path / "otherinductor.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _inductor_source._hook.install("otherinductor")
    try:
        import otherinductor

        assert otherinductor.VALUE == 1 and not _inductor_source._hook.waiting
    finally:
        sys.modules.pop("otherinductor", None)
        _inductor_source.install()
