"""Which profiles the viewer's FILE arguments name, and how they group into runs.

    paths = expand(["out/", "run.rank*.hatchet"])   # directories and quoted globs opened
    groups = runs(paths)       # [[rank0 part_0, rank0 part_1], [rank1 part_0, ...], ...]

Proton names its files `<name>.<ext>`, `<name>.part_<P>.<ext>` (periodic flushing: one
file per phase), `<name>.rank<R>.<ext>` (one per process of a torchrun/MPI/Slurm job) and
`<name>.rank<R>.part_<P>.<ext>`, ext being hatchet or hatchet_msgpack. The part files of
one run (same directory, name and rank) are phases of it: the viewer adds them up into one
profile. What is left, several runs or ranks, is combined per node with --merge (and the
imbalance column), as any set of files is.
"""

import glob
import os
import re

from .errors import ViewerError

PROFILE_EXTENSIONS = (".hatchet", ".hatchet_msgpack")
_NAME = re.compile(
    r"(?P<base>.*?)(?:\.rank(?P<rank>\d+))?(?:\.part_(?P<part>\d+))?"
    r"\.(?:hatchet|hatchet_msgpack)"
)
_GLOB_CHARS = re.compile(r"[*?[]")


def _sort_key(path):
    """Natural order: rank2 before rank10, part_2 before part_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def expand(paths) -> list:
    """Each FILE as given, a directory as the profiles in it, a pattern the shell left
    unexpanded (quoted) as the files it matches; each in natural order."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            found = [
                os.path.join(path, name)
                for name in os.listdir(path)
                if name.endswith(PROFILE_EXTENSIONS) and os.path.isfile(os.path.join(path, name))
            ]
            if not found:
                raise ViewerError(
                    f"{path} is a directory with no profile files "
                    f"({', '.join('*' + e for e in PROFILE_EXTENSIONS)}) in it"
                )
            out += sorted(found, key=_sort_key)
        elif not os.path.exists(path) and _GLOB_CHARS.search(path):
            found = [p for p in glob.glob(path) if os.path.isfile(p)]
            if not found:
                raise ViewerError(f"{path} matches no file")
            out += sorted(found, key=_sort_key)
        else:
            out.append(path)
    return out


def run_key(path):
    """(directory, name, rank) for a part file, None for any other file."""
    m = _NAME.fullmatch(os.path.basename(path))
    if m is None or m.group("part") is None:
        return None
    return (os.path.dirname(os.path.abspath(path)), m.group("base"), m.group("rank"))


def runs(paths) -> list:
    """The paths grouped into runs, in the order first given: the part files of one run
    together (by part number), every other file alone. Two files of the same part of one
    run (say in both formats) would count it twice: that is a ViewerError."""
    groups, where = [], {}
    for path in paths:
        key = run_key(path)
        if key is None:
            groups.append([path])
            continue
        if key not in where:
            where[key] = len(groups)
            groups.append([])
        groups[where[key]].append(path)
    for group in groups:
        if len(group) == 1:
            continue
        seen = {}
        for path in group:
            part = _NAME.fullmatch(os.path.basename(path)).group("part")
            if part in seen:
                raise ViewerError(
                    f"{seen[part]} and {path} are the same phase (part_{part}) of one run; "
                    "give one of them"
                )
            seen[part] = path
        group.sort(key=lambda p: int(_NAME.fullmatch(os.path.basename(p)).group("part")))
    return groups
