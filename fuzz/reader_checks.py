"""The properties the Python fuzz targets check, importable without atheris so that
tests/python/test_fuzz_regressions.py checks the saved inputs the same way.

    check_profile_bytes(data, directory)   # viewer_load_fuzzer.py
    check_msgpack_bytes(data)              # msgpack_fuzzer.py

Each returns normally or raises AssertionError (or whatever exception escaped a reader,
which is itself the failure). For any bytes:
- `proton.viewer.load` returns a Profile or raises ViewerError, the viewer's one documented
  error; nothing else escapes.
- It agrees with the plainest reading of the file (one json.loads or MessagePack decode,
  then the node walk): the same nodes, metrics, device table and metadata, or an error in
  both. This holds the C++ reader (readers.read_columns) and the JSON rewrite in
  readers._read_json to the plain reading.
- A loaded profile renders as `proton-viewer FILE` and `proton-viewer -l FILE` would, and
  with its Python frames folded, raising nothing but ViewerError.
- The pure-Python MessagePack decoder returns a value or raises MessagePackError, and
  gives the `msgpack` package's value wherever both accept the bytes.
"""

import json
import math
import os
import re
import reprlib

from proton.viewer import ViewerError, frames, load, readers
from proton.viewer import msgpack as viewer_msgpack
from proton.viewer.main import build_view, default_metrics, list_metrics
from proton.viewer.model import hide_launch_metadata
from proton.viewer.render import render

try:
    import msgpack as msgpack_package
except ImportError:
    msgpack_package = None

# The same bytes under both names: by name, a .hatchet_msgpack file is MessagePack unless it
# starts like JSON, and a .hatchet file is JSON unless it starts like a MessagePack array.
SUFFIXES = (".hatchet", ".part_1.hatchet_msgpack")
_SURROGATE = re.compile("[\ud800-\udfff]")


def same(a, b) -> bool:
    """Stricter than ==: types must match (1, 1.0 and True differ), NaN equals NaN and
    dict key order counts (the viewer lists metrics in the file's order). Iterative: the
    values may nest thousands deep."""
    pairs = [(a, b)]
    while pairs:
        a, b = pairs.pop()
        if type(a) is not type(b):
            return False
        if type(a) is float:
            if a != b and not (math.isnan(a) and math.isnan(b)):
                return False
        elif type(a) in (list, tuple, dict):
            if len(a) != len(b):
                return False
            if type(a) is dict:  # items pairwise: a NaN key is found in neither by lookup
                pairs.extend(zip(a.items(), b.items()))
            else:
                pairs.extend(zip(a, b))
        elif a != b:
            return False
    return True


def describe(a, b) -> str:
    """Where a and b first differ, for the failure message."""
    where = ""
    while True:
        if type(a) is dict and type(b) is dict and len(a) == len(b):
            k, ((ka, va), (kb, vb)) = next(
                (k, p) for k, p in enumerate(zip(a.items(), b.items())) if not same(*p)
            )
            if not same(ka, kb):
                return f"{where} key {k}: {_short(ka)} != {_short(kb)}"
            where, a, b = f"{where}[{_short(ka)}]", va, vb
        elif type(a) in (list, tuple) and type(b) is type(a) and len(a) == len(b):
            k = next(k for k, (x, y) in enumerate(zip(a, b)) if not same(x, y))
            where, a, b = f"{where}[{k}]", a[k], b[k]
        else:
            return f"{where}: {_short(a)} != {_short(b)}"


_repr = reprlib.Repr()  # keyword arguments only from Python 3.12
_repr.maxlevel, _repr.maxstring, _repr.maxother = 4, 80, 80
_short = _repr.repr


def plain_reading(path, data):
    """(names, parents, rows, devices, metadata) by one decode and the node walk; None
    where the file is not a readable profile."""
    stripped = data.lstrip()
    if not stripped:
        return None
    with readers._decoding():
        try:
            if readers._looks_like_msgpack(path, stripped):
                document = viewer_msgpack.decode(data)
            else:
                document = _without_lone_surrogates(json.loads(data))
            return readers._from_document(path, document)
        except (ValueError, TypeError, RecursionError):  # ViewerError is a ValueError
            return None


def _without_lone_surrogates(value):
    """The readers read what json.loads makes a lone surrogate (an unpaired \\ud800-\\udfff
    escape, a surrogate encoded as UTF-8 bytes) as U+FFFD."""
    if type(value) is str:
        return _SURROGATE.sub("\ufffd", value)
    if type(value) is list:
        return [_without_lone_surrogates(v) for v in value]
    if type(value) is dict:
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def _check_same(what, got, expected):
    for k, field in enumerate(("names", "parents", "rows", "devices", "metadata")):
        if not same(got[k], expected[k]):
            raise AssertionError(f"{what}: {field} differ: {describe(got[k], expected[k])}")


def _check_render(profile):
    profile = hide_launch_metadata(profile)
    list_metrics(profile)
    tree, columns = build_view([profile], default_metrics(profile))
    render(tree, columns, stats=tree.stats)
    folded, folded_columns = build_view([frames.fold(profile)], default_metrics(profile))
    render(folded, folded_columns, print_sorted=True)


def check_profile_file(path, data):
    """The properties above for the file at path, which holds data."""
    expected = plain_reading(path, data)
    try:
        profile = load(path)
    except ViewerError:
        if expected is not None:
            raise AssertionError("load() rejects a file that json/MessagePack reads") from None
        return
    if expected is not None:
        got = (profile.names, profile.parents, profile.rows, profile.devices, profile.metadata)
        _check_same("load()", got, expected)
        _check_same("read_tree()", readers.read_tree(path), expected)
    else:
        raise AssertionError("load() reads a file that the plain reading rejects")
    try:
        _check_render(profile)
    except ViewerError:
        pass


def check_profile_bytes(data: bytes, directory) -> None:
    """check_profile_file on data saved under each of SUFFIXES in directory."""
    for suffix in SUFFIXES:
        path = os.path.join(directory, "input" + suffix)
        with open(path, "wb") as f:
            f.write(data)
        check_profile_file(path, data)


def check_msgpack_bytes(data: bytes) -> None:
    try:
        value = viewer_msgpack.unpackb(data)
    except viewer_msgpack.MessagePackError:
        value = viewer_msgpack.MessagePackError
    try:
        decoded = viewer_msgpack.decode(data)
    except viewer_msgpack.MessagePackError:
        decoded = viewer_msgpack.MessagePackError
    if msgpack_package is None or viewer_msgpack.MessagePackError in (value, decoded):
        return
    if not same(value, decoded):
        raise AssertionError(f"unpackb and the msgpack package differ: {describe(value, decoded)}")
