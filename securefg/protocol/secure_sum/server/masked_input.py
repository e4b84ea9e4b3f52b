"""Aggregator stage 3, MaskedInput: add up the masked inputs as they arrive."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from securefg.errors import CodecError
from securefg.federation.codec import TensorSpec, decode_tensors
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.messages import PeerKeys, encode_peer_keys
from securefg.protocol.secure_sum.prg import ring_dtype
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.server.unmask import request_unmask


class MaskedInput(ServerStage):
    """Collects masked vectors (dtype and length checked by the tensor codec, else
    ``MALFORMED_MESSAGE``) into one running ring sum; aborts below ``max(t, 2)``."""

    stage = Stage.MASKED_INPUT

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        dtype = ring_dtype(ctx.info.settings.bits)
        spec = TensorSpec({"y": (torch.uint32 if dtype.itemsize == 4 else torch.uint64, (ctx.length,))})
        total = np.zeros(ctx.length, dtype=dtype)
        survivors = []
        for pid in sorted(got):
            try:
                y = decode_tensors(got[pid], spec=spec, max_bytes=ctx.length * dtype.itemsize + 256)["y"]
            except CodecError:
                ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            np.add(total, y.numpy(), out=total)
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
