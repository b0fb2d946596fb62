"""The viewer's data model: a calling-context tree in flat columns, and the operations on it
(load, select frames, align several profiles).

    profile = load("run.hatchet")
    profile.inclusive("time (ns)")[0]         # total time under ROOT
    profile.root.children[0].name, profile.root.children[0].metrics

Nodes are numbered in pre-order (node 0 is ROOT, a node's subtree is the index range
[i, profile.ends[i])); `names[i]`, `parents[i]` and `rows[i]` (the metrics as written,
exclusive per node) describe node i. Operations return new Profiles; none modifies one.
Not thread-safe to mutate; reading from several threads is fine.
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
        """rows may be None when tree (a proton._C.ViewerTree) holds the metrics."""
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
        if self._depths is None:
            depth = [0] * len(self.parents)
            parents = self.parents
            for i in range(1, len(parents)):
                depth[i] = depth[parents[i]] + 1
            self._depths = depth
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
        """metric name -> 'number' or 'other', in first-seen order (ROOT's keys first)."""
        if self._kinds is None and self._rows is None:
            kinds = self._tree.metric_kinds()
            self._kinds = {name: "number" if number else "other" for name, number in kinds}
        if self._kinds is None:
            last = {}
            for row in self.rows:
                if row:
                    last.update(row)
            kinds = {}
            for name, value in last.items():
                number = isinstance(value, _NUMBER) and not isinstance(value, bool)
                kinds[name] = "number" if number else "other"
            self._kinds = kinds
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
        return [v if v.__class__ is int or v.__class__ is float else 0 for v in self.column(metric)]

    def inclusive(self, metric: str, where=None) -> list:
        """Each node's value plus its descendants' (exclusive metrics are not summed). With
        `where`, only the values of nodes that carry a number for that metric count."""
        if where is not None:
            have = self.column(where)
            own = [v if h.__class__ in _NUMBER else 0 for v, h in zip(self.exclusive(metric), have)]
            return own if metric in self.exclusive_metrics else self._summed_up(own)
        out = self._inclusive.get(metric)
        if out is None:
            if metric in self.exclusive_metrics:
                out = self.exclusive(metric)
            else:
                out = self._summed_up(self.column(metric))
            self._inclusive[metric] = out
        return out

    def _summed_up(self, values: list) -> list:
        """values (non-numbers count as 0) with each node's descendants' added to it."""
        out = fast.inclusive(values, self.parents)
        if out is None:
            out = [v if v.__class__ is int or v.__class__ is float else 0 for v in values]
            parents = self.parents
            for i in range(len(out) - 1, 0, -1):
                out[parents[i]] += out[i]
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
        taking parents); metrics of dropped nodes no longer count anywhere."""
        remap = [-1] * len(self)
        names, parents, rows = [], [], []
        for i, kept in enumerate(keep):
            if kept:
                remap[i] = len(names)
                names.append(self.names[i])
                p = self.parents[i]
                parents.append(remap[p] if p >= 0 else -1)
                rows.append(self.rows[i])
        return Profile(names, parents, rows, self.devices, self.metadata, self.source)


def load(path) -> Profile:
    """Loads a `.hatchet` or `.hatchet_msgpack` file (Proton's or Triton's)."""
    return Profile.load(path)


# ---------------------------------------------------------------------- selections
def hide_launch_metadata(profile: Profile) -> Profile:
    """Drops `__proton_launch_metadata` frames with their subtrees, and nodes whose every
    child was such a frame and that have no metric of their own."""
    names = profile.names
    if COMPUTE_METADATA_SCOPE_NAME not in names:
        return profile
    n, parents, ends = len(profile), profile.parents, profile.ends
    keep = bytearray(b"\x01") * n
    had_removed_child = bytearray(n)
    i = 0
    while i < n:
        if names[i] == COMPUTE_METADATA_SCOPE_NAME:
            keep[i : ends[i]] = bytes(ends[i] - i)
            had_removed_child[parents[i]] = 1
            i = ends[i]
        else:
            i += 1
    kept_child = bytearray(n)
    for i in range(n - 1, 0, -1):
        if keep[i]:
            if had_removed_child[i] and not kept_child[i] and not _has_number(profile.rows[i]):
                keep[i] = 0
                had_removed_child[parents[i]] = 1
            else:
                kept_child[parents[i]] = 1
    return profile.subset(keep)


def _has_number(row) -> bool:
    return any(isinstance(v, _NUMBER) and not isinstance(v, bool) and v for v in row.values())


def _compile(pattern, flag):
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ViewerError(f"{flag} {pattern!r} is not a valid regular expression: {e}") from None


def select(profile: Profile, include=None, exclude=None) -> Profile:
    """Triton's -i/-e: include keeps every path through a frame whose name matches (the
    frame's ancestors and its whole subtree); exclude drops matching frames with their
    subtrees. Patterns are Python regular expressions matched at the start of the name."""
    if not include and not exclude:
        return profile
    n, names, parents, ends = len(profile), profile.names, profile.parents, profile.ends
    keep = bytearray(b"\x01") * n
    if include:
        match = _compile(include, "-i/--include").match
        keep = bytearray(n)
        keep[0] = 1
        i = 0
        while i < n:
            if match(names[i]):
                keep[i : ends[i]] = b"\x01" * (ends[i] - i)
                p = parents[i]
                while p >= 0 and not keep[p]:
                    keep[p] = 1
                    p = parents[p]
                i = ends[i]
            else:
                i += 1
    if exclude:
        match = _compile(exclude, "-e/--exclude").match
        i = 1
        while i < n:
            if keep[i] and match(names[i]):
                keep[i : ends[i]] = bytes(ends[i] - i)
                i = ends[i]
            else:
                i += 1
    return profile.subset(keep)


# ---------------------------------------------------------------------- alignment
def align(profiles):
    """Aligns profiles node by node on their paths of names.

    Returns (union, maps): union is a Profile holding every path of any input in pre-order
    (its rows sum the inputs' numeric metrics; other values come from the first input that
    has them), and maps[k][i] is the union node of node i of profiles[k].
    """
    kids = [{}]
    union_names = [profiles[0].names[0]]
    raw_maps = []
    for prof in profiles:
        local = [0] * len(prof)
        names, parents = prof.names, prof.parents
        for i in range(1, len(prof)):
            table = kids[local[parents[i]]]
            u = table.get(names[i])
            if u is None:
                u = table[names[i]] = len(union_names)
                union_names.append(names[i])
                kids.append({})
            local[i] = u
        raw_maps.append(local)
    # Renumber in pre-order (children in first-seen order).
    order, parents_out, new_index = [], [], [0] * len(union_names)
    stack = [(0, -1)]
    while stack:
        u, parent = stack.pop()
        new_index[u] = len(order)
        order.append(u)
        parents_out.append(parent)
        me = len(order) - 1
        for child in reversed(list(kids[u].values())):
            stack.append((child, me))
    names = [union_names[u] for u in order]
    rows = [{} for _ in order]
    maps = []
    for prof, local in zip(profiles, raw_maps):
        mapped = [new_index[u] for u in local]
        maps.append(mapped)
        for i, row in enumerate(prof.rows):
            if row:
                _accumulate(rows[mapped[i]], row)
    devices, stats = {}, {}
    for prof in profiles:
        for kind, table in prof.devices.items():
            devices.setdefault(kind, {}).update(table)
        for key, value in prof.stats.items():
            if isinstance(value, _NUMBER):
                stats[key] = stats.get(key, 0) + value
    metadata = dict(profiles[0].metadata, stats=stats)
    union = Profile(
        names, parents_out, rows, devices, metadata, "+".join(p.source for p in profiles)
    )
    return union, maps


def _accumulate(into: dict, row: dict) -> None:
    for key, value in row.items():
        old = into.get(key)
        if old is None:
            into[key] = value
        elif (
            isinstance(value, _NUMBER) and isinstance(old, _NUMBER) and not isinstance(value, bool)
        ):
            into[key] = old + value


def is_missing(value) -> bool:
    return value is None or (value.__class__ is float and isnan(value))
