"""Safe binary codec for named tensors: the only way tensors cross a party boundary.

Why not ``pickle``/``torch.load``: both can execute code chosen by the sender. This codec
reads raw little-endian buffers with ``numpy.frombuffer`` and validates every field (magic,
version, dtype code, shape, sizes, no trailing bytes) before anything is built. An optional
:class:`TensorSpec` pins the names, dtypes and shapes the receiver expects.

Wire format (all integers little-endian)::

    b"SFGT" | u8 version | u32 count | count * entry
    entry := u16 name_len | name utf-8 | u8 dtype | u8 ndim | ndim * u64 dim | u64 nbytes | data
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from securefg.errors import CodecError

MAGIC = b"SFGT"
VERSION = 1
MAX_NDIM = 8
MAX_DIM = 2**31  # no dimension of a tensor under the 2 GiB cap is longer (an empty one could claim 2^64)
DEFAULT_MAX_BYTES = 2**31  # 2 GiB: a sanity cap, callers pass tighter limits

_DTYPES: dict[int, tuple[np.dtype, torch.dtype]] = {
    1: (np.dtype("<f4"), torch.float32),
    2: (np.dtype("<f8"), torch.float64),
    3: (np.dtype("<f2"), torch.float16),
    4: (np.dtype("<i8"), torch.int64),
    5: (np.dtype("<i4"), torch.int32),
    6: (np.dtype("<i2"), torch.int16),
    7: (np.dtype("i1"), torch.int8),
    8: (np.dtype("u1"), torch.uint8),
    9: (np.dtype("?"), torch.bool),
    10: (np.dtype("<u4"), torch.uint32),
    11: (np.dtype("<u8"), torch.uint64),
    12: (np.dtype("<u2"), torch.bfloat16),  # numpy has no bfloat16: raw 16-bit words
}
_CODE_OF = {tdt: code for code, (_, tdt) in _DTYPES.items()}


@dataclass(frozen=True)
class TensorSpec:
    """What a receiver expects: ``{name: (dtype, shape)}``; ``None`` in a shape is any size."""

    fields: Mapping[str, tuple[torch.dtype, tuple[int | None, ...]]]

    @classmethod
    def like(cls, tensors: Mapping[str, torch.Tensor]) -> TensorSpec:
        """The spec that exactly matches ``tensors`` (names, dtypes, shapes)."""
        return cls({k: (v.dtype, tuple(v.shape)) for k, v in tensors.items()})

    def check(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Raise :class:`CodecError` naming every mismatch between ``tensors`` and the spec."""
        problems: list[str] = []
        missing = set(self.fields) - set(tensors)
        extra = set(tensors) - set(self.fields)
        if missing:
            problems.append(f"missing fields {sorted(missing)}")
        if extra:
            problems.append(f"unexpected fields {sorted(extra)}")
        for name, (dtype, shape) in self.fields.items():
            if name not in tensors:
                continue
            t = tensors[name]
            if t.dtype != dtype:
                problems.append(f"{name}: dtype {t.dtype}, expected {dtype}")
            if len(shape) != t.dim() or any(
                s is not None and s != d for s, d in zip(shape, t.shape)
            ):
                problems.append(f"{name}: shape {tuple(t.shape)}, expected {shape}")
        if problems:
            raise CodecError("payload does not match the expected spec: " + "; ".join(problems))


