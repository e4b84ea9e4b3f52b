"""Bit-packed ring vectors (``packing.py``): exact round trips, one encoding, strict sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import CodecError, InvalidInputError
from securefg.protocol.secure_sum.packing import (
    decode_packed,
    encode_packed,
    pack_bits,
    packed_size,
    unpack_bits,
)


@settings(max_examples=120, deadline=None)
@given(bits=st.integers(1, 64), m=st.integers(0, 300), seed=st.integers(0, 2**32 - 1))
def test_packing_round_trips_and_is_the_little_endian_bit_string(bits: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**64 - 1, size=m, dtype=np.uint64, endpoint=True)
    data = pack_bits(words, bits)
    assert len(data) == packed_size(m, bits) == -(-m * bits // 8)
    reduced = words & np.uint64((1 << bits) - 1)
    assert np.array_equal(unpack_bits(data, bits, m), reduced)
    expected = sum(int(v) << (i * bits) for i, v in enumerate(reduced.tolist()))
    assert int.from_bytes(data, "little") == expected


@pytest.mark.parametrize("bits", [5, 20, 34, 61, 64])
def test_truncated_and_oversized_packings_are_refused(bits: int) -> None:
    data = encode_packed(np.arange(37, dtype=np.uint64), bits)
    assert np.array_equal(decode_packed(data, bits=bits, length=37), np.arange(37) % min(2**bits, 64))
    with pytest.raises(CodecError, match="truncated packing"):
        decode_packed(data[:-1], bits=bits, length=37)
    with pytest.raises(CodecError, match="oversized packing"):
        decode_packed(data + b"\0", bits=bits, length=37)
    with pytest.raises(CodecError, match="shorter than its header"):
        decode_packed(data[:5], bits=bits, length=37)


def test_the_header_must_name_the_ring_and_length_the_receiver_expects() -> None:
    data = encode_packed(np.zeros(10, dtype=np.uint64), 20)
    with pytest.raises(CodecError, match=r"10 elements in Z_2\^20, expected 10 in Z_2\^21"):
        decode_packed(data, bits=21, length=10)
    with pytest.raises(CodecError, match="expected 11 in"):
        decode_packed(data, bits=20, length=11)
    with pytest.raises(CodecError, match="unsupported packed-vector version"):
        decode_packed(b"\x09" + data[1:], bits=20, length=10)


def test_non_zero_padding_bits_are_refused_so_each_vector_has_one_encoding() -> None:
    data = bytearray(pack_bits(np.ones(3, dtype=np.uint64), 5))  # 15 bits: one padding bit
    data[-1] |= 0x80
    with pytest.raises(CodecError, match="padding bits"):
        unpack_bits(bytes(data), 5, 3)


def test_pack_refuses_signed_or_multi_dimensional_input_and_bad_widths() -> None:
    with pytest.raises(InvalidInputError):
        pack_bits(np.zeros(4, dtype=np.int64), 12)
    with pytest.raises(InvalidInputError):
        pack_bits(np.zeros((2, 2), dtype=np.uint64), 12)
    with pytest.raises(InvalidInputError):
        pack_bits(np.zeros(4, dtype=np.uint64), 65)
