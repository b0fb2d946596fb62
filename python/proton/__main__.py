"""`python -m proton ...`: the `proton` command line (see proton.cli)."""

from .cli import main

main()
