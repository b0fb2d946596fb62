"""Makes `triton.profiler` mean Proton, so that Triton's own profiler tests run against it.

    import triton.profiler as proton      # the `proton` module object itself
    import triton.profiler.viewer         # proton.viewer, the same object
    import triton.language                # still Triton's

install() puts a finder first on sys.meta_path. For `triton.profiler` and every submodule
`triton.profiler.X.Y` it imports `proton` / `proton.X.Y` under its own name and hands that very
module object to the importer, so sys.modules holds one module under both names (no second copy
with its own state). The rest of `triton` is imported by the usual finders. A submodule Proton
lacks fails with Python's usual ModuleNotFoundError naming `triton.profiler.X`; Triton's own
`triton/profiler` directory is never searched, since the parent module is Proton.

`python -m triton.profiler.X` works too: runpy asks the finder's loader for the code of
`proton.X`. Once `triton.profiler` is loaded, every loaded proton module is registered under its
triton.profiler name too (see _sync_aliases: otherwise `import triton.profiler.state` would
replace the class `proton.state` by the module of that name).

Loaded by sitecustomize.py (next to this file, on PYTHONPATH) in every interpreter the tests
start; PROTON_TRITON_REDIRECT=0 turns it off there.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

ALIAS = "triton.profiler"
TARGET = "proton"


def alias_name(name):
    """`triton.profiler.X.Y` for `proton.X.Y`; None for a name outside proton."""
    if name == TARGET:
        return ALIAS
    if name.startswith(TARGET + "."):
        return ALIAS + name[len(TARGET) :]
    return None


def _sync_aliases(skip=None):
    """Registers every loaded proton module under its triton.profiler name as well.

    Importing a submodule for the first time sets it as an attribute of its parent, and the
    parent of `triton.profiler.state` is the proton module: a first import of that name would
    replace `proton.state` (a class) by the module `proton.state`. Proton's __init__ loads such
    submodules itself, so registering them as soon as `triton.profiler` is loaded makes a later
    `import triton.profiler.state` a plain sys.modules hit that touches no attribute."""
    for name, module in list(sys.modules.items()):
        alias = alias_name(name)
        if alias is not None and alias != skip and module is not None:
            sys.modules.setdefault(alias, module)


def target_name(fullname):
    """`proton.X.Y` for `triton.profiler.X.Y`; None for a name outside triton.profiler."""
    if fullname == ALIAS:
        return TARGET
    if fullname.startswith(ALIAS + "."):
        return TARGET + fullname[len(ALIAS) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads `triton.profiler.X` as the module `proton.X` (imported under its own name)."""

    def __init__(self, target, target_spec):
        self.target = target
        self.target_spec = target_spec
        self._saved = {}

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        # The import system then stamps the alias spec on the module; put Proton's back in
        # exec_module so that reload(), pickling and `python -m` keep working on `proton.X`.
        self._saved[id(module)] = {
            key: module.__dict__[key]
            for key in ("__spec__", "__loader__", "__package__", "__path__", "__file__")
            if key in module.__dict__
        }
        return module

    def exec_module(self, module):
        saved = self._saved.pop(id(module), None)
        if saved is not None:
            module.__dict__.update(saved)
        _sync_aliases()

    # runpy (`python -m triton.profiler.X`) and tools such as inspect ask the loader directly.
    def _target_loader(self):
        return self.target_spec.loader

    def get_code(self, fullname):
        return self._target_loader().get_code(self.target)

    def get_source(self, fullname):
        return self._target_loader().get_source(self.target)

    def get_filename(self, fullname):
        return self._target_loader().get_filename(self.target)

    def is_package(self, fullname):
        return self.target_spec.submodule_search_locations is not None


class RedirectFinder(importlib.abc.MetaPathFinder):
    """sys.meta_path entry that answers for `triton.profiler` and its submodules only."""

    def find_spec(self, fullname, path=None, target=None):
        name = target_name(fullname)
        if name is None:
            return None
        # Not `fullname` itself: a module that appears in sys.modules during find_spec is
        # taken by the import system for a parent's side effect and reloaded from its spec.
        _sync_aliases(skip=fullname)
        try:
            target_spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            target_spec = None
        if target_spec is None:
            if fullname == ALIAS:
                # Returning None would let the file system finder load Triton's own profiler.
                raise ModuleNotFoundError(
                    f"No module named {ALIAS!r}: it is redirected to {TARGET!r}, which is not "
                    "importable",
                    name=fullname,
                )
            # The parent is Proton, so the usual finders search Proton's directory only and
            # report `No module named 'triton.profiler.X'`.
            return None
        spec = importlib.machinery.ModuleSpec(
            fullname,
            _AliasLoader(name, target_spec),
            origin=target_spec.origin,
            is_package=target_spec.submodule_search_locations is not None,
        )
        if target_spec.submodule_search_locations is not None:
            spec.submodule_search_locations = list(target_spec.submodule_search_locations)
        spec.has_location = target_spec.has_location
        return spec


_FINDER = RedirectFinder()


def foreign_modules():
    """Names under triton.profiler in sys.modules that are not Proton's modules (Triton's own
    profiler, imported before install())."""
    found = []
    for fullname, module in list(sys.modules.items()):
        name = target_name(fullname)
        if name is None or module is None:
            continue
        if sys.modules.get(name) is not module:
            found.append(fullname)
    return sorted(found)


def install():
    """Puts the finder first on sys.meta_path (again, if something was inserted before it) and
    drops any Triton profiler module already imported, so the next import gets Proton."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    sys.meta_path.insert(0, _FINDER)
    for fullname in foreign_modules():
        del sys.modules[fullname]
    if TARGET in sys.modules and ALIAS in sys.modules:
        _sync_aliases()
    triton = sys.modules.get("triton")
    if triton is not None and "profiler" in vars(triton):
        current = vars(triton)["profiler"]
        if current is not sys.modules.get(TARGET):
            delattr(triton, "profiler")


def uninstall():
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def installed():
    return _FINDER in sys.meta_path
