"""`@triton.jit` kernels with proton.language scopes, called inside torch.compile.

Inductor compiles a user's Triton kernel from a copy of its source, in a module of its own
whose only imports are Triton's and Inductor's (torch/_inductor/codegen/wrapper.py,
user_defined_triton_kernel_transitive_closure_source_code): a kernel that names `pl` fails to
compile there (NameError), session or not. Proton adds, after that copy, the imports that give
the kernel's proton names (and those of the @triton.jit functions it calls) what they are
bound to in the kernel's own module:

    import proton.language as pl
    from proton.language import scope as scope

The patch goes in when Inductor's wrapper module is first imported (or at once, if it is
already), from `import proton.language`; nothing of PyTorch's is imported for it.
Inductor compiles the copy with options of its own, which turn its `pl` calls into nothing; in
a session, its first launch has it compiled again with the session's (_triton_launcher.py).
Thread-safety: the patched function runs where Inductor's runs, under the GIL.
"""

import types

from . import _import_hooks

_WRAPPER_MODULE = "torch._inductor.codegen.wrapper"
_CLOSURE = "user_defined_triton_kernel_transitive_closure_source_code"
_PACKAGE = "proton"
_LANGUAGE = "proton.language"


def import_lines(kernel) -> list:
    """The import statements that bind the proton names `kernel` (a JITFunction) and the
    @triton.jit functions it calls use, as in their own modules."""
    language = __import__(_LANGUAGE, fromlist=["scope"])
    exported = {id(getattr(language, n)): n for n in dir(language) if not n.startswith("_")}
    lines, seen, visited = [], set(), set()

    def visit(jit_function) -> None:
        fn = getattr(jit_function, "fn", None)
        while fn is not None and not hasattr(fn, "__code__"):  # an autotuner's JITFunction
            fn = getattr(fn, "fn", None)
        if fn is None or id(fn) in visited:
            return
        visited.add(id(fn))
        for name in fn.__code__.co_names:
            if name in seen or name not in fn.__globals__:
                continue
            value = fn.__globals__[name]
            line = _import_of(name, value, exported)
            if line:
                seen.add(name)
                lines.append(line)
            elif hasattr(value, "fn") and hasattr(value, "src"):  # a @triton.jit it calls
                visit(value)

    visit(kernel)
    return lines


def _import_of(name: str, value, exported: dict) -> str:
    if isinstance(value, types.ModuleType):
        if value.__name__ == _LANGUAGE:
            return f"import {_LANGUAGE} as {name}"
        if value.__name__ == _PACKAGE:
            return f"import {_LANGUAGE}\nimport {_PACKAGE} as {name}"
        return ""
    attribute = exported.get(id(value))
    if attribute is not None and getattr(value, "__module__", "") == _LANGUAGE:
        return f"from {_LANGUAGE} import {attribute} as {name}"
    return ""


def _patch_wrapper(module) -> None:
    closure = getattr(module, _CLOSURE)
    if getattr(closure, "_proton_imports", False):
        return

    def closure_with_proton_imports(kernel, *args, **kwargs):
        source = closure(kernel, *args, **kwargs)
        try:
            lines = import_lines(kernel)
        except Exception:  # noqa: BLE001 - Inductor's source as it was; never its failure
            return source
        if not lines:
            return source
        return source.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"

    closure_with_proton_imports._proton_imports = True
    setattr(module, _CLOSURE, closure_with_proton_imports)


_hook = _import_hooks.AfterImport(_patch_wrapper)


def install() -> None:
    _hook.install(_WRAPPER_MODULE)
