"""CKKS homomorphic encryption (TenSEAL) for securefg's vector exchanges.

Mechanisms registered on import:

* ``ckks`` (:class:`~securefg.protocol.ckks.ckks_mechanism.CKKS`): ``aggregate``,
  ``personalized_aggregate``, ``similarity``.
* ``ckks_relay`` (:class:`~securefg.protocol.relay.ckks_relay.CKKSRelay`): ``relay`` of tensors as
  CKKS ciphertexts the server can compute on and rerandomizes (it lives in
  :mod:`securefg.protocol.relay` and shares this package's key session).

Types by owner (STYLE.md "secrets in server-side objects"):

* :class:`~securefg.protocol.ckks.secret_context.SecretContext` -- key holder and decrypting clients
  only; its secret leaves only through ``secret_bytes()``, and only sealed to a peer.
* :class:`~securefg.protocol.ckks.public_context.PublicContext` -- what the server holds; refuses
  any context that carries a secret key, ``decrypt`` raises :class:`~securefg.errors.SecretKeyError`.
* :class:`~securefg.protocol.ckks.encrypted_vector.EncryptedVector` -- chunked ciphertexts.

Trust model: semi-honest server that colludes with no secret-key holder; the security parameters
are >= 128 bits (:mod:`.presets`). Who learns what is stated per exchange in :mod:`.aggregate`,
:mod:`.personalized` and :mod:`.similarity`.
"""

from __future__ import annotations

from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import PRESETS, CKKSPreset, resolve_preset
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext

# Registers ``ckks_relay``. Imported last: it builds on the modules above (see relay/__init__).
from securefg.protocol.relay import ckks_relay as _ckks_relay  # noqa: F401

__all__ = [
    "CKKS",
    "PRESETS",
    "CKKSKeySetup",
    "CKKSPreset",
    "EncryptedVector",
    "OutputNoise",
    "PublicContext",
    "SecretContext",
    "resolve_preset",
]
