"""Reading profile files into flat columns: Hatchet JSON (Proton's and Triton's), Hatchet
MessagePack, and `.part_<N>` phase files of either.

    names, parents, rows, devices, metadata = read_tree(path)

`read_columns` is the fast path: Proton's own layout read by the C++ reader (proton._C)
into columns, the metrics left in C++ until asked for; it returns None for anything else,
and read_tree's Python code then reads the file or explains what is wrong with it.

Nodes come out in pre-order (node 0 is the root): `names[i]`, `parents[i]` (-1 for the root)
and `rows[i]`, the node's metrics as written (exclusive values). Every problem with the
file becomes a ViewerError naming the file and what is wrong with it.

Speed: a 1,000,000-node file is ~150 MB of JSON. Python's json module spends most of its
time building three dicts per node, so files laid out the way Proton's writer lays them out
(`{"frame":{"name":N,"type":"function"},"metrics":M,"children":[...]}`) are first rewritten,
with four bytes.replace calls, into `{N:[M,child,...]}`: one dict and one list per node.
The rewrite is only done when no string in the file contains an escaped quote (then every
`"` delimits a string and the patterns, which contain words between quotes, can only match
structure), and its result is checked against the node count; anything else takes the
general path.
"""

import gc
import json
import os
import re
import sys
from contextlib import contextmanager

from . import fast
from .errors import ViewerError
from .msgpack import MessagePackError, decode

COMPACT_OPEN = b'{"frame":{"name":'
_COMPACT_REWRITES = (
    (COMPACT_OPEN, b"{"),
    (b',"type":"function"},"metrics":', b":["),
    (b'},"children":[]', b"}]"),
    (b'},"children":[', b"},"),
)
# Nesting the decoders may need: two JSON levels per tree level.
_MAX_NESTING = 20_000
# A \ud800-\udfff escape outside a pair decodes to a str no encoder accepts (rendering and
# exports would fail): it reads as U+FFFD. Escaped backslashes are matched first, so that
# `\\ud800` (the text "\ud800") stays; pairs are matched whole and stay.
_SURROGATE_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
# So does a surrogate encoded as UTF-8 bytes (not UTF-8, but json.loads lets it through).
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")


def read_tree(path):
    """(names, parents, rows, devices, metadata) of the tree profile at path."""
    data = _read_bytes(path)
    stripped = data.lstrip()
    if not stripped:
        raise ViewerError(f"{path} is empty")
    with _decoding():
        try:
            if _looks_like_msgpack(path, stripped):
                return _from_document(path, _decode_msgpack(path, data))
            del stripped
            holder = [data]
            del data  # _read_json drops the file's bytes as soon as it has its rewrite
            return _read_json(path, holder)
        except RecursionError:
            raise ViewerError(f"{path} nests deeper than Proton can read") from None
        except MemoryError:
            raise too_large(path) from None


