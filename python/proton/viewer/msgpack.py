"""A small MessagePack decoder, so that `.hatchet_msgpack` files load without a dependency.

    from proton.viewer.msgpack import unpackb
    data = unpackb(open("run.hatchet_msgpack", "rb").read())

When the `msgpack` package is installed, `decode` uses it (it is much faster) and this
module is the fallback. Maps become dicts (keys may be any hashable value), arrays lists,
bin bytes; ext types are rejected because Proton never writes them.
"""

import struct

_UNPACK = {
    0xCA: (">f", 4),
    0xCB: (">d", 8),
    0xCC: (">B", 1),
    0xCD: (">H", 2),
    0xCE: (">I", 4),
    0xCF: (">Q", 8),
    0xD0: (">b", 1),
    0xD1: (">h", 2),
    0xD2: (">i", 4),
    0xD3: (">q", 8),
}
_STR_LEN = {0xD9: (">B", 1), 0xDA: (">H", 2), 0xDB: (">I", 4)}
_BIN_LEN = {0xC4: (">B", 1), 0xC5: (">H", 2), 0xC6: (">I", 4)}
_ARRAY_LEN = {0xDC: (">H", 2), 0xDD: (">I", 4)}
_MAP_LEN = {0xDE: (">H", 2), 0xDF: (">I", 4)}


class MessagePackError(ValueError):
    """The bytes are not one complete MessagePack value."""


def unpackb(data: bytes):
    """Decodes exactly one MessagePack value from `data` (pure Python)."""
    view = memoryview(data)
    end = len(data)
    unpack_from = struct.unpack_from

    def length(table, tag, pos):
        fmt, size = table[tag]
        if pos + size > end:
            raise MessagePackError("truncated")
        return unpack_from(fmt, view, pos)[0], pos + size

    def read(pos):
        if pos >= end:
            raise MessagePackError("truncated")
        tag = view[pos]
        pos += 1
        if tag <= 0x7F:
            return tag, pos
        if tag >= 0xE0:
            return tag - 0x100, pos
        if 0xA0 <= tag <= 0xBF:
            return text(tag & 0x1F, pos)
        if 0x90 <= tag <= 0x9F:
            return array(tag & 0x0F, pos)
        if 0x80 <= tag <= 0x8F:
            return mapping(tag & 0x0F, pos)
        if tag == 0xC0:
            return None, pos
        if tag == 0xC2:
            return False, pos
        if tag == 0xC3:
            return True, pos
        if tag in _UNPACK:
            fmt, size = _UNPACK[tag]
            if pos + size > end:
                raise MessagePackError("truncated")
            return unpack_from(fmt, view, pos)[0], pos + size
        if tag in _STR_LEN:
            n, pos = length(_STR_LEN, tag, pos)
            return text(n, pos)
        if tag in _ARRAY_LEN:
            n, pos = length(_ARRAY_LEN, tag, pos)
            return array(n, pos)
        if tag in _MAP_LEN:
            n, pos = length(_MAP_LEN, tag, pos)
            return mapping(n, pos)
        if tag in _BIN_LEN:
            n, pos = length(_BIN_LEN, tag, pos)
            if pos + n > end:
                raise MessagePackError("truncated")
            return bytes(view[pos : pos + n]), pos + n
        raise MessagePackError(f"unsupported type byte 0x{tag:02x} at offset {pos - 1}")

    def text(n, pos):
        if pos + n > end:
            raise MessagePackError("truncated")
        try:
            return str(view[pos : pos + n], "utf-8"), pos + n
        except UnicodeDecodeError as e:
            raise MessagePackError(f"invalid UTF-8 in a string at offset {pos}") from e

    def array(n, pos):
        out = []
        append = out.append
        for _ in range(n):
            value, pos = read(pos)
            append(value)
        return out, pos

    def mapping(n, pos):
        out = {}
        for _ in range(n):
            key, pos = read(pos)
            value, pos = read(pos)
            try:
                out[key] = value
            except TypeError as e:
                raise MessagePackError(f"unhashable map key at offset {pos}") from e
        return out, pos

    try:
        value, pos = read(0)
    except RecursionError:  # as the msgpack package, which stops at a fixed depth
        raise MessagePackError("nested too deeply") from None
    if pos != end:
        raise MessagePackError(f"{end - pos} unexpected bytes after the value")
    return value


def decode(data: bytes):
    """Decodes with the `msgpack` package when installed, else with unpackb."""
    try:
        import msgpack
    except ImportError:
        return unpackb(data)
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except msgpack.ExtraData as e:
        raise MessagePackError("unexpected bytes after the value") from e
    except (ValueError, msgpack.UnpackException) as e:
        raise MessagePackError(str(e) or "truncated") from e
    except TypeError as e:  # a map key that is a map or an array, as unpackb reports it
        raise MessagePackError(f"unhashable map key ({e})") from e
