"""Shapes the codec must refuse with a CodecError (never numpy's bare ValueError)."""

import struct

import pytest

from securefg.errors import CodecError
from securefg.federation.codec import MAGIC, VERSION, decode_tensors, encode_tensors

MAX_DIM = 2**31  # codec.MAX_DIM, spelled out so this file also runs against older codecs


def _empty_field(shape: tuple[int, ...], *, code: int = 1) -> bytes:
    """A one-field payload declaring ``shape`` and zero data bytes (valid when a dim is 0)."""
    head = MAGIC + struct.pack("<BI", VERSION, 1) + struct.pack("<H", 1) + b"x"
    return head + struct.pack("<BB", code, len(shape)) + struct.pack(f"<{len(shape)}Q", *shape) + struct.pack("<Q", 0)


@pytest.mark.parametrize("shape", [(0, 2**64 - 1), (0, 2**63), (2**63 - 1, 0), (0, MAX_DIM + 1)])
def test_an_empty_tensor_declaring_a_dimension_above_the_limit_is_a_codec_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(CodecError, match=r"'x': shape .* has a dimension above the limit of 2147483648"):
        decode_tensors(_empty_field(shape))


def test_an_empty_tensor_whose_element_count_overflows_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match=r"'x': shape \(0, 2147483648, 2147483648, 2147483648\) cannot be built"):
        decode_tensors(_empty_field((0, MAX_DIM, MAX_DIM, MAX_DIM)))


def test_empty_tensors_within_the_limit_still_round_trip() -> None:
    import torch

    out = decode_tensors(_empty_field((0, MAX_DIM)))["x"]
    assert out.shape == (0, MAX_DIM)
    t = torch.zeros(0, 5)
    assert decode_tensors(encode_tensors({"t": t}))["t"].shape == (0, 5)
