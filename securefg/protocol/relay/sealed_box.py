"""Anonymous sealed boxes: X25519 (ephemeral-static) + HKDF-SHA256 + ChaCha20-Poly1305.

The shape of libsodium's ``crypto_box_seal``, built from ``cryptography`` primitives: the sender
draws a fresh X25519 key pair per box, derives a one-time key and nonce from the shared secret
with HKDF (``info`` binds both public keys and the caller's context), and encrypts with an AEAD
whose associated data binds the same. Only the holder of the recipient's private key can open a
box; the box does not say who sealed it (anonymity towards the recipient is what shuffling needs);
any change to a byte, the context or the recipient makes opening fail with
:class:`~securefg.errors.AuthenticationError`.

Box layout: ``ephemeral_public (32) | ciphertext || tag (16)``.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from securefg.errors import AuthenticationError, CodecError
from securefg.federation.channel import length_prefixed

_LABEL = b"securefg/sealed-box/v1"
PUBLIC_KEY_BYTES = 32
OVERHEAD = PUBLIC_KEY_BYTES + 16


def _derive(shared: bytes, eph_pub: bytes, recipient_pub: bytes, context: bytes) -> tuple[bytes, bytes]:
    info = length_prefixed(_LABEL, eph_pub, recipient_pub, context)
    okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=None, info=info).derive(shared)
    return okm[:32], okm[32:]


def seal(recipient_public: bytes, plaintext: bytes, *, context: bytes) -> bytes:
    """Seal ``plaintext`` so that only the owner of ``recipient_public`` can open it.

    Args:
        recipient_public (bytes): The recipient's raw 32-byte X25519 public key.
        plaintext (bytes): The content.
        context (bytes): Binding data (session, round, tag, recipient, purpose), length-prefixed
            by the caller; the box opens only under the same ``context``.
    """
    if len(recipient_public) != PUBLIC_KEY_BYTES:
        raise CodecError(f"X25519 public key must be {PUBLIC_KEY_BYTES} bytes, got {len(recipient_public)}")
    eph = X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes_raw()
    shared = eph.exchange(X25519PublicKey.from_public_bytes(recipient_public))
    key, nonce = _derive(shared, eph_pub, recipient_public, context)
    aad = length_prefixed(_LABEL, eph_pub, recipient_public, context)
    return eph_pub + ChaCha20Poly1305(key).encrypt(nonce, plaintext, aad)


class SealingKey:
    """A party's X25519 key pair for receiving sealed boxes. The private half never leaves it.

    Args:
        private_key (X25519PrivateKey, optional): For tests with pregenerated keys.
            (default: a fresh key from the OS CSPRNG)
    """

    __slots__ = ("_private", "public_bytes")

    def __init__(self, private_key: X25519PrivateKey | None = None) -> None:
        self._private = private_key or X25519PrivateKey.generate()
        self.public_bytes: bytes = self._private.public_key().public_bytes_raw()

    def open(self, box: bytes, *, context: bytes) -> bytes:
        """Open a box sealed to this key under ``context``.

        Raises:
            AuthenticationError: the box was tampered with, sealed to another key, or sealed
                under another context (round, tag, recipient, purpose).
        """
        if not isinstance(box, (bytes, bytearray)) or len(box) < OVERHEAD:
            raise AuthenticationError(f"sealed item of {len(box)} bytes is too short to be a sealed box")
        eph_pub = bytes(box[:PUBLIC_KEY_BYTES])
        try:
            shared = self._private.exchange(X25519PublicKey.from_public_bytes(eph_pub))
        except ValueError as exc:  # e.g. a low-order point yields an all-zero shared secret
            raise AuthenticationError("sealed item carries an invalid ephemeral key") from exc
        key, nonce = _derive(shared, eph_pub, self.public_bytes, context)
        aad = length_prefixed(_LABEL, eph_pub, self.public_bytes, context)
        try:
            return ChaCha20Poly1305(key).decrypt(nonce, bytes(box[PUBLIC_KEY_BYTES:]), aad)
        except InvalidTag as exc:
            raise AuthenticationError(
                "sealed item failed authentication: tampered, sealed to another recipient, or "
                "replayed from another round/tag"
            ) from exc

    def __repr__(self) -> str:
        return f"SealingKey(public={self.public_bytes.hex()[:16]}...)"
