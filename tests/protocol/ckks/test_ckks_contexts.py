"""Secret vs public contexts, the encrypted-vector codec, rerandomization, rescale correction."""

from __future__ import annotations

import struct

import pytest
import tenseal as ts
import torch

from securefg.errors import CodecError, InvalidInputError, SecretKeyError
from securefg.protocol.ckks.presets import PRESETS, resolve_preset
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext

PRESET = PRESETS["default"]


@pytest.fixture(scope="module")
def secret() -> SecretContext:
    return SecretContext.generate(PRESET)


@pytest.fixture(scope="module")
def public(secret: SecretContext) -> PublicContext:
    return secret.public_context(galois=False)


def _vector(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_server_side_context_cannot_decrypt(secret: SecretContext, public: PublicContext) -> None:
    x = _vector(100)
    ct = public.load(secret.encrypt(x).to_bytes())
    assert public.is_public() and ct.is_public()
    with pytest.raises(SecretKeyError, match="holds no CKKS secret key and cannot decrypt"):
        public.decrypt(ct)
    # Independently of our wrapper: the bytes the server got carry no secret key at all.
    raw = ts.context_from(public.to_bytes())
    assert raw.is_public() and not raw.has_secret_key()
    with pytest.raises(ValueError, match="doesn't hold a secret_key"):
        ts.ckks_vector_from(raw, secret.encrypt(x).to_bytes()[4 + 1 + 8 + 4 + 4 + 4 :]).decrypt()


def test_public_context_refuses_bytes_that_carry_a_secret_key(secret: SecretContext) -> None:
    with pytest.raises(SecretKeyError, match="received context carries a secret key"):
        PublicContext.from_bytes(secret.secret_bytes(), preset=PRESET)


def test_public_context_rejects_other_parameters(secret: SecretContext) -> None:
    with pytest.raises(CodecError, match="does not match the agreed preset"):
        PublicContext.from_bytes(secret.public_bytes(galois=False), preset=resolve_preset({"preset": "deep"}))


def test_public_context_is_not_a_secret_context_and_vice_versa(secret: SecretContext, public: PublicContext) -> None:
    assert not isinstance(secret, PublicContext) and not isinstance(public, SecretContext)
    assert not secret.is_public()
    assert "hidden" in repr(secret)


def test_galois_keys_only_when_asked(secret: SecretContext, public: PublicContext) -> None:
    assert not public.has_galois_keys()
    assert len(public.to_bytes()) < 3_000_000  # ~1.9 MB measured; with Galois keys ~35 MB


def test_roundtrip_of_a_vector_spanning_three_chunks(secret: SecretContext, public: PublicContext) -> None:
    x = _vector(2 * PRESET.slots + 5)
    ct = public.encrypt(x)
    assert ct.num_chunks == 3 and ct.length == x.numel()
    got = secret.decrypt(secret.load(ct.to_bytes()))
    assert got.shape == x.shape
    assert float((got - x).norm() / x.norm()) < 1e-8


def test_inputs_are_unchanged_by_encryption(public: PublicContext) -> None:
    x = _vector(10)
    before = x.clone()
    public.encrypt(x)
    assert torch.equal(x, before)


def test_rerandomized_ciphertext_differs_bytewise_but_decrypts_to_the_same_values(
    secret: SecretContext, public: PublicContext
) -> None:
    x = _vector(PRESET.slots + 17)
    ct = public.encrypt(x)
    r1, r2 = ct.rerandomize(public), ct.rerandomize(public)
    b0, b1, b2 = ct.to_bytes(), r1.to_bytes(), r2.to_bytes()
    assert len({b0, b1, b2}) == 3
    # No 64-byte window of the original ciphertext body survives in the rerandomized one.
    body0, body1 = b0[64:], b1[64:]
    windows = {body0[i : i + 64] for i in range(0, len(body0) - 64, 4096)}
    assert not any(w in body1 for w in windows)
    for r in (r1, r2):
        assert float((secret.decrypt(secret.load(r.to_bytes())) - x).abs().max()) < 1e-6


def test_scalar_products_are_corrected_for_the_rescale_prime(secret: SecretContext, public: PublicContext) -> None:
    x = torch.full((PRESET.slots,), 1000.0, dtype=torch.float64)
    ct = public.encrypt(x) * 0.5
    assert ct.modulus_primes == 2
    ours = secret.decrypt(secret.load(ct.to_bytes()))
    raw = torch.tensor(ts.ckks_vector_from(ts.context_from(secret.secret_bytes()), ct._chunks[0].serialize()).decrypt())
    # Uncorrected TenSEAL is off by a fixed factor 2^40/q (~1.3e-7); ours divides it out.
    assert abs(float(raw.mean()) / 500.0 - 1) > 5e-8
    assert abs(float(ours.mean()) / 500.0 - 1) < 1e-10


def test_adding_ciphertexts_at_different_levels_is_refused(public: PublicContext) -> None:
    a = public.encrypt(_vector(10))
    with pytest.raises(InvalidInputError, match="after different numbers of multiplications"):
        _ = a + a * 2.0


def test_adding_vectors_of_different_lengths_is_refused(public: PublicContext) -> None:
    with pytest.raises(InvalidInputError, match="lengths 10 and 11"):
        _ = public.encrypt(_vector(10)) + public.encrypt(_vector(11))


def test_encrypting_nan_or_empty_is_refused(public: PublicContext) -> None:
    with pytest.raises(InvalidInputError, match="NaN or Inf"):
        public.encrypt(torch.tensor([1.0, float("nan")], dtype=torch.float64))
    with pytest.raises(InvalidInputError, match="empty vector"):
        public.encrypt(torch.zeros(0, dtype=torch.float64))


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b"XXXX" + b[4:], "bad magic"),
        (lambda b: b[:-10], "truncated"),
        (lambda b: b + b"\x00", "trailing bytes"),
        (lambda b: b[:4] + bytes([9]) + b[5:], "unsupported CKKS vector version 9"),
        (lambda b: b[:5] + struct.pack("<Q", 99999) + b[13:], r"2 chunks cannot hold exactly 99999 values"),
        (lambda b: b[:29] + bytes(64) + b[29 + 64 :], "not a valid ciphertext for this context"),
    ],
)
def test_malformed_encrypted_vectors_are_rejected(public: PublicContext, mutate, match) -> None:  # type: ignore[no-untyped-def]
    data = public.encrypt(_vector(PRESET.slots + 1)).to_bytes()
    with pytest.raises(CodecError, match=match):
        public.load(mutate(data))


