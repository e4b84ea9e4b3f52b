"""Key agreement, key derivation and AEAD for the secure sum, all through ``cryptography``.

* X25519 for both per-round key pairs of a client: ``c`` (encrypts Shamir shares to peers, and
  the end-to-end channel to a ``peer_sum`` target) and ``s`` (agrees pairwise mask seeds).
* HKDF-SHA256 with ``info = length_prefixed(domain, session, round, tag, ...ids)``: every
  derived key is bound to its purpose, session, round, tag and parties (fcp's
  ``compute_session_id``: "lengths are prepended ... so that the encoding is not ambiguous").
* ChaCha20-Poly1305 with the header fields as associated data. Every AEAD key is derived for
  one direction and one message, so the all-zero nonce is never reused under a key.
"""

from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from securefg.errors import AuthenticationError, CodecError
from securefg.federation.channel import length_prefixed
from securefg.protocol.secure_sum.constants import Domain

KEY_BYTES = 32
_NONCE = bytes(12)


def hkdf_sha256(ikm: bytes, *, info: bytes, length: int = KEY_BYTES, salt: bytes | None = None) -> bytes:
    """HKDF-SHA256 (RFC 5869) extract-and-expand."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def binding(domain: Domain, session: bytes, round: int, tag: str, *fields: str) -> bytes:
    """The length-prefixed ``info`` / associated data binding a key or message to its context."""
    return length_prefixed(
        domain.value, session, struct.pack("<q", round), tag.encode(), *(f.encode() for f in fields)
    )


def public_key(raw: bytes) -> X25519PublicKey:
    """Parse a 32-byte X25519 public key, rejecting malformed ones with :class:`CodecError`."""
    if len(raw) != KEY_BYTES:
        raise CodecError(f"an X25519 public key is {KEY_BYTES} bytes, got {len(raw)}")
    return X25519PublicKey.from_public_bytes(raw)


def agree(private: X25519PrivateKey, peer_public: bytes) -> bytes:
    """X25519 shared secret; an all-zero result (a small-order peer key) is rejected."""
    try:
        return private.exchange(public_key(peer_public))
    except ValueError as exc:  # cryptography refuses all-zero shared secrets
        raise AuthenticationError(f"peer public key is invalid for key agreement: {exc}") from exc


def pairwise_seed(
    private: X25519PrivateKey, peer_public: bytes, *, session: bytes, round: int, tag: str, pair: tuple[str, str]
) -> bytes:
    """The 32-byte mask seed both ends of ``pair`` derive from their ``s`` keys."""
    lo, hi = sorted(pair)
    info = binding(Domain.PAIRWISE_MASK, session, round, tag, lo, hi)
    return hkdf_sha256(agree(private, peer_public), info=info)


def directional_aead(
    private: X25519PrivateKey,
    peer_public: bytes,
    *,
    domain: Domain,
    session: bytes,
    round: int,
    tag: str,
    stage: str,
    sender: str,
    receiver: str,
) -> tuple[ChaCha20Poly1305, bytes]:
    """The AEAD for one message ``sender -> receiver`` at ``stage``, and its associated data."""
    ad = binding(domain, session, round, tag, stage, sender, receiver)
    key = hkdf_sha256(agree(private, peer_public), info=ad)
    return ChaCha20Poly1305(key), ad


def seal(aead: ChaCha20Poly1305, associated_data: bytes, plaintext: bytes) -> bytes:
    """Encrypt and authenticate one message under a single-use key."""
    return aead.encrypt(_NONCE, plaintext, associated_data)


def open_sealed(aead: ChaCha20Poly1305, associated_data: bytes, ciphertext: bytes, *, what: str) -> bytes:
    """Decrypt one message, raising :class:`AuthenticationError` naming ``what`` on failure."""
    try:
        return aead.decrypt(_NONCE, ciphertext, associated_data)
    except InvalidTag as exc:
        raise AuthenticationError(f"{what} failed authentication (tampered or misaddressed)") from exc
