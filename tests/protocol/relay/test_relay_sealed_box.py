"""Sealed boxes, padding, the blob-list codec and the CSPRNG shuffle."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import AuthenticationError, CodecError
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.padding import frame, padded_size, unframe
from securefg.protocol.relay.sealed_box import OVERHEAD, SealingKey, seal
from securefg.protocol.relay.shuffle import secure_permutation, secure_shuffle

CTX = b"session|round|tag|recipient"


def test_a_box_opens_for_its_recipient_under_its_context() -> None:
    key = SealingKey()
    box = seal(key.public_bytes, b"model bytes", context=CTX)
    assert len(box) == len(b"model bytes") + OVERHEAD
    assert b"model bytes" not in box
    assert key.open(box, context=CTX) == b"model bytes"


def test_sealing_is_randomized() -> None:
    key = SealingKey()
    assert seal(key.public_bytes, b"x", context=CTX) != seal(key.public_bytes, b"x", context=CTX)


@pytest.mark.parametrize("position", [0, 5, 31, 32, 40, -1])
def test_flipping_any_byte_raises_a_typed_error(position: int) -> None:
    key = SealingKey()
    box = bytearray(seal(key.public_bytes, b"payload of some length", context=CTX))
    box[position] ^= 0x01
    with pytest.raises(AuthenticationError, match="sealed item failed authentication|invalid ephemeral key"):
        key.open(bytes(box), context=CTX)


def test_a_box_does_not_open_under_another_context_or_key() -> None:
    key, other = SealingKey(), SealingKey()
    box = seal(key.public_bytes, b"x", context=CTX)
    with pytest.raises(AuthenticationError, match="replayed from another round/tag"):
        key.open(box, context=CTX + b"!")
    with pytest.raises(AuthenticationError, match="sealed to another recipient"):
        other.open(box, context=CTX)


def test_truncated_box_is_rejected() -> None:
    with pytest.raises(AuthenticationError, match="too short"):
        SealingKey().open(b"\x00" * (OVERHEAD - 1), context=CTX)


def test_pregenerated_key_for_deterministic_fixtures() -> None:
    raw = X25519PrivateKey.from_private_bytes(bytes(range(32)))
    assert SealingKey(raw).public_bytes == raw.public_key().public_bytes_raw()


def test_padding_buckets_hide_lengths() -> None:
    assert padded_size(10, "pow2") == padded_size(40, "pow2") == 64
    assert padded_size(100, "pow2") == 128
    assert padded_size(100, 256) == 256
    assert padded_size(100, "none") == 108
    for item in (b"", b"a", bytes(300)):
        assert unframe(frame(item, "pow2")) == item


def test_non_zero_padding_or_bad_length_is_rejected() -> None:
    framed = bytearray(frame(b"abc", "pow2"))
    framed[-1] = 1
    with pytest.raises(AuthenticationError, match="non-zero padding"):
        unframe(bytes(framed))
    with pytest.raises(AuthenticationError, match="declares 1000 bytes"):
        unframe((1000).to_bytes(8, "little") + b"abc")


def test_blob_list_roundtrip_and_rejections() -> None:
    blobs = [b"", b"a", bytes(1000)]
    assert unpack_blobs(pack_blobs(blobs)) == blobs
    data = pack_blobs(blobs)
    with pytest.raises(CodecError, match="bad magic"):
        unpack_blobs(b"NOPE" + data[4:])
    with pytest.raises(CodecError, match="truncated"):
        unpack_blobs(data[:-1])
    with pytest.raises(CodecError, match="trailing bytes"):
        unpack_blobs(data + b"x")
    with pytest.raises(CodecError, match="declares 3 items, more than the 2 allowed"):
        unpack_blobs(data, max_count=2)


def test_secure_permutation_is_a_permutation_and_leaves_input_alone() -> None:
    items = list(range(50))
    perm = secure_permutation(50)
    assert sorted(perm) == items
    shuffled = secure_shuffle(items)
    assert sorted(shuffled) == items and items == list(range(50))
    # 50! orderings: two draws coincide with probability ~1e-64
    assert secure_permutation(50) != secure_permutation(50)