def test_unexpected_length_is_rejected(public: PublicContext) -> None:
    data = public.encrypt(_vector(10)).to_bytes()
    with pytest.raises(CodecError, match="has length 10, expected 11"):
        public.load(data, expected_length=11)


def test_ciphertext_from_another_preset_is_rejected(public: PublicContext) -> None:
    deep = SecretContext.generate(resolve_preset({"preset": "deep"}))
    with pytest.raises(CodecError, match="chunk size 8192 does not match this context"):
        public.load(deep.encrypt(_vector(10)).to_bytes())


@pytest.mark.parametrize("n", [1, 7, 8, 300])
def test_windowed_vectors_dot_to_the_same_scalar_with_a_small_chunk(secret: SecretContext, n: int) -> None:
    public = secret.public_context(galois=True)
    a, b = _vector(n, seed=1), _vector(n, seed=2)
    ea, eb = public.encrypt(a, window=True), public.encrypt(b, window=True)
    assert ea.num_chunks == 1 and ea.chunk_size == max(2, 1 << (n - 1).bit_length()) < PRESET.slots
    loaded = public.load(ea.to_bytes(), expected_length=n)  # the wire keeps the window
    assert loaded.chunk_size == ea.chunk_size
    got = secret.decrypt(secret.load(loaded.dot(eb).to_bytes(), expected_length=1))
    assert got.shape == (1,) and abs(float(got[0]) - float(a @ b)) < 1e-4
    full = secret.decrypt(public.encrypt(a).dot(public.encrypt(b)))
    assert abs(float(full[0]) - float(got[0])) < 1e-4


def test_a_window_that_does_not_fit_the_length_is_refused(public: PublicContext) -> None:
    data = bytearray(public.encrypt(_vector(7), window=True).to_bytes())  # window 8 for 7 values
    data[13:17] = struct.pack("<I", 16)  # claims 16 slots: not the window of 7 values
    with pytest.raises(CodecError, match="chunk size 16 does not match"):
        public.load(bytes(data))
    with pytest.raises(CodecError, match="chunk size"):  # a window never spans several chunks
        public.load(public.encrypt(_vector(PRESET.slots + 1), window=True).to_bytes()[:13] + struct.pack("<II", 8, 2))
