"""Fuzz CKKS blobs: encrypted vectors (encrypted_vector.py, ``context.load``), public and secret
contexts, and the byte lists CKKS payloads travel in (the CKKS relay's uploads and bundles, the
similarity exchange's permuted products).

Strategies: real encryptions (default preset, N=8192) of random vectors of 1..5000 values, full-slot
and windowed, then mutated (TenSEAL/SEAL protobuf bytes flipped, the header's length, chunk size and
count set to edge integers, truncation, insertion); hand-built headers with edge fields and short
bodies; arbitrary bytes; a real public context mutated. Properties: ``load`` returns a vector or
raises ``CodecError``; a loaded vector decrypts or raises a typed error; a vector round-trips
through bytes to within CKKS noise; the context parsers raise ``CodecError``/``SecretKeyError``.
"""

from __future__ import annotations

import functools
import struct

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import CodecError, SecureFGError
from securefg.federation.codec import decode_tensor
from securefg.protocol.ckks.encrypted_vector import MAGIC, VERSION
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import PRESETS
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.ckks.similarity import release_products
from securefg.protocol.relay.blob_list import pack_blobs

from .strategies import EDGE_INTS, FUZZ, mutated, parse_or_typed, peak_traced_bytes

PRESET = PRESETS["default"]
SLOTS = PRESET.slots


@functools.cache
def secret() -> SecretContext:
    return SecretContext.generate(PRESET)


@functools.cache
def public_bytes() -> bytes:
    return secret().public_bytes(galois=False)


@functools.cache
def public() -> PublicContext:
    return PublicContext.from_bytes(public_bytes(), preset=PRESET)


@functools.cache
def encrypted(length: int, window: bool) -> bytes:
    """One encryption per (length, window): encrypting is the slow part, mutating is cheap."""
    g = torch.Generator().manual_seed(length)
    return public().encrypt(torch.randn(length, generator=g, dtype=torch.float64), window=window).to_bytes()


lengths = st.sampled_from([1, 2, 3, 8, 100, SLOTS - 1, SLOTS, SLOTS + 1, 5000])
blobs = st.builds(encrypted, lengths, st.booleans())


@FUZZ
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=2 * SLOTS + 3).map(
    lambda v: torch.tensor(v, dtype=torch.float64)), st.booleans())
def test_any_vector_round_trips_through_bytes_within_ckks_noise(vec, window):
    data = public().encrypt(vec, window=window).to_bytes()
    got = secret().decrypt(public().load(data, expected_length=vec.numel()))
    assert got.shape == vec.shape
    assert torch.allclose(got, vec, atol=1e-3, rtol=1e-6)


def _load_and_decrypt(data: bytes) -> torch.Tensor:
    vec = public().load(data)
    return secret().decrypt(vec)


@FUZZ
@given(blobs.flatmap(mutated))
def test_mutated_blobs_load_or_raise_codec_error_and_decrypt_or_raise_typed(wire):
    vec = parse_or_typed(public().load, wire, errors=CodecError)
    if vec is not None:  # a mutation SEAL cannot detect (a coefficient changed): garbage, but no crash
        parse_or_typed(secret().decrypt, vec, errors=SecureFGError)


def _header(length: int, chunk_size: int, count: int) -> bytes:
    return struct.pack("<4sBQII", MAGIC, VERSION, length % 2**64, chunk_size % 2**32, count % 2**32)


@FUZZ
@given(st.sampled_from(EDGE_INTS + (SLOTS, SLOTS + 1)), st.sampled_from(EDGE_INTS + (SLOTS, 4, 2)),
       st.sampled_from(EDGE_INTS + (2**32 - 1,)), st.binary(max_size=64))
@example(2**64 - 1, SLOTS, 2**32 - 1, b"")  # ~2^52 chunks declared, none sent
@example(1, 1, 1, struct.pack("<I", 2**32 - 1))  # a chunk of 4 GiB declared
def test_declared_lengths_and_counts_never_crash_or_allocate_for_the_declaration(length, chunk_size, count, body):
    data = _header(length, chunk_size, count) + body
    peak = peak_traced_bytes(lambda: parse_or_typed(public().load, data, errors=CodecError))
    assert peak < (1 << 20)


