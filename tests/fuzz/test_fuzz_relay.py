"""Fuzz the relay's byte formats: blob lists (blob_list.py), sealed boxes (sealed_box.py), frames
(padding.py) and the CKKS relay's tensor layout header (ckks_relay.py).

Strategies: lists of byte strings, packed then mutated (counts and item lengths set to edge
integers, truncation, insertion); arbitrary bytes; boxes sealed in every mode (anonymous, psk,
sender-authenticated) with arbitrary content and context, then mutated; arbitrary 32-byte strings
as a peer's published public key (low-order points included); JSON documents as layout headers.
Properties: a parser returns a value or raises its typed error (``CodecError`` for lists and
layouts, ``AuthenticationError`` for boxes and frames); a box opens exactly to what was sealed,
and only under its own context, mode and recipient.

Crashes it found are regression tests here (low-order keys, deeply nested layout headers).
"""

from __future__ import annotations

import json
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import AuthenticationError, CodecError, SecureFGError
from securefg.protocol.relay.blob_list import MAGIC, pack_blobs, unpack_blobs
from securefg.protocol.relay.ckks_relay import decode_layout
from securefg.protocol.relay.padding import frame, unframe
from securefg.protocol.relay.sealed_box import PUBLIC_KEY_BYTES, SealingKey, seal

from .strategies import EDGE_INTS, FUZZ, mutated, parse_or_typed, peak_traced_bytes

_RECIPIENT = SealingKey(X25519PrivateKey.from_private_bytes(bytes(range(32))))
_SENDER = SealingKey(X25519PrivateKey.from_private_bytes(bytes(range(32, 64))))
_PSK = bytes(range(64, 96))

#: Public keys on the X25519 curve's small subgroup (RFC 7748 §6.1 / libsodium's blocklist): a
#: key agreement with any of them yields the all-zero secret, which ``cryptography`` refuses.
LOW_ORDER_POINTS = (
    bytes(32),
    (1).to_bytes(32, "little"),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    (2**255 - 19 - 1).to_bytes(32, "little"),
    (2**255 - 19).to_bytes(32, "little"),
)

blob_lists = st.lists(st.binary(max_size=40), max_size=6)


# ------------------------------------------------------------------------------ blob lists
@FUZZ
@given(blob_lists)
def test_any_blob_list_round_trips(blobs):
    assert unpack_blobs(pack_blobs(blobs)) == blobs


@FUZZ
@given(blob_lists.flatmap(lambda b: mutated(pack_blobs(b))))
@example(MAGIC + struct.pack("<I", 2**20))  # a million items declared, none sent
@example(MAGIC + struct.pack("<II", 1, 2**32 - 1))  # one item of 4 GiB declared
def test_mutated_blob_lists_parse_or_raise_codec_error(wire):
    peak = peak_traced_bytes(lambda: parse_or_typed(unpack_blobs, wire, errors=CodecError))
    assert peak < 64 * len(wire) + (1 << 16)
    got = parse_or_typed(unpack_blobs, wire, errors=CodecError)
    if got is not None:
        assert pack_blobs(got) == wire


@FUZZ
@given(st.binary(max_size=100), st.sampled_from(EDGE_INTS[:9]))
def test_arbitrary_bytes_as_a_blob_list_parse_or_raise_codec_error(data, max_count):
    got = parse_or_typed(unpack_blobs, data, max_count=max_count, errors=CodecError)
    if got is not None:
        assert len(got) <= max_count


# ------------------------------------------------------------------------------ sealed boxes
_MODES = ("anonymous", "psk", "auth", "auth+psk")


def _seal(mode: str, plaintext: bytes, context: bytes) -> bytes:
    psk = _PSK if "psk" in mode else None
    if mode.startswith("auth"):
        return _SENDER.seal_from(_RECIPIENT.public_bytes, plaintext, context=context, psk=psk)
    return seal(_RECIPIENT.public_bytes, plaintext, context=context, psk=psk)


def _open(mode: str, box: bytes, context: bytes) -> bytes:
    return _RECIPIENT.open(box, context=context, sender_public=_SENDER.public_bytes if mode.startswith("auth") else None,
                           psk=_PSK if "psk" in mode else None)


@FUZZ
@given(st.sampled_from(_MODES), st.binary(max_size=200), st.binary(max_size=40))
def test_a_sealed_box_opens_to_its_content_in_its_own_mode_only(mode, plaintext, context):
    box = _seal(mode, plaintext, context)
    assert _open(mode, box, context) == plaintext
    for other in _MODES:
        if other != mode:
            assert parse_or_typed(_open, other, box, context, errors=AuthenticationError) is None
    assert parse_or_typed(_open, mode, box, context + b"x", errors=AuthenticationError) is None


