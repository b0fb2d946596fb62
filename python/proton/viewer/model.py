"""The viewer's data model: a calling-context tree in flat columns, and the operations on it
(load, select frames, align several profiles).

    profile = load("run.hatchet")
    profile.inclusive("time (ns)")[0]         # total time under ROOT
    profile.root.children[0].name, profile.root.children[0].metrics

Nodes are numbered in pre-order (node 0 is ROOT, a node's subtree is the index range
[i, profile.ends[i])); `names[i]`, `parents[i]` and `rows[i]` (the metrics as written,
exclusive per node) describe node i. Operations return new Profiles; none modifies one.
Not thread-safe to mutate; reading from several threads is fine.

The computing is done once, in C++ (fast.py says why): a Profile holds its tree in C++
columns (`profile.tree`, read from the file or built from names/parents/rows on first
use), and inclusive sums, selections and alignment run there, as they do for
proton-viewer's one-file report.
"""

import re
from math import isnan

from ..state import COMPUTE_METADATA_SCOPE_NAME
from . import fast
from .errors import ViewerError
from .readers import read_columns, read_tree

_NUMBER = (int, float)
# triton.profiler keeps these at their node and never adds them into the parent (its cycle
# metric declares them exclusive), but its files do not say so; Proton's own files list them.
_TRITON_EXCLUSIVE = frozenset({"cycles", "normalized_cycles"})


def exclusive_names(agg, names) -> set:
    """The metrics readers do not sum into parents, given a file's `metric_aggregation`
    metadata (None when the file has none: one written by triton.profiler) and its numeric
    metric names. Raises ValueError for metadata of the wrong shape."""
    found = {m for m in names if m.endswith("(exc)")}
    if agg is None:
        return found | (_TRITON_EXCLUSIVE & set(names))
    if not isinstance(agg, dict):
        raise ValueError("metric_aggregation is not a map")
    for kind in ("exclusive", "property"):
        listed = agg.get(kind) or ()
        if not isinstance(listed, (list, tuple)):
            raise ValueError(f"metric_aggregation.{kind} is not a list")
        found.update(n for n in listed if isinstance(n, str))
    return found


class Node:
    """A light view of one node; created on demand."""

    __slots__ = ("index", "profile")

    def __init__(self, profile: "Profile", index: int) -> None:
        self.profile = profile
        self.index = index

    @property
    def name(self) -> str:
        return self.profile.names[self.index]

    @property
    def metrics(self) -> dict:
        """The node's own (exclusive) metrics, as written in the file."""
        return self.profile.rows[self.index]

    @property
    def parent(self):
        p = self.profile.parents[self.index]
        return None if p < 0 else Node(self.profile, p)

    @property
    def children(self) -> list:
        return [Node(self.profile, c) for c in self.profile.children(self.index)]

    @property
    def path(self) -> list:
        return self.profile.path(self.index)

    def inclusive(self, metric: str):
        return self.profile.inclusive(metric)[self.index]

    def __repr__(self) -> str:
        return f"Node({self.index}, {self.name!r})"