@FUZZ
@given(st.binary(max_size=200))
@example(MAGIC)
def test_arbitrary_bytes_as_an_encrypted_vector_raise_codec_error(data):
    assert parse_or_typed(public().load, data, errors=CodecError) is None


@FUZZ
@given(blobs, st.integers(1, 6000))
def test_a_vector_of_another_length_than_expected_is_refused(data, expected):
    got = parse_or_typed(public().load, data, expected_length=expected, errors=CodecError)
    assert got is None or got.length == expected


# ------------------------------------------------------------------------------ contexts
@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes_as_a_context_raise_codec_error(data):
    assert parse_or_typed(PublicContext.from_bytes, data, preset=PRESET, errors=CodecError) is None
    assert parse_or_typed(SecretContext.from_secret_bytes, data, preset=PRESET, errors=CodecError) is None


@FUZZ
@given(st.deferred(lambda: mutated(public_bytes(), max_edits=2)))
def test_a_mutated_public_context_parses_or_raises_a_typed_error(wire):
    ctx = parse_or_typed(PublicContext.from_bytes, wire, preset=PRESET, errors=SecureFGError)
    if ctx is not None:
        assert ctx.is_public()


# --------------------------------------------------------------- lists of CKKS payloads



# found by this suite: a blob list of fewer items raised a bare ValueError when unpacked
@pytest.mark.parametrize("items", [[], [b"[]"]])
def test_a_ckks_relay_upload_with_too_few_items_raises_a_typed_error(items):
    from securefg.protocol.relay.ckks_relay import parse_uploads

    with pytest.raises(SecureFGError):
        parse_uploads(public(), {"client/0": pack_blobs(items)}, tag="t")


def test_an_empty_ckks_relay_bundle_raises_a_typed_error():
    from securefg.protocol.relay.ckks_relay import decrypt_bundle

    with pytest.raises(SecureFGError):
        decrypt_bundle(secret(), pack_blobs([]), own_layout=b"[]", max_items=3, pid="client/0")


@functools.cache
def scalar(value: float) -> bytes:
    return public().encrypt(torch.tensor([value], dtype=torch.float64)).to_bytes()


scalars = st.lists(st.sampled_from([0.0, 1.0, -0.5, 3.25]).map(scalar), min_size=1, max_size=4)


@FUZZ
@given(scalars)
def test_the_key_holder_releases_exactly_the_products_it_was_sent(items):
    out = decode_tensor(release_products(secret(), pack_blobs(items), count=len(items), lift2=1.0,
                                         noise=OutputNoise("none")))
    assert out.shape == (len(items),)


@FUZZ
@given(st.one_of(
    scalars.flatmap(lambda items: st.tuples(st.just(len(items)), mutated(pack_blobs(items)))),
    st.tuples(st.integers(0, 4), st.lists(st.sampled_from([0.0, 1.0]).map(scalar), max_size=5).map(pack_blobs)),
))
@example((3, pack_blobs([])))  # found by this suite: torch.cat([]) raised a bare ValueError
def test_a_malformed_similarity_request_is_released_or_refused_with_a_typed_error(case):
    count, payload = case
    parse_or_typed(release_products, secret(), payload, count=count, lift2=1.0, noise=OutputNoise("none"),
                   errors=SecureFGError)


@pytest.mark.parametrize("items", [0, 1, 2])
def test_a_similarity_request_with_fewer_products_than_pairs_is_a_codec_error(items):
    # found by the fuzz suite: an empty request made the key holder crash in torch.cat
    with pytest.raises(CodecError, match=f"holds {items} encrypted products, expected 3"):
        release_products(secret(), pack_blobs([scalar(1.0)] * items), count=3, lift2=1.0, noise=OutputNoise("none"))
