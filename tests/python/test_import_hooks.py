"""proton._import_hooks.AfterImport: a module of another package patched right after its first
import, or at once if it is loaded, and nothing else touched."""

import importlib.abc
import importlib.util
import sys

import pytest
from proton._import_hooks import AfterImport


class SharedLoader(importlib.abc.Loader):
    """One loader object for several modules, as some import systems have."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == "hooked_b":
            import hooked_a  # noqa: F401 - a module that imports another of the same loader
        module.LOADED = module.__name__


class Finder(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names, self.loader = names, SharedLoader()

    def find_spec(self, name, path, target=None):
        if name in self.names:
            return importlib.util.spec_from_loader(name, self.loader)
        return None


@pytest.fixture
def finder():
    names = ("hooked_a", "hooked_b")
    f = Finder(names)
    sys.meta_path.append(f)
    yield f
    sys.meta_path.remove(f)
    for name in names:
        sys.modules.pop(name, None)


def test_only_the_named_module_is_patched_when_its_loader_serves_others(finder):
    patched = []
    hook = AfterImport(lambda m: patched.append(m.__name__))
    hook.install("hooked_b")
    import hooked_b  # which imports hooked_a, through the same loader object, as it loads

    assert sys.modules["hooked_a"].LOADED == "hooked_a" and hooked_b.LOADED == "hooked_b"
    assert patched == ["hooked_b"] and not hook.waiting


def test_a_loaded_module_is_patched_at_once_and_a_failing_patch_changes_nothing(finder):
    import hooked_a

    def fail(module):
        raise AttributeError("another version of the package")

    hook = AfterImport(fail)
    hook.install("hooked_a")
    assert not hook.waiting and hooked_a.LOADED == "hooked_a"


def test_a_removed_hook_patches_nothing(finder):
    patched = []
    hook = AfterImport(lambda m: patched.append(m.__name__))
    hook.install("hooked_b")
    hook.remove()
    import hooked_b

    assert hooked_b.LOADED == "hooked_b" and patched == [] and hook not in sys.meta_path
