"""Run by Python at startup when this directory is on PYTHONPATH: installs the triton.profiler ->
proton redirect (redirect.py) in this interpreter, so in every process the compat tests start
(pytest, `proton ...`, `python -m triton.profiler...`, `python -c ...`). PROTON_TRITON_REDIRECT=0
leaves it out. A sitecustomize further down sys.path, which this one hides, is run afterwards."""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_NAME = "_proton_triton_redirect"


def _load_redirect():
    module = sys.modules.get(MODULE_NAME)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            MODULE_NAME, os.path.join(_HERE, "redirect.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE_NAME] = module
        spec.loader.exec_module(module)
    return module


def _chain_next_sitecustomize():
    for entry in sys.path:
        directory = os.path.abspath(entry or os.getcwd())
        if directory == _HERE:
            continue
        candidate = os.path.join(directory, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_chained_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as error:  # noqa: BLE001 - as site.py does: report, carry on
                print(f"Error in chained sitecustomize {candidate}: {error!r}", file=sys.stderr)
            return


if os.environ.get("PROTON_TRITON_REDIRECT", "1") != "0":
    _load_redirect().install()
_chain_next_sitecustomize()
