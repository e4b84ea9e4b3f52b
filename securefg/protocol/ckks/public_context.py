"""The CKKS context a server holds: public, relinearization and (optionally) Galois keys only.

A :class:`PublicContext` is built from received bytes and nothing else, and its constructor
*refuses* bytes that carry a secret key, so a server-side object of this type cannot decrypt even
if a key holder mistakenly sends its secret context. It can encrypt (public-key encryption, used to
rerandomize), add, multiply by public scalars, and, with Galois keys, compute dot products.
"""

from __future__ import annotations

from typing import NoReturn

import tenseal as ts

from securefg.errors import CodecError, SecretKeyError
from securefg.protocol.ckks.context_base import CKKSContextBase, check_context_matches
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.presets import CKKSPreset

#: Public contexts are ~1.9 MB without and ~35 MB with Galois keys at N=8192; 16384 is ~4x that.
MAX_PUBLIC_CONTEXT_BYTES = 2**30


class PublicContext(CKKSContextBase):
    """A CKKS context that provably holds no secret key.

    Build it with :meth:`from_bytes`; there is no way to attach a secret key afterwards.
    """

    __slots__ = ("_bytes",)

    def __init__(self, ctx: ts.Context, preset: CKKSPreset, raw: bytes) -> None:
        if ctx.has_secret_key() or ctx.is_private() or not ctx.is_public():
            raise SecretKeyError(
                "refusing to build a PublicContext from a context that holds a secret key; "
                "send SecretContext.public_bytes() to the server instead"
            )
        super().__init__(ctx, preset)
        self._bytes = raw

    @classmethod
    def from_bytes(cls, data: bytes, *, preset: CKKSPreset) -> PublicContext:
        """Parse a public context received from the key holder.

        Raises:
            SecretKeyError: the bytes carry a secret key (the server must never hold one).
            CodecError: undecodable bytes, or parameters other than ``preset``'s.
        """
        if not isinstance(data, (bytes, bytearray)) or len(data) > MAX_PUBLIC_CONTEXT_BYTES:
            raise CodecError("public context must be bytes of at most 1 GiB")
        try:
            ctx = ts.context_from(bytes(data))
        except Exception as exc:  # TenSEAL raises ValueError/RuntimeError
            raise CodecError(f"not a serialized TenSEAL context: {exc}") from exc
        if ctx.has_secret_key():
            raise SecretKeyError(
                "received context carries a secret key; a PublicContext refuses it "
                "(the key holder must send SecretContext.public_bytes())"
            )
        check_context_matches(ctx, preset)
        return cls(ctx, preset, bytes(data))

    def is_public(self) -> bool:
        """Always true: the constructor refuses secret keys."""
        return True

    def to_bytes(self) -> bytes:
        """The serialized public context (what was received)."""
        return self._bytes

    def decrypt(self, vector: EncryptedVector) -> NoReturn:
        """Always fails: a public context cannot decrypt.

        Raises:
            SecretKeyError: always.
        """
        raise SecretKeyError(
            "a PublicContext holds no CKKS secret key and cannot decrypt; only the key holder "
            "(or clients it sealed the secret context to) can"
        )

    def __repr__(self) -> str:
        return f"PublicContext({self._preset.fingerprint}, galois={self.has_galois_keys()})"
