"""Aggregator stage 3, MaskedInput: add up the masked inputs as they arrive."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from securefg.errors import CodecError
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.messages import PeerKeys, encode_peer_keys
from securefg.protocol.secure_sum.packing import decode_packed
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.server.unmask import request_unmask


class MaskedInput(ServerStage):
    """Collects bit-packed masked vectors (ring size, length and exact byte count checked by
    :func:`~securefg.protocol.secure_sum.packing.decode_packed`, else ``MALFORMED_MESSAGE``)
    into one running ring sum; aborts below ``max(t, 2)``."""

    stage = Stage.MASKED_INPUT

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
        self.require(len(survivors), ctx.info.settings.min_survivors(ctx.threshold), "masked inputs")
        ctx.masked_sum = total
        ctx.survivors = tuple(survivors)
        if not ctx.info.settings.signatures:
            return request_unmask(ctx, survivors)
        rows = encode_peer_keys([PeerKeys(p, b"", b"", ctx.keys[p].sign_pk) for p in survivors])
        for pid in survivors:
            ctx.send(pid, Stage.CONSISTENCY_CHECK, rows)
        return ConsistencyCheck(ctx, survivors)
