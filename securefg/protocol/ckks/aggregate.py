"""``aggregate`` under CKKS: the server adds ciphertexts; the key holder decrypts only the sum.

Flow and what each party learns (semi-honest, server and key holder do not collude):

1. Each client k uploads ``Enc(w_k x_k || w_k)`` (``Form.CIPHERTEXT``). The server learns sizes only.
2. The server adds the ciphertexts (no level used) and sends ``Enc(sum)`` to the key holder
   (``Form.CIPHERTEXT``). The key holder never sees an individual upload, only the sum.
3. The key holder decrypts, floods the result (see :mod:`~securefg.protocol.ckks.output_noise`,
   against Li-Micciancio key recovery by the server, which holds the ciphertext) and returns it
   (``Form.AGGREGATE``).

So the server learns sum_k w_k x_k (+ flooding noise) -- the exchange's output -- and the key
holder learns the same sum. With a client as key holder that is no more than FedAvg broadcasts
anyway; for tags whose sum clients should not see, use a ``keyholder`` party.
Not protected: a server that colludes with the key holder decrypts every upload; an *actively*
malicious server can send the key holder a single client's ciphertext instead of the sum (the key
holder cannot tell), so this is semi-honest security.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from securefg.errors import MechanismError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.ckks.upload import upload_encrypted
from securefg.protocol.mechanism import ExchangeCall, SumOutcome


def release_sum(secret: SecretContext, payload: bytes, noise: OutputNoise) -> bytes:
    """Key holder: decrypt the summed ciphertext, flood it, encode what it releases."""
    return encode_tensor(noise(secret.decrypt(secret.load(payload))))


def encrypted_sum(
    call: ExchangeCall, keys: CKKSKeySetup, inputs: Mapping[str, torch.Tensor], noise: OutputNoise
) -> SumOutcome:
    """Run the three steps above and return what the server decoded."""
    senders = [p for p in inputs if p not in call.transport.offline]
    holder = keys.ensure(call, encryptors=senders, decryptors=(), galois=False)
    length = next(iter(inputs.values())).numel()

    # --- server: add the uploads as they arrive
    total: EncryptedVector | None = None
    contributors: list[str] = []
    for pid, ct in upload_encrypted(call, keys, inputs):
        total = ct if total is None else total + ct
        contributors.append(pid)
    if total is None:
        raise MechanismError(f"no client uploaded anything for {call.tag!r}")
    call.transport.send(
        Envelope(
            call.server, (holder,), call.round, call.tag, total.to_bytes(),
            stage=Stage.DECRYPT_REQUEST, form=Form.CIPHERTEXT,
        )
    )
    del total

    # --- key holder: decrypt the sum, flood it, release it
    (req,) = call.transport.receive_from(
        holder, [call.server], tag=call.tag, round=call.round, stage=Stage.DECRYPT_REQUEST
    ).values()
    released = release_sum(keys.secret_of(call, holder), req.payload, noise)
    call.transport.send(req.reply(released, sender=holder, stage=Stage.DECRYPT_RESULT, form=Form.AGGREGATE))

    # --- server: read the plaintext sum
    (res,) = call.transport.receive_from(
        call.server, [holder], tag=call.tag, round=call.round, stage=Stage.DECRYPT_RESULT
    ).values()
    spec = TensorSpec({"x": (torch.float64, (length,))})
    return SumOutcome(decode_tensor(res.payload, spec=spec), tuple(contributors))
