"""Sealed boxes: X25519 + HKDF-SHA256 + ChaCha20-Poly1305, anonymous or sender-authenticated.

The shape of libsodium's ``crypto_box_seal``, built from ``cryptography`` primitives: the sender
draws a fresh X25519 key pair per box, derives a one-time key and nonce from the shared secret
with HKDF (``info`` binds both public keys and the caller's context), and encrypts with an AEAD
whose associated data binds the same. Only the holder of the recipient's private key can open a
box; any change to a byte, the context or the recipient makes opening fail with
:class:`~securefg.errors.AuthenticationError`.

An anonymous box (:func:`seal`) does not say who sealed it, so anyone holding the recipient's
*public* key can seal one. Two further modes, after HPKE's (RFC 9180 §5.1: ``mode_psk``,
``mode_auth``, ``mode_auth_psk``), authenticate the sender:

* **psk** (``psk=``): a 32-byte secret the recipient shared with the parties it accepts as
  senders goes into the key derivation. The box proves the sealer holds the secret, not *which*
  holder it is: membership without identity, what a shuffled relay needs.
* **auth** (:meth:`SealingKey.seal_from`): the sender's static X25519 key joins the key
  agreement (``DH(ephemeral, R) || DH(sender, R)``), so the box opens only under the sender's
  public key: the recipient learns and checks who sealed it.

Box layout (every mode): ``ephemeral_public (32) | ciphertext || tag (16)``. The anonymous mode
derives exactly as before (label ``securefg/sealed-box/v1``); the others use their own label and
mode byte, so a box never opens in a mode other than the one it was sealed in.
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
_LABEL_AUTH = b"securefg/sealed-box/v2"
PUBLIC_KEY_BYTES = 32
PSK_BYTES = 32
OVERHEAD = PUBLIC_KEY_BYTES + 16


def _check(name: str, value: bytes | None, size: int) -> None:
    if value is not None and len(value) != size:
        raise CodecError(f"{name} must be {size} bytes, got {len(value)}")


def _keys(
    ikm: bytes, eph_pub: bytes, recipient_pub: bytes, context: bytes, *, sender_pub: bytes | None, psk: bytes | None
) -> tuple[bytes, bytes, bytes]:
    """``(key, nonce, associated data)`` of one box; ``ikm`` holds every DH output of its mode."""
    if sender_pub is None and psk is None:  # anonymous: unchanged since v1
        info = length_prefixed(_LABEL, eph_pub, recipient_pub, context)
    else:
        mode = bytes([(1 if psk is not None else 0) | (2 if sender_pub is not None else 0)])
        info = length_prefixed(_LABEL_AUTH, mode, eph_pub, recipient_pub, sender_pub or b"", context)
        ikm += psk or b""
    okm = HKDF(algorithm=hashes.SHA256(), length=44, salt=None, info=info).derive(ikm)
    return okm[:32], okm[32:], info


def _seal(recipient_public: bytes, plaintext: bytes, context: bytes, *,
          sender: X25519PrivateKey | None, psk: bytes | None) -> bytes:
    _check("X25519 public key", recipient_public, PUBLIC_KEY_BYTES)
    _check("pre-shared key", psk, PSK_BYTES)
    recipient = X25519PublicKey.from_public_bytes(recipient_public)
    eph = X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes_raw()
    try:
        ikm = eph.exchange(recipient) + (sender.exchange(recipient) if sender is not None else b"")
    except ValueError as exc:  # a low-order point gives an all-zero shared secret: anyone could open it
        raise AuthenticationError("cannot seal to this X25519 public key: it is a low-order point "
                                  "(a peer published an invalid sealing key)") from exc
    sender_pub = sender.public_key().public_bytes_raw() if sender is not None else None
    key, nonce, aad = _keys(ikm, eph_pub, recipient_public, context, sender_pub=sender_pub, psk=psk)
    return eph_pub + ChaCha20Poly1305(key).encrypt(nonce, plaintext, aad)


def seal(recipient_public: bytes, plaintext: bytes, *, context: bytes, psk: bytes | None = None) -> bytes:
    """Seal ``plaintext`` so that only the owner of ``recipient_public`` can open it.

    Args:
        recipient_public (bytes): The recipient's raw 32-byte X25519 public key.
        plaintext (bytes): The content.
        context (bytes): Binding data (session, round, tag, recipient, purpose), length-prefixed
            by the caller; the box opens only under the same ``context``.
        psk (bytes, optional): A 32-byte secret the recipient shared with its accepted senders;
            the box then opens only with it (membership without identity). (default: an
            anonymous box anyone holding ``recipient_public`` could have sealed)
    """
    return _seal(recipient_public, plaintext, context, sender=None, psk=psk)


class SealingKey:
    """A party's X25519 key pair for receiving sealed boxes and for sealing authenticated ones.

    The private half never leaves it: it only takes part in key agreements inside
    :meth:`open` and :meth:`seal_from`.

    Args:
        private_key (X25519PrivateKey, optional): For tests with pregenerated keys.
            (default: a fresh key from the OS CSPRNG)
    """

    __slots__ = ("_private", "public_bytes")

    def __init__(self, private_key: X25519PrivateKey | None = None) -> None:
        self._private = private_key or X25519PrivateKey.generate()
        self.public_bytes: bytes = self._private.public_key().public_bytes_raw()

    def seal_from(
        self, recipient_public: bytes, plaintext: bytes, *, context: bytes, psk: bytes | None = None
    ) -> bytes:
        """Seal ``plaintext`` to ``recipient_public`` as this key's owner (auth mode): it opens
        only for a recipient that checks it against :attr:`public_bytes`.

        Args:
            recipient_public (bytes): The recipient's raw 32-byte X25519 public key.
            plaintext (bytes): The content.
            context (bytes): Binding data, as for :func:`seal`.
            psk (bytes, optional): A 32-byte shared secret, as for :func:`seal`. (default: none)
        """
        return _seal(recipient_public, plaintext, context, sender=self._private, psk=psk)

    def open(
        self, box: bytes, *, context: bytes, sender_public: bytes | None = None, psk: bytes | None = None
    ) -> bytes:
        """Open a box sealed to this key under ``context`` (in the mode the arguments name).

        Args:
            box (bytes): The sealed box.
            context (bytes): The binding it was sealed under.
            sender_public (bytes, optional): The sender's public key, for a box sealed with
                :meth:`seal_from`. (default: not sender-authenticated)
            psk (bytes, optional): The shared secret it was sealed with. (default: none)

        Raises:
            AuthenticationError: the box was tampered with, sealed to another key, sealed by
                another sender or without the shared secret, or sealed under another context
                (round, tag, recipient, purpose).
        """
        _check("sender public key", sender_public, PUBLIC_KEY_BYTES)
        _check("pre-shared key", psk, PSK_BYTES)
        if not isinstance(box, (bytes, bytearray)) or len(box) < OVERHEAD:
            raise AuthenticationError(f"sealed item of {len(box)} bytes is too short to be a sealed box")
        eph_pub = bytes(box[:PUBLIC_KEY_BYTES])
        try:
            ikm = self._private.exchange(X25519PublicKey.from_public_bytes(eph_pub))
        except ValueError as exc:  # e.g. a low-order point yields an all-zero shared secret
            raise AuthenticationError("sealed item carries an invalid ephemeral key") from exc
        if sender_public is not None:
            try:
                ikm += self._private.exchange(X25519PublicKey.from_public_bytes(sender_public))
            except ValueError as exc:
                raise AuthenticationError("the sender's sealing key is invalid (a low-order point)") from exc
        key, nonce, aad = _keys(ikm, eph_pub, self.public_bytes, context, sender_pub=sender_public, psk=psk)
        try:
            return ChaCha20Poly1305(key).decrypt(nonce, memoryview(box)[PUBLIC_KEY_BYTES:], aad)  # no copy
        except InvalidTag as exc:
            who = " or not sealed by its sender," if sender_public is not None or psk is not None else ""
            raise AuthenticationError(
                f"sealed item failed authentication: tampered, sealed to another recipient,{who} or "
                "replayed from another round/tag"
            ) from exc

    def __repr__(self) -> str:
        return f"SealingKey(public={self.public_bytes.hex()[:16]}...)"