def encode_tensors(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """Serialise named tensors to bytes (moved to CPU, made contiguous).

    Raises:
        CodecError: for an unsupported dtype, too many dims or a name that is too long.
    """
    parts = [MAGIC, struct.pack("<BI", VERSION, len(tensors))]
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise CodecError(f"{name!r} is a {type(t).__name__}, not a torch.Tensor")
        code = _CODE_OF.get(t.dtype)
        if code is None:
            raise CodecError(f"{name!r}: dtype {t.dtype} is not supported by the codec")
        if t.dim() > MAX_NDIM:
            raise CodecError(f"{name!r}: {t.dim()} dims exceed the limit of {MAX_NDIM}")
        raw_name = name.encode("utf-8")
        if len(raw_name) > 0xFFFF:
            raise CodecError(f"field name of {len(raw_name)} bytes is too long")
        flat = t.detach().to("cpu").contiguous()
        if t.dtype == torch.bfloat16:
            flat = flat.view(torch.int16)
        arr = flat.numpy().astype(_DTYPES[code][0], copy=False)
        data = arr.tobytes()
        parts.append(struct.pack("<H", len(raw_name)))
        parts.append(raw_name)
        parts.append(struct.pack("<BB", code, t.dim()))
        parts.append(struct.pack(f"<{t.dim()}Q", *t.shape))
        parts.append(struct.pack("<Q", len(data)))
        parts.append(data)
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError(f"payload truncated while reading {what}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def decode_tensors(
    data: bytes,
    *,
    spec: TensorSpec | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_nonfinite: bool = False,
) -> dict[str, torch.Tensor]:
    """Parse bytes produced by :func:`encode_tensors`, validating everything (a bool is the byte
    0 or 1, so every tensor has one encoding).

    Args:
        data (bytes): The payload received from another party.
        spec (TensorSpec, optional): Expected names, dtypes and shapes. (default: :obj:`None`)
        max_bytes (int): Reject payloads larger than this. (default: 2 GiB)
        allow_nonfinite (bool): Accept NaN/Inf in floating tensors. (default: :obj:`False`)

    Raises:
        CodecError: on any malformed, oversized, non-finite or unexpected content.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"payload must be bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise CodecError(f"payload of {len(data)} bytes exceeds the limit of {max_bytes}")
    r = _Reader(bytes(data))
    if bytes(r.take(4, "magic")) != MAGIC:
        raise CodecError("payload is not a securefg tensor message (bad magic)")
    version, count = r.unpack("<BI", "header")
    if version != VERSION:
        raise CodecError(f"unsupported codec version {version} (this build reads {VERSION})")
    out: dict[str, torch.Tensor] = {}
    for _ in range(count):
        (name_len,) = r.unpack("<H", "name length")
        try:
            name = bytes(r.take(name_len, "name")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError("field name is not valid utf-8") from exc
        if name in out:
            raise CodecError(f"duplicate field {name!r}")
        code, ndim = r.unpack("<BB", f"{name!r} dtype")
        if code not in _DTYPES:
            raise CodecError(f"{name!r}: unknown dtype code {code}")
        if ndim > MAX_NDIM:
            raise CodecError(f"{name!r}: {ndim} dims exceed the limit of {MAX_NDIM}")
        shape = r.unpack(f"<{ndim}Q", f"{name!r} shape")
        if any(d > MAX_DIM for d in shape):
            raise CodecError(f"{name!r}: shape {tuple(shape)} has a dimension above the limit of {MAX_DIM}")
        (nbytes,) = r.unpack("<Q", f"{name!r} size")
        np_dtype, _ = _DTYPES[code]
        expected = math.prod(shape) * np_dtype.itemsize
        if nbytes != expected:
            raise CodecError(
                f"{name!r}: declares {nbytes} bytes but shape {tuple(shape)} needs {expected}"
            )
        buf = r.take(nbytes, f"{name!r} data")
        try:  # numpy also refuses shapes whose element count overflows, even when empty
            arr = np.frombuffer(buf, dtype=np_dtype).reshape(shape).copy()
        except ValueError as exc:
            raise CodecError(f"{name!r}: shape {tuple(shape)} cannot be built ({exc})") from exc
        if np_dtype.kind == "b" and arr.view(np.uint8).max(initial=0) > 1:  # one encoding per value
            raise CodecError(f"{name!r}: a bool field holds bytes other than 0 and 1")
        t = torch.from_numpy(arr)
        if code == _CODE_OF[torch.bfloat16]:
            t = t.view(torch.int16).view(torch.bfloat16)
        if not allow_nonfinite and t.is_floating_point() and not torch.isfinite(t).all():
            raise CodecError(f"{name!r} contains NaN or Inf")
        out[name] = t
    if r.pos != len(r.data):
        raise CodecError(f"{len(r.data) - r.pos} trailing bytes after the last field")
    if spec is not None:
        spec.check(out)
    return out


def encode_tensor(t: torch.Tensor) -> bytes:
    """Encode a single tensor (as field ``"x"``)."""
    return encode_tensors({"x": t})


def decode_tensor(data: bytes, **kwargs: object) -> torch.Tensor:
    """Decode a payload written by :func:`encode_tensor`."""
    out = decode_tensors(data, **kwargs)  # type: ignore[arg-type]
    if set(out) != {"x"}:
        raise CodecError(f"expected one field 'x', got {sorted(out)}")
    return out["x"]
