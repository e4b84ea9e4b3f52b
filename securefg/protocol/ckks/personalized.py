"""``personalized_aggregate`` under CKKS: client i decrypts its own sum_j A_ij x_j.

Flow and what each party learns (semi-honest; no secret-key holder colludes with the server):

1. Key setup gives every *receiving* client the secret context (sealed to it), the server the
   public context, and senders that receive nothing the public context.
2. Each client j uploads ``Enc(x_j)`` (``Form.CIPHERTEXT``).
3. For each receiver i the server computes ``sum_j A_ij * Enc(x_j)`` (public scalars; every
   term is multiplied, even by 1.0, and none is rescaled, so all sit at scale Delta^2 on the top
   level: :meth:`EncryptedVector.linear_combination`), optionally rerandomizes it (adds a fresh
   ``Enc(0) * 1.0``), and sends it to i (``Form.CIPHERTEXT``).
4. Client i decrypts. It learns sum_j A_ij x_j -- the exchange's output -- and nothing else *by
   protocol*: CKKS has no circuit privacy, so the ciphertext noise of the result is a function of
   the inputs' noise (a tiny, unexploited-in-practice channel; ``rerandomize`` adds fresh
   encryption noise but is not full noise flooding).

The server learns A (which it chose) and ciphertext sizes. Because every receiving client holds
the secret key, one receiver colluding with the server decrypts every upload: this mechanism
assumes a server that colludes with no client.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from securefg.errors import InvalidInputError
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.upload import upload_encrypted
from securefg.protocol.mechanism import ExchangeCall


def _check_coefficients(inputs: Mapping[str, torch.Tensor], coefficients: Mapping[str, Mapping[str, float]]) -> None:
    for i, row in coefficients.items():
        for j, a in row.items():
            if j not in inputs:
                raise InvalidInputError(f"coefficient A[{i!r}][{j!r}] names {j!r}, which sent no input")
            if not math.isfinite(float(a)):
                raise InvalidInputError(f"coefficient A[{i!r}][{j!r}] = {a} is not finite")


def personalized_sums(
    call: ExchangeCall,
    keys: CKKSKeySetup,
    inputs: Mapping[str, torch.Tensor],
    coefficients: Mapping[str, Mapping[str, float]],
    *,
    rerandomize: bool,
) -> dict[str, torch.Tensor]:
    """Run the four steps above; returns what each online receiver decrypted."""
    _check_coefficients(inputs, coefficients)
    keys.preset.require_levels(1, what="personalized_aggregate (ciphertext times public scalar)")
    offline = call.transport.offline
    receivers = [i for i in coefficients if i not in offline]
    senders = [j for j in inputs if j not in offline]
    keys.ensure(call, encryptors=senders, decryptors=receivers, galois=False)
    length = next(iter(inputs.values())).numel()

    # --- server: collect every upload, then mix one ciphertext per receiver
    uploads = dict(upload_encrypted(call, keys, inputs))
    server_ctx = keys.context_of(call, call.server)
    for i in receivers:
        terms = [(uploads[j], float(a)) for j, a in sorted(coefficients[i].items()) if j in uploads and float(a) != 0.0]
        if rerandomize or not terms:  # a fresh encryption of zeros hides the mix (or is the whole all-zero row)
            terms.append((server_ctx.encrypt_zeros(length), 1.0))
        mixed = EncryptedVector.linear_combination(terms)
        call.transport.send(
            Envelope(
                call.server, (i,), call.round, call.tag, mixed.to_bytes(),
                stage=Stage.PERSONALIZED_RESULT, form=Form.CIPHERTEXT,
            )
        )

    # --- each receiver: decrypt its own
    out: dict[str, torch.Tensor] = {}
    for i in receivers:
        (env,) = call.transport.receive_from(
            i, [call.server], tag=call.tag, round=call.round, stage=Stage.PERSONALIZED_RESULT
        ).values()
        secret = keys.secret_of(call, i)
        out[i] = secret.decrypt(secret.load(env.payload, expected_length=length))
    return out
