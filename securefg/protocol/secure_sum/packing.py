r"""Bit-packed ring vectors: ``m`` elements of Z_{2^k} in exactly ``ceil(m k / 8)`` bytes.

The wire form of a masked input, shaped like fcp's ``SecAggVector`` (``fcp/secagg/shared/
secagg_vector.cc``), which packs each element in ``ceil(log2 modulus)`` bits: element ``i``
occupies bits ``[i k, (i + 1) k)`` of a little-endian bit string, and the unused high bits of the
last byte are zero. A masked element is uniform in the ring, so nothing smaller is possible.

Wire format (all integers little-endian)::

    u8 version | u8 bits | u64 length | ceil(length * bits / 8) bytes

The decoder is strict: the version, ring size and length must be the ones the receiver expects,
the byte count must be exact (a truncated or oversized packing is refused), and the padding
bits must be zero (so every vector has one encoding).

Speed: elements are handled in groups of ``g`` (a multiple of 8, with ``g k >= 64``), so group
``j``'s element ``r`` always starts at byte ``j g k / 8 + floor(r k / 8)``, bit ``r k mod 8``. For
each ``r`` numpy reads or ORs one (unaligned) 64-bit word per group through a strided view, plus
one spill byte when ``k + shift > 64``: ``g`` vectorised passes of ``m / g`` words each.
"""

from __future__ import annotations

import struct

import numpy as np

from securefg.errors import CodecError, InvalidInputError

VERSION = 1
_HEADER = struct.Struct("<BBQ")
MAX_BITS = 64


def packed_size(length: int, bits: int) -> int:
    """Bytes of the packed body of ``length`` elements of ``bits`` bits."""
    return (length * bits + 7) // 8


def _group(bits: int) -> int:
    """Elements per group: a multiple of 8 whose bytes (``g bits / 8``) cover a 64-bit word."""
    return 8 * -(-8 // bits)


def _check_bits(bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= MAX_BITS:
        raise InvalidInputError(f"packed ring elements have 1..{MAX_BITS} bits, got {bits!r}")


def _word_view(buf: np.ndarray, offset: int, stride: int, count: int) -> np.ndarray:
    """``count`` little-endian uint64 words of ``buf`` starting at byte ``offset``, ``stride`` apart."""
    return np.ndarray(shape=(count,), dtype="<u8", buffer=buf, offset=offset, strides=(stride,))


def pack_bits(values: np.ndarray, bits: int) -> bytes:
    """Pack ring elements (their low ``bits`` bits; higher bits are ignored) into bytes.

    Args:
        values (np.ndarray): 1-D unsigned integer array (any width up to 64 bits).
        bits (int): Bits per element, 1..64.

    Returns:
        bytes: ``ceil(len(values) * bits / 8)`` bytes.
    """
    _check_bits(bits)
    v = np.ascontiguousarray(values)
    if v.ndim != 1 or v.dtype.kind != "u":
        raise InvalidInputError(f"pack_bits takes a 1-D unsigned integer array, got {v.dtype} of shape {v.shape}")
    m = v.size
    if m == 0:
        return b""
    if bits in (8, 16, 32, 64):  # byte-aligned: the little-endian words are the packing
        return v.astype(f"<u{bits // 8}", copy=False).tobytes()
    g = _group(bits)
    groups = -(-m // g)
    stride = g * bits // 8
    padded = np.zeros(groups * g, dtype=np.uint64)
    padded[:m] = v
    padded &= np.uint64((1 << bits) - 1)
    out = np.zeros(groups * stride + 8, dtype=np.uint8)  # 8 slack bytes for the last word
    for r in range(g):
        start, shift = divmod(r * bits, 8)
        col = padded[r::g]
        words = _word_view(out, start, stride, groups)
        words |= col << np.uint64(shift)
        if shift + bits > 64:  # the top bits spill into the 9th byte
            spill = out[start + 8 :: stride][:groups]
            spill |= (col >> np.uint64(64 - shift)).astype(np.uint8)
    return out[: packed_size(m, bits)].tobytes()


def unpack_bits(data: bytes | memoryview, bits: int, length: int, dtype: np.dtype | str = "<u8") -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``length`` elements as ``dtype`` (unsigned, wide enough).

    When ``bits`` is the width of ``dtype`` (a 16/32/64-bit ring read as its own words) the result
    is a read-only view of ``data``, not a copy: the aggregator only adds it into its sum.

    Raises:
        CodecError: if ``data`` is not exactly ``ceil(length * bits / 8)`` bytes or its
            padding bits are not zero.
    """
    _check_bits(bits)
    need = packed_size(length, bits)
    if len(data) != need:
        kind = "truncated" if len(data) < need else "oversized"
        raise CodecError(f"{kind} packing: {len(data)} bytes for {length} elements of {bits} bits (expected {need})")
    tail = length * bits % 8
    if tail and data[-1] >> tail:
        raise CodecError("packed ring vector has non-zero padding bits")
    if length == 0:
        return np.zeros(0, dtype=dtype)
    if bits in (8, 16, 32, 64):
        return np.frombuffer(data, dtype=f"<u{bits // 8}").astype(dtype, copy=False)
    g = _group(bits)
    groups = -(-length // g)
    stride = g * bits // 8
    buf = np.zeros(groups * stride + 8, dtype=np.uint8)
    buf[:need] = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(groups * g, dtype=np.uint64)
    mask = np.uint64((1 << bits) - 1)
    for r in range(g):
        start, shift = divmod(r * bits, 8)
        col = out[r::g]
        np.right_shift(_word_view(buf, start, stride, groups), np.uint64(shift), out=col)
        if shift + bits > 64:
            spill = buf[start + 8 :: stride][:groups].astype(np.uint64)
            col |= spill << np.uint64(64 - shift)
        col &= mask
    return out[:length].astype(dtype, copy=False)


def encode_packed(values: np.ndarray, bits: int) -> bytes:
    """A self-describing packed ring vector: header (version, bits, length) and the packing."""
    return _HEADER.pack(VERSION, bits, int(np.asarray(values).size)) + pack_bits(values, bits)


def decode_packed(data: bytes | memoryview, *, bits: int, length: int, dtype: np.dtype | str = "<u8") -> np.ndarray:
    """Parse :func:`encode_packed` output, requiring the ring size and length the receiver expects.

    The result may be a read-only view of ``data`` (see :func:`unpack_bits`); copy it to write.

    Raises:
        CodecError: a short header, another version, ring size or length, or a bad packing.
    """
    if len(data) < _HEADER.size:
        raise CodecError(f"packed ring vector of {len(data)} bytes is shorter than its header")
    version, got_bits, got_length = _HEADER.unpack_from(data)
    if version != VERSION:
        raise CodecError(f"unsupported packed-vector version {version} (this build reads {VERSION})")
    if got_bits != bits or got_length != length:
        raise CodecError(
            f"packed ring vector of {got_length} elements in Z_2^{got_bits}, expected {length} in Z_2^{bits}"
        )
    return unpack_bits(memoryview(data)[_HEADER.size :], bits, length, dtype)
