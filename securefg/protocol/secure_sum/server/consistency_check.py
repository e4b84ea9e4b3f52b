"""Aggregator stage 4 (optional), ConsistencyCheck: collect signatures over the survivor list."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.pinned import consistency_message, witnesses
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.unmask import request_unmask


class ConsistencyCheck(ServerStage):
    """Keeps the valid signatures (``INVALID_SIGNATURE`` otherwise: the client's input stays in
    the sum, it just is not asked to unmask); aborts below ``t`` signers (Bonawitz: ``|U_4| >= t``),
    with pinned keys below the :func:`~securefg.protocol.secure_sum.pinned.witnesses` the clients
    will ask for (they would refuse to unmask)."""

    stage = Stage.CONSISTENCY_CHECK

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        message = consistency_message(ctx.info, ctx.clients, ctx.survivors)
        for pid, signature in got.items():
            try:
                Ed25519PublicKey.from_public_bytes(ctx.keys[pid].sign_pk).verify(signature, message)
            except (InvalidSignature, ValueError):
                ctx.drop(pid, ClientDropReason.INVALID_SIGNATURE)
                continue
            ctx.signatures[pid] = signature
        need = ctx.threshold
        if ctx.info.pinned is not None:
            need = max(need, witnesses(len(ctx.clients), ctx.info.settings.adversarial_rate))
        self.require(len(ctx.signatures), need, "valid consistency signatures")
        return request_unmask(ctx, sorted(ctx.signatures))
