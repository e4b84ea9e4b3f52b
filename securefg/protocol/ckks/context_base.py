"""What the secret and the public CKKS context types share: parameters, encryption, parsing.

:class:`~securefg.protocol.ckks.secret_context.SecretContext` and
:class:`~securefg.protocol.ckks.public_context.PublicContext` are *siblings*, not parent and
child, so ``isinstance(secret, PublicContext)`` is false and a function typed to take a
``PublicContext`` can never be handed a secret key.
"""

from __future__ import annotations

import math

import tenseal as ts
import torch

from securefg.errors import CodecError, ConfigError
from securefg.protocol.ckks.encrypted_vector import DEFAULT_MAX_BYTES, EncryptedVector
from securefg.protocol.ckks.presets import CKKSPreset


def check_context_matches(ctx: ts.Context, preset: CKKSPreset) -> None:
    """Raise :class:`CodecError` unless a received context has exactly ``preset``'s parameters."""
    data = ctx.seal_context().data
    key_level = data.key_context_data()
    n = key_level.parms().poly_modulus_degree()
    total = key_level.total_coeff_modulus_bit_count()
    levels = key_level.chain_index()
    scale = ctx.global_scale
    want_total = sum(preset.coeff_mod_bit_sizes)
    if (n, total, levels + 1, scale) != (
        preset.poly_modulus_degree,
        want_total,
        len(preset.coeff_mod_bit_sizes),
        preset.scale,
    ):
        raise CodecError(
            f"received CKKS context (N={n}, {total} modulus bits, {levels + 1} primes, scale {scale}) "
            f"does not match the agreed preset {preset.fingerprint}"
        )


class CKKSContextBase:
    """Parameters and public-key operations common to both context types."""

    __slots__ = ("_ctx", "_preset")

    def __init__(self, ctx: ts.Context, preset: CKKSPreset) -> None:
        self._ctx = ctx
        self._preset = preset

    @property
    def preset(self) -> CKKSPreset:
        """The agreed parameters."""
        return self._preset

    @property
    def slots(self) -> int:
        """Values per ciphertext."""
        return self._preset.slots

    def has_galois_keys(self) -> bool:
        """Whether rotations (and so encrypted dot products) are possible."""
        return bool(self._ctx.has_galois_keys())

    def is_public(self) -> bool:
        """Whether this context holds no secret key."""
        raise NotImplementedError

    def encrypt(self, vector: torch.Tensor, *, window: bool = False) -> EncryptedVector:
        """Encrypt a 1-D tensor with the public key, packed into ``ceil(len / slots)`` ciphertexts
        (``window``: a short vector for inner products goes into one chunk of the next power of two
        slots, which ``dot`` sums with fewer rotations)."""
        return EncryptedVector._encrypt(self._ctx, vector, self.slots, window=window)

    def encrypt_zeros(self, length: int, *, chunk_size: int | None = None) -> EncryptedVector:
        """A fresh encryption of zeros (for rerandomization), chunked like a vector of ``length``."""
        size = self.slots if chunk_size is None else chunk_size
        if size == self.slots:
            return self.encrypt(torch.zeros(length, dtype=torch.float64))
        if size != 1:
            raise ConfigError(f"chunk size must be {self.slots} or 1, got {size}")
        count = math.ceil(length / size)
        return EncryptedVector([ts.ckks_vector(self._ctx, [0.0]) for _ in range(count)], length)

    def load(
        self, data: bytes, *, expected_length: int | None = None, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> EncryptedVector:
        """Parse an :class:`EncryptedVector` received as bytes and link it to this context."""
        return EncryptedVector._from_bytes(
            self._ctx, data, slots=self.slots, expected_length=expected_length, max_bytes=max_bytes
        )

    def max_plain_abs(self, *, levels_used: int) -> float:
        """Largest magnitude a decrypted value may have after ``levels_used`` rescales."""
        chain = self._preset.coeff_mod_bit_sizes[:-1]
        remaining = chain[: len(chain) - levels_used]
        return float(2.0 ** (sum(remaining) - self._preset.scale_bits - 2))