def read_columns(path):
    """(names, parents, tree, devices, metadata) from the C++ reader, tree a
    proton._C.ViewerTree holding the metrics; None when the Python reader must read it."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    except (OSError, ValueError):
        return None
    if not head:
        return None
    msgpack = _looks_like_msgpack(path, head)
    tree = fast.read(path, msgpack)
    if tree is None:
        return None
    try:
        with _decoding():
            devices = _decode_value(tree.devices, msgpack) if tree.devices else {}
            metadata = _decode_value(tree.metadata, msgpack) if tree.metadata else {}
    except (ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(devices, dict):
        return None
    metadata = metadata if isinstance(metadata, dict) else {}
    return tree.names(), tree.parents(), tree, devices, metadata


def too_large(path) -> ViewerError:
    size = os.path.getsize(path)
    return ViewerError(f"{path} ({size:,} bytes) is too large to load in the memory available")


def _decode_value(data, msgpack):
    return decode(data) if msgpack else json.loads(data)


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ViewerError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ViewerError(f"{path} is a directory, not a profile file") from None
    except MemoryError:
        raise ViewerError(f"{path} is too large to load in the memory available") from None
    except OSError as e:
        raise ViewerError(f"cannot read {path}: {e.strerror or e}") from None


@contextmanager
def _decoding():
    """The cyclic GC walks every container built so far each time it runs; while millions
    of acyclic ones are built it only costs time, so it is paused for the duration."""
    was_enabled = gc.isenabled()
    limit = sys.getrecursionlimit()
    gc.disable()
    sys.setrecursionlimit(max(limit, _MAX_NESTING))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
        if was_enabled:
            gc.enable()


def _looks_like_msgpack(path, stripped) -> bool:
    """By name (`.hatchet_msgpack`, also `.part_<N>.hatchet_msgpack`) unless the content is
    plainly JSON; files named otherwise by their first byte (a MessagePack array)."""
    if stripped[:1] in (b"[", b"{"):
        return False
    if os.fspath(path).endswith(".hatchet_msgpack"):
        return True
    return 0x90 <= stripped[0] <= 0x9F or stripped[0] in (0xDC, 0xDD)


def _decode_msgpack(path, data):
    try:
        return decode(data)
    except MessagePackError as e:
        detail = str(e)
        if "truncated" in detail or "incomplete" in detail:
            raise ViewerError(f"{path} is truncated (MessagePack ends early)") from None
        raise ViewerError(f"{path} is not a Hatchet profile ({detail})") from None


def _json_error(path, data, e):
    end = data.rstrip()
    if end.lstrip()[:1] in (b"[", b"{") and (e.pos >= len(end) - 1 or end[-1:] not in b"]}"):
        return ViewerError(f"{path} is truncated (JSON ends early, after {len(end)} bytes)")
    return ViewerError(f"{path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")


def _read_json(path, holder):
    """holder: [the file's bytes], emptied once they are no longer needed."""
    data = _without_lone_surrogates(holder.pop())
    # The byte rewrite below is a fast path for Proton's layout when the C++ reader is
    # missing. A file the C++ reader turned down is odd: only a full parse judges it (the
    # rewrite can make some malformed files valid, found by fuzz/viewer_load_fuzzer.py).
    if not fast.can_read() and b'\\"' not in data:
        expected = data.count(COMPACT_OPEN)
        if expected and data.count(_COMPACT_REWRITES[1][0]) == expected:
            compact = data.replace(*_COMPACT_REWRITES[0])
            del data  # read again below in the rare case the rewrite does not fit
            for old, new in _COMPACT_REWRITES[1:]:
                compact = compact.replace(old, new)
            try:
                document = json.loads(compact)
            except (ValueError, UnicodeDecodeError):
                document = None  # the general path below reports the error
            del compact
            if document is not None:
                try:
                    result = _from_compact(document)
                except (AttributeError, TypeError, LookupError):  # a child that is no node
                    result = None
                if result is not None and len(result[0]) == expected:
                    return result
            del document
            data = _without_lone_surrogates(_read_bytes(path))
    try:
        document = json.loads(data)
    except UnicodeDecodeError as e:
        raise ViewerError(
            f"{path} is not UTF-8 text (byte {e.start}): not a JSON profile"
        ) from None
    except json.JSONDecodeError as e:
        raise _json_error(path, data, e) from None
    return _from_document(path, document)


def _without_lone_surrogates(data):
    if b"\xed" in data and json.detect_encoding(data).startswith("utf-8"):
        data = _SURROGATE_BYTES.sub("\ufffd".encode(), data)
    if b"\\ud" not in data and b"\\uD" not in data:
        return data
    return _SURROGATE_ESCAPES.sub(lambda m: b"\\ufffd" if m[1] else m[0], data)


def _from_compact(document):
    """Columns of a rewritten document `[{ROOT:[M,...], "proton_metadata":...}, devices]`;
    None when it does not have that shape."""
    if not isinstance(document, list) or not document or not isinstance(document[0], dict):
        return None
    root = document[0]
    metadata = root.pop("proton_metadata", None)
    if len(root) != 1:
        return None
    devices = document[1] if len(document) > 1 and isinstance(document[1], dict) else {}
    names, parents, rows = [], [], []
    add_name, add_parent, add_row = names.append, parents.append, rows.append
    # Two parallel stacks, extended a node's children at a time (C loops, no tuples).
    nodes, owners = [root], [-1]
    pop_node, pop_owner = nodes.pop, owners.pop
    push_nodes, push_owners = nodes.extend, owners.extend
    while nodes:
        node = pop_node()
        add_parent(pop_owner())
        if len(node) != 1:
            return None
        ((name, body),) = node.items()
        index = len(names)
        add_name(name)
        add_row(body[0])
        if len(body) > 1:
            push_nodes(body[:0:-1])
            push_owners([index] * (len(body) - 1))
    return names, parents, rows, devices, metadata if isinstance(metadata, dict) else {}


def _shape_error(path, what):
    return ViewerError(
        f"{path} is not a Hatchet tree profile: {what} (expected [root, devices] with nodes "
        '{"frame": {"name": ...}, "metrics": {...}, "children": [...]})'
    )


def _from_document(path, document):
    if isinstance(document, dict):
        if "traceEvents" in document:
            raise ViewerError(
                f"{path} is a Chrome trace (data='trace'): open it in https://ui.perfetto.dev; "
                "proton-viewer reads tree profiles (.hatchet, .hatchet_msgpack)"
            )
        document = [document]
    if not isinstance(document, list) or not document:
        raise _shape_error(path, f"the top level is {_describe(document)}")
    root = document[0]
    names, parents, rows = _walk_nodes(path, root)
    if any(type(key) is not str for key in set().union(*rows)):  # MessagePack allows them
        raise _shape_error(path, "a metric name is not a string")
    devices = document[1] if len(document) > 1 else {}
    if not isinstance(devices, dict):
        raise _shape_error(path, f"the device table is {_describe(devices)}")
    metadata = root.get("proton_metadata")
    return names, parents, rows, devices, metadata if isinstance(metadata, dict) else {}


def _walk_nodes(path, root):
    names, parents, rows = [], [], []
    stack = [(root, -1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, parent = pop()
        try:
            name = node["frame"]["name"]
            metrics = node.get("metrics") or {}
            children = node.get("children") or ()
        except (TypeError, KeyError, AttributeError):
            where = "/".join(names[i] for i in _ancestors(parents, parent)) or "the top level"
            raise _shape_error(path, f"a node under {where} has no frame name") from None
        if type(metrics) is not dict or type(children) is not list and children != ():
            raise _shape_error(path, f"node {name!r} has malformed metrics or children")
        index = len(names)
        names.append(name if type(name) is str else str(name))
        parents.append(parent)
        rows.append(metrics)
        for k in range(len(children) - 1, -1, -1):
            push((children[k], index))
    return names, parents, rows


def _ancestors(parents, index):
    chain = []
    while index >= 0:
        chain.append(index)
        index = parents[index]
    return reversed(chain)


def _describe(value):
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"
