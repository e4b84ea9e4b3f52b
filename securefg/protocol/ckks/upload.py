"""Client side of every CKKS exchange: encrypt a vector and upload it to the server.

Uploads are streamed (client k sends, the server parses it, then client k+1 sends), which is
what concurrent clients would produce and keeps only one upload in flight in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from securefg.errors import ProtocolError
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.mechanism import ExchangeCall


def upload_encrypted(
    call: ExchangeCall,
    keys: CKKSKeySetup,
    vectors: Mapping[str, torch.Tensor],
    *,
    stage: str = Stage.UPLOAD,
    window: bool = False,
) -> Iterator[tuple[str, EncryptedVector]]:
    """Each online client encrypts its vector and sends it; yields what the server parsed.

    Args:
        call (ExchangeCall): The exchange.
        keys (CKKSKeySetup): Key roles (every sender must already hold a context).
        vectors (Mapping[str, torch.Tensor]): Client id -> 1-D float64 vector (same length).
        stage (str): Envelope stage. (default: ``"ckks/upload"``)
        window (bool): Encrypt each (short) vector windowed, for inner products. (default: ``False``)

    Yields:
        (sender, EncryptedVector linked to the server's PublicContext), in sorted sender order.
    """
    lengths = {int(v.numel()) for v in vectors.values()}
    if len(lengths) > 1:
        raise ProtocolError(f"inputs to {call.tag!r} have different lengths {sorted(lengths)}")
    length = lengths.pop() if lengths else None
    server_ctx = keys.context_of(call, call.server)
    for pid in sorted(vectors):
        if pid in call.transport.offline:
            continue
        # --- as client `pid`
        ct = keys.context_of(call, pid).encrypt(vectors[pid], window=window)
        call.transport.send(
            Envelope(pid, (call.server,), call.round, call.tag, ct.to_bytes(), stage=stage, form=Form.CIPHERTEXT)
        )
        del ct
        # --- as the server
        envs = call.transport.receive(call.server, tag=call.tag, round=call.round, stage=stage)
        if len(envs) != 1 or envs[0].sender != pid:
            raise ProtocolError(f"server expected one upload from {pid!r} for {call.tag!r}, got {len(envs)}")
        yield pid, server_ctx.load(envs[0].payload, expected_length=length)
