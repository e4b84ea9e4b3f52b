"""Aggregator stage 2, ShareKeys: route each encrypted share to its addressee."""

from __future__ import annotations

from collections.abc import Mapping

from securefg.errors import CodecError
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.messages import decode_addressed, encode_addressed
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.masked_input import MaskedInput


class ShareKeys(ServerStage):
    """Collects share bundles; a bundle must be addressed to exactly the live neighbours the
    client was told about (else ``INVALID_SHARE_TARGETS``). Clients that receive fewer than
    ``t`` shares are not asked for a masked input (``TOO_FEW_NEIGHBOURS``)."""

    stage = Stage.SHARE_KEYS

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        bundles: dict[str, dict[str, bytes]] = {}
        for pid, payload in got.items():
            try:
                rows = decode_addressed(payload, "share bundle")
            except CodecError:
                ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            targets = [r for r, _ in rows]
            if len(set(targets)) != len(targets) or set(targets) != ctx.told_keys[pid]:
                ctx.drop(pid, ClientDropReason.INVALID_SHARE_TARGETS)
                continue
            bundles[pid] = dict(rows)
        asked = set()
        for holder in sorted(bundles):
            inbox = {sender: b[holder] for sender, b in bundles.items() if holder in b}
            if len(inbox) < ctx.threshold:
                ctx.drop(holder, ClientDropReason.TOO_FEW_NEIGHBOURS)
                continue
            ctx.routed[holder] = frozenset(inbox)
            asked.add(holder)
        self.require(len(asked), ctx.info.settings.min_survivors(ctx.threshold), "clients holding t shares")
        for holder in sorted(asked):
            inbox = {s: bundles[s][holder] for s in sorted(ctx.routed[holder])}
            ctx.send(holder, Stage.MASKED_INPUT, encode_addressed(sorted(inbox.items())))
        return MaskedInput(ctx, asked)
