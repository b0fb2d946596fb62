"""Patching a module of another package as it is imported, without importing it ourselves
(PyTorch's Inductor takes seconds to import, and most programs never load it).

    hook = AfterImport(lambda module: ...)
    hook.install("torch._inductor.codegen.wrapper")  # patched now if loaded, else on import
    hook.remove()

Thread-safety: install and remove run under the GIL; the patch runs on the importing thread,
under Python's import lock for that module.
"""

import importlib.abc
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls patch(module) on the module `name` once it is loaded: at install() if it already
    is, else right after its first import. It then leaves the import path, as it does on
    remove(); a patch that raises leaves the module as it was loaded."""

    def __init__(self, patch):
        self.patch = patch
        self.name = None

    @property
    def waiting(self) -> bool:
        return self in sys.meta_path

    def install(self, name: str) -> None:
        self.name = name
        module = sys.modules.get(name)
        if module is not None:
            self.remove()
            self._apply(module)
        elif not self.waiting:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self.waiting:
            sys.meta_path.remove(self)

    def _apply(self, module) -> None:
        try:
            self.patch(module)
        except Exception:  # noqa: BLE001 - another version of the package: it runs as it is
            pass

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        spec = self._spec_from_others(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def load_and_patch(module):
            load(module)
            # Not removed meanwhile (a session that ended, say), and this module: a loader
            # object may serve several.
            if self.waiting and getattr(module, "__name__", None) == self.name:
                self.remove()
                self._apply(module)

        spec.loader.exec_module = load_and_patch
        return spec

    def _spec_from_others(self, name, path, target):
        """The spec the import path would give without this finder (an editable install's
        finder, say, or the file system's)."""
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                return spec
        return None
