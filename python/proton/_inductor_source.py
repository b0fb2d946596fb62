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
A copy compiled in one of Inductor's worker processes comes back without its Python function
(Inductor drops it for pickling): the names of the kernels given imports are kept here, and
such a kernel's function is loaded again through the CachingAutotuner that holds it, as
Inductor itself does when it must compile in the parent process (live_function).
Thread-safety: the patched function runs where Inductor's runs, under the GIL.
"""

import gc
import sys
import types

from . import _import_hooks

_WRAPPER_MODULE = "torch._inductor.codegen.wrapper"
_CLOSURE = "user_defined_triton_kernel_transitive_closure_source_code"
_PACKAGE = "proton"
_LANGUAGE = "proton.language"
_HEURISTICS = "torch._inductor.runtime.triton_heuristics"

# Names of the user kernels whose copies got proton imports (a name, not the kernel object:
# what a worker process's copy still has).
scoped_kernel_names = set()


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
        scoped_kernel_names.add(getattr(kernel, "__name__", ""))
        return source.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"

    closure_with_proton_imports._proton_imports = True
    setattr(module, _CLOSURE, closure_with_proton_imports)


def live_function(compiled):
    """The JITFunction of `compiled` (a CompiledKernel) with its Python function, when Inductor
    compiled it in a worker process, which drops the function for pickling: loaded again from
    the kernel's module through the CachingAutotuner that holds `compiled` (one look over the
    live objects). None when it cannot be, or when its name is not one of a kernel that got
    proton imports (then it uses no proton scopes)."""
    fn = compiled.src.fn
    heuristics = sys.modules.get(_HEURISTICS)
    if heuristics is None or getattr(fn, "__name__", None) not in scoped_kernel_names:
        return None
    autotuner_cls = getattr(heuristics, "CachingAutotuner", None)
    for obj in gc.get_objects() if autotuner_cls is not None else ():
        # type(), not isinstance(): a weak proxy's __class__ raises once its object died.
        if not issubclass(type(obj), autotuner_cls):
            continue
        if any(getattr(r, "kernel", None) is compiled for r in obj.compile_results):
            reload = getattr(obj, "_reload_kernel", None)
            return reload().fn if callable(reload) else None
    return None


_hook = _import_hooks.AfterImport(_patch_wrapper)


def install() -> None:
    _hook.install(_WRAPPER_MODULE)
