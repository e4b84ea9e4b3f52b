"""Aggregator stage 4 (optional), ConsistencyCheck: collect signatures over the survivor list."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from securefg.protocol.secure_sum.constants import ClientDropReason, Domain, Stage
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.unmask import request_unmask


class ConsistencyCheck(ServerStage):
    """Keeps the valid signatures (``INVALID_SIGNATURE`` otherwise: the client's input stays in
    the sum, it just is not asked to unmask); aborts below ``t`` signers (Bonawitz: ``|U_4| >= t``)."""

    stage = Stage.CONSISTENCY_CHECK

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        message = ctx.info.bind(Domain.CONSISTENCY, *sorted(ctx.survivors))
        for pid, signature in got.items():
            try:
                Ed25519PublicKey.from_public_bytes(ctx.keys[pid].sign_pk).verify(signature, message)
            except (InvalidSignature, ValueError):
                ctx.drop(pid, ClientDropReason.INVALID_SIGNATURE)
                continue
            ctx.signatures[pid] = signature
        self.require(len(ctx.signatures), ctx.threshold, "valid consistency signatures")
        return request_unmask(ctx, sorted(ctx.signatures))
