"""`python -m proton.proton ...`: the `proton` command line under the module name
triton.profiler gives it (`python -m triton.profiler.proton`), for scripts written for it."""

from .cli import main

if __name__ == "__main__":
    main()
