"""The key holder's CKKS context: the only securefg type that carries a CKKS secret key.

Secret bytes leave this object through exactly one method, :meth:`SecretContext.secret_bytes`
(named like pyca's ``private_bytes_raw()``), so ``grep secret_bytes`` finds every export. The
only caller in securefg seals them to a peer (:mod:`securefg.protocol.ckks.key_setup`).
"""

from __future__ import annotations

import numpy as np
import tenseal as ts
import torch

from securefg.errors import CodecError, SecretKeyError
from securefg.protocol.ckks.context_base import CKKSContextBase, check_context_matches
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.presets import CKKSPreset
from securefg.protocol.ckks.public_context import PublicContext


class SecretContext(CKKSContextBase):
    """A TenSEAL CKKS context *with* its secret key.

    Args:
        ctx (ts.Context): A private TenSEAL context (use :meth:`generate` or
            :meth:`from_secret_bytes`).
        preset (CKKSPreset): Its parameters.

    Raises:
        SecretKeyError: if ``ctx`` has no secret key.
    """

    __slots__ = ("_factors",)

    def __init__(self, ctx: ts.Context, preset: CKKSPreset) -> None:
        if not ctx.is_private():
            raise SecretKeyError("SecretContext needs a context that holds a secret key")
        super().__init__(ctx, preset)
        self._factors: dict[int, float] = {0: 1.0}

    @classmethod
    def generate(cls, preset: CKKSPreset) -> SecretContext:
        """Create fresh keys (SEAL draws them from the OS CSPRNG). Relinearization keys included."""
        ctx = ts.context(
            ts.SCHEME_TYPE.CKKS,
            poly_modulus_degree=preset.poly_modulus_degree,
            coeff_mod_bit_sizes=list(preset.coeff_mod_bit_sizes),
        )
        ctx.global_scale = preset.scale
        return cls(ctx, preset)

    @classmethod
    def from_secret_bytes(cls, data: bytes, *, preset: CKKSPreset) -> SecretContext:
        """Load a context exported by :meth:`secret_bytes` (after unsealing it).

        Raises:
            CodecError: undecodable bytes or parameters other than ``preset``'s.
            SecretKeyError: the bytes carry no secret key.
        """
        try:
            ctx = ts.context_from(data)
        except Exception as exc:  # TenSEAL raises ValueError/RuntimeError
            raise CodecError(f"not a serialized TenSEAL context: {exc}") from exc
        check_context_matches(ctx, preset)
        return cls(ctx, preset)

    def is_public(self) -> bool:
        """Always false: this context holds the secret key."""
        return False

    def secret_bytes(self) -> bytes:
        """Export the context *with its secret key*. Seal the result before it leaves the party."""
        return bytes(self._ctx.serialize(save_secret_key=True, save_galois_keys=False))

    def public_bytes(self, *, galois: bool) -> bytes:
        """A public copy (public + relinearization keys, Galois keys if ``galois``), serialized."""
        pub = self._ctx.copy()
        pub.make_context_public(generate_galois_keys=galois, generate_relin_keys=True)
        if not pub.is_public():  # defence in depth: never let a secret key out by accident
            raise SecretKeyError("make_context_public() left a secret key in the context")
        return bytes(pub.serialize(save_secret_key=False, save_galois_keys=galois))

    def public_context(self, *, galois: bool = False) -> PublicContext:
        """The :class:`PublicContext` a server would receive."""
        return PublicContext.from_bytes(self.public_bytes(galois=galois), preset=self._preset)

    def decrypt(self, vector: EncryptedVector) -> torch.Tensor:
        """Decrypt to a float64 tensor of the vector's length (with *this* context's secret key).

        Each rescale divides by a prime q close to, but not equal to, the scale 2^s, while
        TenSEAL resets the recorded scale to 2^s; a value that went through k rescales decodes
        multiplied by a fixed factor prod(2^s / q) (about 1 + 1.3e-7 after one, 1 + 8e-7 after two
        at N=8192). The factor depends only on the public primes, so we measure it once on an
        encryption of ones and divide it out. This relies on securefg circuits reaching a level
        only through rescales (``EncryptedVector`` refuses to add terms at different levels).
        """
        if not isinstance(vector, EncryptedVector):
            raise TypeError(f"expected an EncryptedVector, got {type(vector).__name__}")
        values = EncryptedVector._decrypt(vector, self._ctx.secret_key())
        rescales = len(self._preset.coeff_mod_bit_sizes) - 1 - vector.modulus_primes
        return values / self._rescale_factor(rescales)

    def _rescale_factor(self, rescales: int) -> float:
        if rescales not in self._factors:
            if not 0 <= rescales <= self._preset.levels:
                raise SecretKeyError(f"ciphertext reports {rescales} rescales, preset allows {self._preset.levels}")
            probe = ts.ckks_vector(self._ctx, [1.0] * self.slots)
            for _ in range(rescales):
                probe = probe * 1.0
            self._factors[rescales] = float(np.mean(probe.decrypt()))
        return self._factors[rescales]

    def __repr__(self) -> str:
        return f"SecretContext({self._preset.fingerprint}, secret_key=<hidden>)"