@FUZZ
@given(st.data())
def test_a_mutated_box_is_refused_with_authentication_error(data):
    mode = data.draw(st.sampled_from(_MODES))
    box = _seal(mode, data.draw(st.binary(max_size=100)), b"ctx")
    bad = data.draw(mutated(box))
    got = parse_or_typed(_open, mode, bad, b"ctx", errors=AuthenticationError)
    assert got is None or bad == box


@FUZZ
@given(st.sampled_from(_MODES), st.binary(max_size=120))
@example("anonymous", LOW_ORDER_POINTS[0] + bytes(16))
@example("auth", LOW_ORDER_POINTS[2] + bytes(40))
def test_arbitrary_bytes_as_a_box_are_refused_with_authentication_error(mode, data):
    assert parse_or_typed(_open, mode, data, b"ctx", errors=AuthenticationError) is None


def _seal_to(public: bytes, mode: str) -> bytes:
    """Seal to a public key a peer published (the relay only checks its length)."""
    if mode == "auth":
        return _SENDER.seal_from(public, b"item", context=b"ctx")
    return seal(public, b"item", context=b"ctx", psk=_PSK if mode == "psk" else None)



@FUZZ
@given(st.binary(min_size=PUBLIC_KEY_BYTES, max_size=PUBLIC_KEY_BYTES), st.sampled_from(("anonymous", "psk", "auth")))
def test_sealing_to_any_32_byte_key_that_is_not_low_order_works(public, mode):
    try:
        box = _seal_to(public, mode)
    except AuthenticationError:  # a low-order point: refused, typed (found by this suite)
        assert public in LOW_ORDER_POINTS or int.from_bytes(public, "little") % (2**255) in {
            int.from_bytes(p, "little") for p in LOW_ORDER_POINTS}
        return
    assert len(box) == PUBLIC_KEY_BYTES + len(b"item") + 16


# found by this suite: a bare ValueError from X25519 before the fix
@pytest.mark.parametrize(("point", "mode"), [(0, "anonymous"), (2, "psk"), (4, "auth")])
def test_sealing_to_a_low_order_public_key_raises_a_typed_error(point, mode):
    with pytest.raises(SecureFGError, match="key"):
        _seal_to(LOW_ORDER_POINTS[point], mode)


# ------------------------------------------------------------------------------------ frames
@FUZZ
@given(st.binary(max_size=300), st.sampled_from(["pow2", "none", 16, 64, 1000]))
def test_any_item_frames_and_unframes(item, policy):
    assert unframe(frame(item, policy)) == item


@FUZZ
@given(st.binary(max_size=200))
@example(struct.pack("<Q", 2**64 - 1))
def test_arbitrary_bytes_as_a_frame_unframe_or_raise_authentication_error(data):
    got = parse_or_typed(unframe, data, errors=AuthenticationError)
    if got is not None:
        assert data[:8] == struct.pack("<Q", len(got)) and not any(data[8 + len(got):])


# ------------------------------------------------------------------------ CKKS relay layouts
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)
layout_rows = st.lists(
    st.tuples(st.text(max_size=8), st.sampled_from(["float16", "float32", "float64"]),
              st.lists(st.integers(0, 6), max_size=3)), min_size=1, max_size=4)


@FUZZ
@given(layout_rows)
def test_a_layout_header_parses_to_its_fields(rows):
    layout = decode_layout(json.dumps([[n, d, s] for n, d, s in rows]).encode())
    assert [(n, list(s)) for n, s, _ in layout.fields] == [(n, s) for n, _, s in rows]


@FUZZ
@given(st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    layout_rows.flatmap(lambda rows: mutated(json.dumps([[n, d, s] for n, d, s in rows]).encode())),
    st.binary(max_size=80),
))
@example(b"[]")
@example(b'[["w", "float32", [1e400]]]')
@example(b'[["w", "float32", [99999999999999999999999]]]')
def test_any_bytes_as_a_layout_header_parse_or_raise_codec_error(data):
    parse_or_typed(decode_layout, data, errors=CodecError)


# found by this suite: json.loads raised a bare RecursionError before the fix
def test_a_deeply_nested_layout_header_raises_codec_error():
    with pytest.raises(CodecError):
        decode_layout(b"[" * 100_000 + b"]" * 100_000)
