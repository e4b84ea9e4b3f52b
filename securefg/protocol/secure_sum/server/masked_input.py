"""Aggregator stage 3, MaskedInput: add up the masked inputs as they arrive."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from securefg.errors import CodecError, UnexpectedMessageError
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.messages import PeerKeys, encode_peer_keys
from securefg.protocol.secure_sum.packing import decode_packed
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.relay_sum import decode_summed
from securefg.protocol.secure_sum.route import Delivery
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.server.unmask import request_unmask


class MaskedInput(ServerStage):
    """Collects bit-packed masked vectors (ring size, length and exact byte count checked by
    :func:`~securefg.protocol.secure_sum.packing.decode_packed`, else ``MALFORMED_MESSAGE``)
    into one running ring sum; aborts below ``max(t, 2)``. With ``relay_sum`` it takes the
    relay's one summed vector instead, and the clients it names as the contributors."""

    stage = Stage.MASKED_INPUT

    def handle(self, deliveries: list[Delivery]) -> ServerStage:
        if not self.ctx.info.route.sum_at_relay:
            return super().handle(deliveries)
        return self._on_relay_sum(deliveries)

    def _on_relay_sum(self, deliveries: list[Delivery]) -> ServerStage:
        """One message from the relay: ids summed (each asked, listed once) and their ring sum.

        Raises:
            UnexpectedMessageError: a message from anyone but the relay, more than one, or one
                that does not parse or names clients that were not asked.
        """
        ctx, relay = self.ctx, self.ctx.info.route.relay
        if len(deliveries) != 1 or deliveries[0].origin != relay or deliveries[0].stage is not self.stage:
            raise UnexpectedMessageError(f"the aggregator expected one summed masked input from the relay {relay!r}")
        try:
            ids, total = decode_summed(deliveries[0].payload, bits=ctx.quantizer.bits, length=ctx.length)
        except CodecError as exc:
            raise UnexpectedMessageError(f"the relay's summed masked input does not parse: {exc}") from exc
        if len(set(ids)) != len(ids) or not set(ids) <= self.expected - ctx.drops.keys():
            raise UnexpectedMessageError("the relay's summed masked input names clients that were not asked, or twice")
        for pid in self.expected - set(ids):
            ctx.drop(pid, ClientDropReason.NO_RESPONSE)
        return self._proceed(total, sorted(ids))

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        bits = ctx.quantizer.bits
        dtype = ring_dtype(bits)
        total = np.zeros(ctx.length, dtype=dtype)
        survivors = []
        for pid in sorted(got):
            try:
                y = decode_packed(got[pid], bits=bits, length=ctx.length, dtype=dtype)
            except CodecError:
                ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            np.add(total, y, out=total)
            survivors.append(pid)
        return self._proceed(total, survivors)

    def _proceed(self, total: np.ndarray, survivors: list[str]) -> ServerStage:
        ctx = self.ctx
        self.require(len(survivors), ctx.info.settings.min_survivors(ctx.threshold), "masked inputs")
        ctx.masked_sum = total
        ctx.survivors = tuple(survivors)
        if not ctx.info.settings.signatures:
            return request_unmask(ctx, survivors)
        rows = encode_peer_keys([PeerKeys(p, b"", b"", ctx.keys[p].sign_pk) for p in survivors])
        for pid in survivors:
            ctx.send(pid, Stage.CONSISTENCY_CHECK, rows)
        return ConsistencyCheck(ctx, survivors)
