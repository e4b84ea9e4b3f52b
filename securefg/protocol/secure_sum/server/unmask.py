r"""Aggregator stage 5, Unmask: reconstruct the secrets it is owed and remove every mask.

.. math::
    \sum_{u \in U_3} x_u = \sum_{u \in U_3} y_u - \sum_{u \in U_3} \mathrm{PRG}(b_u)
      - \sum_{d \in U_2 \setminus U_3} \sum_{u \in U_3, d \sim u} \pm \mathrm{PRG}(s_{ud})

All in place on one accumulator with the chunked keystream expander, so the cost is one
keystream pass per survivor plus one per (dead client, live neighbour) pair.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import CodecError, MechanismError
from securefg.protocol.secure_sum import crypto, shamir
from securefg.protocol.secure_sum.constants import ClientDropReason, ShareKind, Stage
from securefg.protocol.secure_sum.context import AggregatorContext
from securefg.protocol.secure_sum.messages import UnmaskRequest, decode_unmask_shares
from securefg.protocol.secure_sum.prg import MaskExpander
from securefg.protocol.secure_sum.range_check import check_sum
from securefg.protocol.secure_sum.server.base import ServerStage


def request_unmask(ctx: AggregatorContext, recipients: Iterable[str]) -> Unmask:
    """Ask each recipient for the shares of its live and dead peers; return the waiting stage."""
    alive = set(ctx.survivors)
    signatures = tuple(sorted(ctx.signatures.items()))
    recipients = sorted(recipients)
    dead = {pid: sorted(ctx.routed[pid] - alive) for pid in recipients}
    for pid, request in UnmaskRequest.encode_for(ctx.survivors, dead, signatures).items():
        ctx.send(pid, Stage.UNMASK, request)
    return Unmask(ctx, recipients)


class Unmask(ServerStage):
    """Checks that each response answers exactly what was asked (else
    ``INVALID_UNMASK_RESPONSE``), then unmasks; aborts when some secret has fewer than ``t``
    shares. A reconstructed ``s_sk`` must match the advertised ``s_pk``. With a ``norm_bound`` the
    sum must be one its contributors could make within it
    (:func:`~securefg.protocol.secure_sum.range_check.check_sum`; not under ``blind_sum``,
    whose sum the aggregator cannot read)."""

    stage = Stage.UNMASK

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        alive = set(ctx.survivors)
        shares: dict[ShareKind, dict[str, dict[int, int]]] = {k: defaultdict(dict) for k in ShareKind}
        for pid in sorted(got):
            asked = {(j, ShareKind.SELF_MASK if j in alive else ShareKind.S_KEY) for j in ctx.routed[pid]}
            try:
                rows = decode_unmask_shares(got[pid])
                values = [shamir.decode_share(s) for _, _, s in rows]
            except CodecError:
                ctx.drop(pid, ClientDropReason.INVALID_UNMASK_RESPONSE)
                continue
            if len(rows) != len(asked) or {(j, k) for j, k, _ in rows} != asked:
                ctx.drop(pid, ClientDropReason.INVALID_UNMASK_RESPONSE)
                continue
            x = ctx.clients.index(pid) + 1
            for (owner, kind, _), y in zip(rows, values):
                shares[kind][owner][x] = y
        dead = sorted(set().union(*(ctx.routed[u] for u in alive)) - alive)
        for owner in sorted(alive):
            self.require(len(shares[ShareKind.SELF_MASK][owner]), ctx.threshold, f"self-mask shares of {owner}")
        for owner in dead:
            self.require(len(shares[ShareKind.S_KEY][owner]), ctx.threshold, f"key shares of dropped {owner}")

        assert ctx.masked_sum is not None
        total = ctx.masked_sum
        settings = ctx.info.settings
        expander = MaskExpander(settings.prg, ctx.quantizer.bits)
        for owner in sorted(alive):
            expander.add_into(total, shamir.reconstruct(shares[ShareKind.SELF_MASK][owner], ctx.threshold), subtract=True)
        for owner in dead:
            s_sk = X25519PrivateKey.from_private_bytes(
                shamir.reconstruct(shares[ShareKind.S_KEY][owner], ctx.threshold)
            )
            if s_sk.public_key().public_bytes_raw() != ctx.keys[owner].s_pk:
                raise MechanismError(
                    f"the reconstructed mask key of {owner} does not match its advertised key: some "
                    "unmasking shares are corrupt; the round is aborted"
                )
            for u in sorted(p for p in alive if owner in ctx.routed[p]):
                seed = crypto.pairwise_seed(
                    s_sk, ctx.keys[u].s_pk, session=ctx.info.session, round=ctx.info.round,
                    tag=ctx.info.tag, pair=(u, owner),
                )
                expander.add_into(total, seed, subtract=u < owner)
        decoded = ctx.quantizer.dequantize(total)
        if not ctx.blinded:
            check_sum(decoded, contributors=len(alive), bound=settings.norm_bound, clip=settings.clip,
                      error=ctx.quantizer.error_bound(len(alive)), tag=ctx.info.tag)
        result = torch.from_numpy(decoded)
        return Completed(ctx, result, tuple(sorted(alive)), ring_total=total)


class Completed(ServerStage):
    """The round is over: holds the dequantized sum and who is in it; accepts nothing."""

    def __init__(self, ctx: AggregatorContext, total: torch.Tensor, contributors: tuple[str, ...], *,
                 ring_total: np.ndarray | None = None) -> None:
        super().__init__(ctx)
        self.total = total
        self.contributors = contributors
        self.ring_total = ring_total
        """The unmasked sum as ring words (``blind_sum``: still blinded, so ``total`` is noise)."""