class Profile:
    """One tree profile (or several aligned into one) in flat pre-order columns."""

    def __init__(
        self, names, parents, rows, devices=None, metadata=None, source="", tree=None
    ) -> None:
        """rows may be None when tree (a proton._C.ViewerTree of the same nodes) holds the
        metrics."""
        self.names = names
        self.parents = parents
        self._rows = rows
        self._tree = tree
        self.devices = devices or {}
        self.metadata = metadata or {}
        self.source = source
        self._columns = {}
        self._inclusive = {}
        self._ends = None
        self._depths = None
        self._kinds = None

    @classmethod
    def load(cls, path) -> "Profile":
        columns = read_columns(path)
        if columns is not None:
            names, parents, tree, devices, metadata = columns
            return cls(names, parents, None, devices, metadata, source=str(path), tree=tree)
        names, parents, rows, devices, metadata = read_tree(path)
        return cls(names, parents, rows, devices, metadata, source=str(path))

    @classmethod
    def from_tree(cls, tree, like: "Profile") -> "Profile":
        """A Profile of a proton._C.ViewerTree, with the devices, metadata and source of
        `like`."""
        return cls(
            tree.names(), tree.parents(), None, like.devices, like.metadata, like.source, tree
        )

    @property
    def tree(self):
        """The profile in C++ columns (a proton._C.ViewerTree; built on first use)."""
        if self._tree is None:
            self._tree = fast.tree(self.names, self.parents, self._rows)
        return self._tree

    @property
    def rows(self) -> list:
        """rows[i]: node i's metrics as written (a dict; built on first use when the
        metrics were read into columns)."""
        if self._rows is None:
            self._rows = self._tree.rows()
        return self._rows

    def __len__(self) -> int:
        return len(self.names)

    # ------------------------------------------------------------------ structure
    @property
    def root(self) -> Node:
        return Node(self, 0)

    @property
    def ends(self) -> list:
        """ends[i]: one past the last node of i's subtree."""
        if self._ends is None:
            parents = self.parents
            size = [1] * len(parents)
            for i in range(len(parents) - 1, 0, -1):
                size[parents[i]] += size[i]
            self._ends = [i + s for i, s in enumerate(size)]
        return self._ends

    def children(self, index: int) -> list:
        ends = self.ends
        out, child, end = [], index + 1, ends[index]
        while child < end:
            out.append(child)
            child = ends[child]
        return out

    def path(self, index: int) -> list:
        chain = []
        while index >= 0:
            chain.append(self.names[index])
            index = self.parents[index]
        return chain[::-1]

    def depths(self) -> list:
        """depths()[i]: levels below ROOT (cached; do not modify)."""
        if self._depths is None:
            self._depths = fast.depths(self.parents)
        return self._depths

    def find(self, *path) -> Node:
        """The node reached from ROOT by following child names."""
        index = 0
        for name in path:
            matches = [c for c in self.children(index) if self.names[c] == name]
            if not matches:
                raise KeyError(f"no child {name!r} under {'/'.join(self.path(index))}")
            index = matches[0]
        return Node(self, index)

    # ------------------------------------------------------------------ metrics
    def _metric_kinds(self) -> dict:
        """metric name -> 'number' or 'other' (by its last value), in first-seen order (ROOT's
        keys first)."""
        if self._kinds is None:
            kinds = self.tree.metric_kinds()
            self._kinds = {name: "number" if number else "other" for name, number in kinds}
        return self._kinds

    @property
    def metric_names(self) -> list:
        """Numeric metrics, as written (`time (ns)`, `count`, user metrics)."""
        return [k for k, kind in self._metric_kinds().items() if kind == "number"]

    @property
    def exclusive_metrics(self) -> set:
        """Metrics that readers do not sum into parents (`(exc)` scopes, properties)."""
        names = self.metric_names
        try:
            return exclusive_names(self.metadata.get("metric_aggregation"), names)
        except ValueError:  # a damaged file: no aggregation hints
            return {m for m in names if m.endswith("(exc)")}

    @property
    def stats(self) -> dict:
        """The profile's data-loss counters (empty for files that carry none)."""
        stats = self.metadata.get("stats")
        if not isinstance(stats, dict):
            return {}
        # Names as text whatever a damaged file holds, so the table always prints.
        return {k if isinstance(k, str) else str(k): v for k, v in stats.items()}

    def column(self, metric: str) -> list:
        """The metric's value on each node as written, None where absent."""
        col = self._columns.get(metric)
        if col is None and self._rows is None:
            col = self._columns[metric] = self._tree.column(metric)
        if col is None:
            col = self._columns[metric] = [row.get(metric) for row in self.rows]
        return col

    def exclusive(self, metric: str) -> list:
        """The metric's own value on each node; 0 where absent or not a number."""
        return self.tree.inclusive(metric, None, True)

    def inclusive(self, metric: str, where=None) -> list:
        """Each node's value plus its descendants' (exclusive metrics are not summed; what is
        not a number counts as 0). With `where`, only the values of nodes that carry a number
        for that metric count."""
        exclusive = metric in self.exclusive_metrics
        if where is not None:
            return self.tree.inclusive(metric, where, exclusive)
        out = self._inclusive.get(metric)
        if out is None:
            out = self._inclusive[metric] = self.tree.inclusive(metric, None, exclusive)
        return out

    def to_dataframe(self, metrics=None):
        """A pandas DataFrame, one row per node: node, parent, depth, name, path, each
        metric's exclusive value and its inclusive value as `<metric> (inc)`."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "[PROTON] Profile.to_dataframe() needs pandas: pip install pandas"
            ) from None
        metrics = self.metric_names if metrics is None else list(metrics)
        data = {
            "node": range(len(self)),
            "parent": self.parents,
            "depth": self.depths(),
            "name": self.names,
            "path": ["/".join(self.path(i)) for i in range(len(self))],
        }
        for m in metrics:
            data[m] = self.column(m)
            data[f"{m} (inc)"] = self.inclusive(m)
        for m, kind in self._metric_kinds().items():
            if kind == "other" and m not in data:
                data[m] = self.column(m)
        return pd.DataFrame(data).set_index("node")

    # ------------------------------------------------------------------ subsets
    def subset(self, keep) -> "Profile":
        """The profile restricted to nodes with keep[i] true (keep must be closed under
        taking parents; ROOT always stays); metrics of dropped nodes no longer count."""
        mask = bytes(1 if k else 0 for k in keep)
        return Profile.from_tree(self.tree.subset(mask), self)


def load(path) -> Profile:
    """Loads a `.hatchet` or `.hatchet_msgpack` file (Proton's or Triton's)."""
    return Profile.load(path)


# ---------------------------------------------------------------------- selections
def hide_launch_metadata(profile: Profile) -> Profile:
    """Drops `__proton_launch_metadata` frames with their subtrees, and nodes whose every
    child was such a frame and that have no metric of their own."""
    if COMPUTE_METADATA_SCOPE_NAME not in profile.names:
        return profile
    kept = profile.tree.select(COMPUTE_METADATA_SCOPE_NAME, None, None)
    return Profile.from_tree(kept.subset(), profile)


def _compile(pattern, flag):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ViewerError(f"{flag} {pattern!r} is not a valid regular expression: {e}") from None


def name_mask(strings, pattern, flag):
    """Per string, whether the regex matches at its start (bytes); None without a pattern."""
    if not pattern:
        return None
    match = _compile(pattern, flag).match
    return bytes(1 if match(s) else 0 for s in strings)


def select(profile: Profile, include=None, exclude=None) -> Profile:
    """Triton's -i/-e: include keeps every path through a frame whose name matches (the
    frame's ancestors and its whole subtree); exclude drops matching frames with their
    subtrees. Patterns are Python regular expressions matched at the start of the name."""
    if not include and not exclude:
        return profile
    tree = profile.tree
    strings = tree.strings()
    kept = tree.select(
        "",
        name_mask(strings, include, "-i/--include"),
        name_mask(strings, exclude, "-e/--exclude"),
    )
    return Profile.from_tree(kept.subset(), profile)


# ---------------------------------------------------------------------- alignment
def align(profiles):
    """Aligns profiles node by node on their paths of names.

    Returns (union, maps): union is a Profile holding every path of any input in pre-order
    (its rows sum the inputs' numeric metrics; other values come from the first input that
    has them), and maps[k][i] is the union node of node i of profiles[k].
    """
    tree, maps = fast.merge([p.tree for p in profiles])
    devices, stats = {}, {}
    for prof in profiles:
        for kind, table in prof.devices.items():
            devices.setdefault(kind, {}).update(table)
        for key, value in prof.stats.items():
            if isinstance(value, _NUMBER):
                stats[key] = stats.get(key, 0) + value
    metadata = dict(profiles[0].metadata, stats=stats)
    source = "+".join(p.source for p in profiles)
    union = Profile(tree.names(), tree.parents(), None, devices, metadata, source, tree)
    return union, maps


def is_missing(value) -> bool:
    return value is None or (value.__class__ is float and isnan(value))
