"""scripts/triton_compat: `import triton.profiler` gives Proton (the same module objects) while the
rest of `triton` stays Triton's. Each case runs in a fresh interpreter with a fake `triton`
package first on the path, whose own `triton/profiler` fails loudly if it is ever imported, and
with scripts/triton_compat on PYTHONPATH (its sitecustomize.py installs the redirect)."""

import os
import textwrap
from pathlib import Path

import pytest
from proton_test_utils import PYTHON_DIR, run_interpreter, run_python

COMPAT_DIR = Path(__file__).resolve().parents[2] / "scripts" / "triton_compat"

FAKE_TRITON = {
    "__init__.py": '__version__ = "0.fake"\n',
    "language.py": "FAKE = True\n",
    "profiler/__init__.py": textwrap.dedent(
        """\
        import os
        if os.environ.get("FAKE_PROFILER_OK") != "1":
            raise AssertionError("Triton's own triton.profiler was imported")
        REAL_TRITON_PROFILER = True
        """
    ),
    "profiler/viewer.py": 'raise AssertionError("Triton\'s own triton.profiler.viewer")\n',
}


@pytest.fixture
def fake_triton(tmp_path):
    root = tmp_path / "fake_site"
    for name, text in FAKE_TRITON.items():
        path = root / "triton" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(code, cwd, fake_triton, env=None, argv=None):
    if argv is None:
        argv = ["-c", textwrap.dedent(code)]
    # The fake Triton first: where Proton is installed (site-packages, as in CI), a real Triton
    # sits beside it and would be found before a fake placed after it.
    path = os.pathsep.join([str(fake_triton), str(COMPAT_DIR), PYTHON_DIR])
    env = {**(env or {}), "PYTHONPATH": path}
    return run_interpreter(argv, cwd, env=env, drop=("PROTON_TRITON_REDIRECT",))


def check(code, cwd, fake_triton, env=None):
    result = run(code, cwd, fake_triton, env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_triton_profiler_is_proton(tmp_path, fake_triton):
    out = check(
        """
        import sys
        import triton.profiler
        import triton.profiler.hooks.launch
        import proton
        import proton.hooks.launch
        assert triton.profiler is proton
        assert triton.profiler.scope is proton.scope
        assert triton.profiler.start is proton.start
        assert triton.profiler.hooks.launch is proton.hooks.launch
        assert sys.modules["triton.profiler.hooks.launch"] is sys.modules["proton.hooks.launch"]
        # Proton keeps its own identity: its spec, package and file are untouched.
        assert proton.__spec__.name == "proton" and proton.__package__ == "proton"
        assert proton.hooks.launch.__spec__.name == "proton.hooks.launch"
        # The rest of triton is the (fake) installed Triton.
        import triton.language
        assert triton.__version__ == "0.fake" and triton.language.FAKE
        assert triton.profiler is proton  # the attribute on the triton package, too
        print("ok")
        """,
        tmp_path,
        fake_triton,
    )
    assert out.strip() == "ok"


def test_viewer_is_proton_viewer(tmp_path, fake_triton):
    probe = run_python("import proton.viewer", tmp_path)
    if probe.returncode != 0:
        pytest.skip("proton.viewer does not import in this build: " + probe.stderr[-300:])
    check(
        """
        import triton.profiler.viewer as viewer
        from triton.profiler.viewer import parse
        import proton.viewer
        assert viewer is proton.viewer and parse is proton.viewer.parse
        """,
        tmp_path,
        fake_triton,
    )


def test_submodule_import_keeps_proton_attributes(tmp_path, fake_triton):
    # proton.state / proton.scope / proton.profile are a class, a type and a function named
    # like submodules; importing the submodules through triton.profiler must not replace them.
    check(
        """
        import types
        import proton
        before = (proton.state, proton.scope, proton.profile)
        from triton.profiler.state import COMPUTE_METADATA_SCOPE_NAME
        import triton.profiler.scope
        import triton.profiler.profile
        assert (proton.state, proton.scope, proton.profile) == before
        assert not isinstance(proton.state, types.ModuleType)
        """,
        tmp_path,
        fake_triton,
    )


def test_missing_name_is_an_import_error_naming_it(tmp_path, fake_triton):
    check(
        """
        import importlib.util
        try:
            import triton.profiler.no_such_module
        except ModuleNotFoundError as error:
            assert "triton.profiler.no_such_module" in str(error), error
        else:
            raise AssertionError("imported")
        try:
            from triton.profiler import no_such_name
        except ImportError as error:
            assert "no_such_name" in str(error), error
        else:
            raise AssertionError("imported")
        assert importlib.util.find_spec("triton.profiler.no_such_module") is None
        """,
        tmp_path,
        fake_triton,
    )


def test_redirect_wins_over_an_earlier_triton_profiler(tmp_path, fake_triton):
    # Installed by hand after Triton's own profiler was imported: the next import is Proton's.
    check(
        f"""
        import importlib.util, sys
        import triton.profiler
        assert triton.profiler.REAL_TRITON_PROFILER
        spec = importlib.util.spec_from_file_location("r", {str(COMPAT_DIR / "redirect.py")!r})
        redirect = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(redirect)
        assert redirect.foreign_modules() == ["triton.profiler"]
        redirect.install()
        import triton.profiler
        import proton
        assert triton.profiler is proton and sys.modules["triton.profiler"] is proton
        assert redirect.foreign_modules() == []
        """,
        tmp_path,
        fake_triton,
        env={"PROTON_TRITON_REDIRECT": "0", "FAKE_PROFILER_OK": "1"},
    )


def test_switched_off_by_environment(tmp_path, fake_triton):
    result = run("import triton.profiler", tmp_path, fake_triton, {"PROTON_TRITON_REDIRECT": "0"})
    assert result.returncode != 0
    assert "Triton's own triton.profiler was imported" in result.stderr


def test_python_dash_m(tmp_path, fake_triton):
    # runpy takes the code from the redirect's loader: `python -m triton.profiler` is Proton's
    # command line (proton/__main__.py); a module Proton lacks is named in the error.
    result = run("", tmp_path, fake_triton, argv=["-m", "triton.profiler", "--help"])
    assert result.returncode == 0, result.stderr
    assert "usage: proton" in result.stdout + result.stderr
    result = run("", tmp_path, fake_triton, argv=["-m", "triton.profiler.no_such_module"])
    assert result.returncode != 0
    assert "No module named triton.profiler.no_such_module" in result.stderr


def test_other_sitecustomize_still_runs(tmp_path, fake_triton):
    other = tmp_path / "other_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE_RAN = True\n")
    result = run_interpreter(
        ["-c", "import builtins, triton.profiler, proton\nprint(builtins.OTHER_SITE_RAN)"],
        tmp_path,
        paths=(COMPAT_DIR, fake_triton, other),
        drop=("PROTON_TRITON_REDIRECT",),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
