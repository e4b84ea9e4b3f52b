"""A length-prefixed list of byte strings: the payload of bundles of sealed items or ciphertexts.

Format: ``b"SFGL" | u32 count | count * (u32 length | bytes)``; parsed with every length checked
and no trailing bytes allowed, like :mod:`securefg.federation.codec`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from securefg.errors import CodecError

MAGIC = b"SFGL"


def pack_blobs(blobs: Sequence[bytes]) -> bytes:
    """Encode a list of byte strings."""
    parts = [MAGIC, struct.pack("<I", len(blobs))]
    for b in blobs:
        if not isinstance(b, (bytes, bytearray)):
            raise CodecError(f"list items must be bytes, got {type(b).__name__}")
        parts.append(struct.pack("<I", len(b)))
        parts.append(bytes(b))
    return b"".join(parts)


def unpack_blobs(data: bytes, *, max_count: int = 1 << 20) -> list[bytes]:
    """Decode :func:`pack_blobs` output.

    Raises:
        CodecError: bad magic, a count above ``max_count``, truncation or trailing bytes.
    """
    if not isinstance(data, (bytes, bytearray)) or data[:4] != MAGIC or len(data) < 8:
        raise CodecError("payload is not a securefg blob list (bad magic)")
    (count,) = struct.unpack_from("<I", data, 4)
    if count > max_count:
        raise CodecError(f"blob list declares {count} items, more than the {max_count} allowed")
    pos, out = 8, []
    for i in range(count):
        if pos + 4 > len(data):
            raise CodecError(f"blob list truncated at item {i}")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + n > len(data):
            raise CodecError(f"blob list truncated inside item {i}")
        out.append(bytes(data[pos : pos + n]))
        pos += n
    if pos != len(data):
        raise CodecError(f"{len(data) - pos} trailing bytes after the blob list")
    return out
