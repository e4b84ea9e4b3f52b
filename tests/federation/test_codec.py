import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from securefg.errors import CodecError
from securefg.federation.codec import TensorSpec, decode_tensor, decode_tensors, encode_tensor, encode_tensors

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=3), min_size=0, max_size=4),
    dtype_idx=st.integers(0, len(DTYPES) - 1),
)
def test_round_trip_preserves_names_dtypes_shapes_and_values(shapes, dtype_idx):
    dtype = DTYPES[dtype_idx]
    g = torch.Generator().manual_seed(0)
    tensors = {f"t{i}": (torch.rand(s, generator=g) * 100).to(dtype) for i, s in enumerate(shapes)}
    out = decode_tensors(encode_tensors(tensors), spec=TensorSpec.like(tensors))
    assert list(out) == list(tensors)
    for k in tensors:
        assert out[k].dtype == tensors[k].dtype and torch.equal(out[k], tensors[k])


def test_decoded_tensor_does_not_share_memory_with_sender():
    x = torch.zeros(4)
    y = decode_tensor(encode_tensor(x))
    y += 1
    assert torch.equal(x, torch.zeros(4))


def test_rejects_bad_magic():
    with pytest.raises(CodecError, match="bad magic"):
        decode_tensors(b"XXXX" + encode_tensor(torch.ones(2))[4:])


def test_rejects_truncated_payload():
    data = encode_tensor(torch.ones(10))
    with pytest.raises(CodecError, match="truncated"):
        decode_tensors(data[:-3])


def test_rejects_trailing_bytes():
    with pytest.raises(CodecError, match="trailing bytes"):
        decode_tensors(encode_tensor(torch.ones(2)) + b"\0")


def test_rejects_size_that_does_not_match_shape():
    data = bytearray(encode_tensor(torch.ones(3, dtype=torch.float32)))
    # nbytes field sits right before the 12 data bytes
    struct.pack_into("<Q", data, len(data) - 12 - 8, 16)
    with pytest.raises(CodecError, match="declares 16 bytes"):
        decode_tensors(bytes(data))


def test_rejects_unknown_dtype_code():
    data = bytearray(encode_tensor(torch.ones(1)))
    pos = 4 + 5 + 2 + 1  # magic, header, name length, name "x"
    data[pos] = 99
    with pytest.raises(CodecError, match="unknown dtype code 99"):
        decode_tensors(bytes(data))


def test_rejects_nan_unless_allowed():
    data = encode_tensor(torch.tensor([1.0, float("nan")]))
    with pytest.raises(CodecError, match="NaN or Inf"):
        decode_tensors(data)
    assert decode_tensors(data, allow_nonfinite=True)["x"].isnan().any()


def test_rejects_payload_above_size_limit():
    with pytest.raises(CodecError, match="exceeds the limit"):
        decode_tensors(encode_tensor(torch.ones(100)), max_bytes=50)


def test_spec_mismatch_names_every_problem():
    data = encode_tensors({"a": torch.ones(2, 3), "b": torch.ones(2)})
    spec = TensorSpec({"a": (torch.float32, (3, 2)), "c": (torch.float32, (2,))})
    with pytest.raises(CodecError, match=r"missing fields \['c'\].*unexpected fields \['b'\].*a: shape"):
        decode_tensors(data, spec=spec)


def test_rejects_non_tensor_values_on_encode():
    with pytest.raises(CodecError, match="not a torch.Tensor"):
        encode_tensors({"a": [1, 2]})  # type: ignore[dict-item]
