"""Known answers for key agreement and key derivation, and the AEAD binding (``crypto.py``)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import AuthenticationError, CodecError
from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum.constants import Domain


def test_hkdf_sha256_matches_rfc5869_test_case_1() -> None:
    okm = crypto.hkdf_sha256(
        bytes.fromhex("0b" * 22), salt=bytes(range(13)), info=bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"), length=42
    )
    assert okm == bytes.fromhex(
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


def test_x25519_agreement_matches_rfc7748_section_6_1() -> None:
    alice = X25519PrivateKey.from_private_bytes(
        bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    )
    bob_pk = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    assert crypto.agree(alice, bob_pk) == bytes.fromhex(
        "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
    )


def test_binding_is_length_prefixed_so_field_boundaries_cannot_shift() -> None:
    got = crypto.binding(Domain.PAIRWISE_MASK, b"S", 3, "t", "ab", "c")
    assert got == (
        len(Domain.PAIRWISE_MASK.value).to_bytes(4, "little") + Domain.PAIRWISE_MASK.value
        + b"\x01\x00\x00\x00S" + b"\x08\x00\x00\x00" + (3).to_bytes(8, "little")
        + b"\x01\x00\x00\x00t" + b"\x02\x00\x00\x00ab" + b"\x01\x00\x00\x00c"
    )
    assert got != crypto.binding(Domain.PAIRWISE_MASK, b"S", 3, "t", "a", "bc")


def test_pairwise_seed_is_symmetric_and_bound_to_round_and_tag() -> None:
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    apk, bpk = (k.public_key().public_bytes_raw() for k in (a, b))
    kw = {"session": b"s", "round": 1, "tag": "t"}
    s_ab = crypto.pairwise_seed(a, bpk, pair=("client/0", "client/1"), **kw)  # type: ignore[arg-type]
    s_ba = crypto.pairwise_seed(b, apk, pair=("client/1", "client/0"), **kw)  # type: ignore[arg-type]
    assert s_ab == s_ba and len(s_ab) == 32
    assert s_ab != crypto.pairwise_seed(a, bpk, session=b"s", round=2, tag="t", pair=("client/0", "client/1"))
    assert s_ab != crypto.pairwise_seed(a, bpk, session=b"s", round=1, tag="u", pair=("client/0", "client/1"))


def test_directional_aead_rejects_a_ciphertext_moved_to_the_other_direction() -> None:
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    bpk, apk = b.public_key().public_bytes_raw(), a.public_key().public_bytes_raw()
    kw = {"domain": Domain.SHARE_AEAD, "session": b"s", "round": 0, "tag": "t", "stage": "x"}
    aead, ad = crypto.directional_aead(a, bpk, sender="A", receiver="B", **kw)  # type: ignore[arg-type]
    ct = crypto.seal(aead, ad, b"share")
    ok, ok_ad = crypto.directional_aead(b, apk, sender="A", receiver="B", **kw)  # type: ignore[arg-type]
    assert crypto.open_sealed(ok, ok_ad, ct, what="share") == b"share"
    back, back_ad = crypto.directional_aead(b, apk, sender="B", receiver="A", **kw)  # type: ignore[arg-type]
    with pytest.raises(AuthenticationError, match="share failed authentication"):
        crypto.open_sealed(back, back_ad, ct, what="share")


def test_small_order_public_key_is_refused_for_key_agreement() -> None:
    with pytest.raises(AuthenticationError, match="invalid for key agreement"):
        crypto.agree(X25519PrivateKey.generate(), bytes(32))


def test_public_key_of_the_wrong_size_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="32 bytes, got 31"):
        crypto.public_key(bytes(31))
