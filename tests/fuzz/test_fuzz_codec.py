"""Fuzz the tensor codec (securefg/federation/codec.py): received payloads and TensorSpec checks.

Strategies: arbitrary bytes; valid encodings of hypothesis-built tensors (every dtype the codec
carries, 0..4 dims, empty dims included) then mutated; hand-built headers whose dims and byte
count are edge integers (a declared size far beyond the bytes sent). Round trip: any named
tensors decode to equal tensors under their own spec.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import CodecError
from securefg.federation.codec import (
    MAGIC,
    MAX_NDIM,
    VERSION,
    TensorSpec,
    decode_tensor,
    decode_tensors,
    encode_tensors,
)

from .strategies import EDGE_INTS, FUZZ, mutated, parse_or_typed, peak_traced_bytes

_NUMPY_OF = {
    torch.float32: "<f4", torch.float64: "<f8", torch.float16: "<f2", torch.int64: "<i8", torch.int32: "<i4",
    torch.int16: "<i2", torch.int8: "i1", torch.uint8: "u1", torch.bool: "?", torch.uint32: "<u4",
    torch.uint64: "<u8", torch.bfloat16: "<u2",
}
_CODE_OF = {dt: code for code, dt in enumerate(_NUMPY_OF, start=1)}  # the codec's table order


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    """A tensor of any codec dtype with 0..4 dims (0-sized dims included) and arbitrary bits."""
    dtype = draw(st.sampled_from(list(_NUMPY_OF)))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
    count = int(np.prod(shape, dtype=np.int64))
    itemsize = np.dtype(_NUMPY_OF[dtype]).itemsize
    raw = draw(st.binary(min_size=count * itemsize, max_size=count * itemsize))
    arr = np.frombuffer(raw, dtype=_NUMPY_OF[dtype]).copy()
    if dtype == torch.bool:
        arr = arr.view(np.uint8) & 1  # only 0/1 are bools
        return torch.from_numpy(arr.astype(bool)).reshape(shape)
    t = torch.from_numpy(arr)
    if dtype == torch.bfloat16:
        t = t.view(torch.int16).view(torch.bfloat16)
    return t.reshape(shape)


named_tensors = st.dictionaries(st.text(max_size=12), tensors(), max_size=4)


def _finite(ts: dict[str, torch.Tensor]) -> bool:
    return all(not t.is_floating_point() or bool(torch.isfinite(t).all()) for t in ts.values())


def _header(name: bytes, code: int, dims: tuple[int, ...], nbytes: int, count: int = 1) -> bytes:
    return (MAGIC + struct.pack("<BI", VERSION, count) + struct.pack("<H", len(name)) + name
            + struct.pack("<BB", code, len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<Q", nbytes))


@FUZZ
@given(named_tensors)
def test_any_named_tensors_round_trip_exactly(ts):
    out = decode_tensors(encode_tensors(ts), spec=TensorSpec.like(ts), allow_nonfinite=True)
    assert list(out) == list(ts)
    for k, t in ts.items():
        assert out[k].dtype == t.dtype and out[k].shape == t.shape
        # compare bit patterns: NaN != NaN, and -0.0 == 0.0 would hide a sign flip
        bits = (lambda x: x.view(torch.int16)) if t.dtype == torch.bfloat16 else (lambda x: x)
        assert bits(out[k]).reshape(-1).numpy().tobytes() == bits(t).reshape(-1).numpy().tobytes()


@FUZZ
@given(named_tensors)
def test_non_finite_floats_are_refused_unless_allowed(ts):
    data = encode_tensors(ts)
    got = parse_or_typed(decode_tensors, data, errors=CodecError)
    assert (got is not None) == _finite(ts)


@FUZZ
@given(st.binary(max_size=256))
@example(b"SFGT\x01\x01\x00\x00\x00")  # one field declared, none sent
def test_arbitrary_bytes_parse_or_raise_codec_error(data):
    parse_or_typed(decode_tensors, data, errors=CodecError)
    parse_or_typed(decode_tensor, data, errors=CodecError)


@FUZZ
@given(st.data())
def test_mutated_payloads_parse_or_raise_codec_error(data):
    ts = data.draw(named_tensors)
    wire = data.draw(mutated(encode_tensors(ts)))
    got = parse_or_typed(decode_tensors, wire, errors=CodecError, allow_nonfinite=True)
    if got is not None:  # whatever parses must re-encode to exactly the bytes received
        assert encode_tensors(got) == wire
        assert all(t.view(torch.uint8).max() <= 1 for t in got.values() if t.dtype == torch.bool and t.numel())


@FUZZ
@given(st.data())
def test_spec_mismatches_raise_codec_error(data):
    ts = data.draw(named_tensors)
    other = data.draw(named_tensors)
    spec = TensorSpec.like(other)
    got = parse_or_typed(decode_tensors, encode_tensors(ts), spec=spec, errors=CodecError, allow_nonfinite=True)
    if got is not None:
        spec.check(got)  # accepted only if it matches the spec


@FUZZ
@given(
    dtype=st.sampled_from(list(_NUMPY_OF)),
    dims=st.lists(st.sampled_from(EDGE_INTS), min_size=0, max_size=MAX_NDIM),
    nbytes=st.sampled_from(EDGE_INTS),
    body=st.binary(max_size=64),
)
@example(dtype=torch.float32, dims=[0, 2**64 - 1], nbytes=0, body=b"")  # issue 38: bare ValueError from reshape
@example(dtype=torch.float32, dims=[2**63, 0], nbytes=0, body=b"")
@example(dtype=torch.uint8, dims=[2**32, 2**32], nbytes=0, body=b"")  # product wraps in 64 bits
def test_declared_dims_and_sizes_never_crash_or_allocate_beyond_the_payload(dtype, dims, nbytes, body):
    data = _header(b"x", _CODE_OF[dtype], tuple(dims), nbytes) + body
    peak = peak_traced_bytes(lambda: parse_or_typed(decode_tensors, data, errors=CodecError))
    assert peak < 64 * len(data) + (1 << 20)


@pytest.mark.parametrize("byte", [2, 255])
def test_a_bool_byte_other_than_0_or_1_is_refused(byte):
    # found by the fuzz suite: such a byte decoded to a bool tensor whose raw byte is 2 (torch's
    # bool ops assume 0/1), and two different payloads decoded to equal tensors
    data = bytearray(encode_tensors({"m": torch.tensor([True, False, True])}))
    data[-2] = byte
    with pytest.raises(CodecError, match="'m': a bool field holds bytes other than 0 and 1"):
        decode_tensors(bytes(data))


@pytest.mark.parametrize("count", [2**32 - 1, 2**31])
def test_a_huge_field_count_with_no_fields_is_refused_quickly(count):
    data = MAGIC + struct.pack("<BI", VERSION, count)
    with pytest.raises(CodecError, match="truncated"):
        decode_tensors(data)
