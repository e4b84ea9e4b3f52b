"""Client stage 3, MaskedInput: open the neighbours' shares, send the masked, quantized input."""

from __future__ import annotations

from securefg.errors import CodecError
from securefg.protocol.secure_sum import crypto, shamir
from securefg.protocol.secure_sum.client.base import ClientStage
from securefg.protocol.secure_sum.client.consistency_check import ConsistencyCheck
from securefg.protocol.secure_sum.client.unmask import Unmask
from securefg.protocol.secure_sum.constants import AbortReason, Domain, Stage
from securefg.protocol.secure_sum.messages import decode_addressed, decode_share_plaintext
from securefg.protocol.secure_sum.packing import encode_packed
from securefg.protocol.secure_sum.prg import MaskExpander


class MaskedInput(ClientStage):
    r"""Expects the shares addressed to this client; answers with its masked input.

    With :math:`U` the neighbours whose shares arrived,

    .. math::
        y_i = q(x_i) + \mathrm{PRG}(b_i) [+ \mathrm{PRG}(g_i)] + \sum_{j \in U, i < j} \mathrm{PRG}(s_{ij})
              - \sum_{j \in U, j < i} \mathrm{PRG}(s_{ij}) \pmod{2^{bits}}

    (:math:`g_i`: the ``blind_sum`` blinding seed, from the clients' group key), sent bit-packed (``bits`` bits per element, :mod:`~securefg.protocol.secure_sum.packing`).

    Refuses shares from a party it did not exchange keys with, a sender listed twice, fewer
    than ``t`` senders (Bonawitz's ``|U_2| >= t``); a share that fails authentication or names
    the wrong parties raises :class:`~securefg.errors.AuthenticationError`.
    """

    expects = Stage.MASKED_INPUT

    def on_message(self, payload: bytes) -> ClientStage:
        ctx = self.ctx
        assert ctx.c_sk is not None and ctx.s_sk is not None
        try:
            rows = decode_addressed(payload, "shares")
        except CodecError as exc:
            raise self.refuse(AbortReason.MALFORMED_CLAIM, f"unreadable shares: {exc}") from exc
        senders = self.check_ids([pid for pid, _ in rows], allowed=ctx.peers, what="the share senders")
        if len(senders) < ctx.threshold:
            raise self.refuse(
                AbortReason.BELOW_THRESHOLD, f"shares from {len(senders)} neighbours, fewer than t = {ctx.threshold}"
            )
        for sender, blob in rows:
            aead, ad = crypto.directional_aead(
                ctx.c_sk, ctx.peers[sender].c_pk, domain=Domain.SHARE_AEAD, session=ctx.info.session,
                round=ctx.info.round, tag=ctx.info.tag, stage=Stage.SHARE_KEYS.value,
                sender=sender, receiver=ctx.pid,
            )
            plain = crypto.open_sealed(aead, ad, blob, what=f"share from {sender} to {ctx.pid}")
            src, dst, s_share, b_share = decode_share_plaintext(plain)
            if (src, dst) != (sender, ctx.pid):
                raise self.refuse(AbortReason.MALFORMED_CLAIM, f"a share from {sender} names {src}->{dst}")
            ctx.held[sender] = (shamir.decode_share(s_share), shamir.decode_share(b_share))

        settings = ctx.info.settings
        quantizer = settings.quantizer(len(ctx.clients))
        acc = quantizer.quantize(ctx.vector)
        expander = MaskExpander(settings.prg, quantizer.bits)
        expander.add_into(acc, ctx.b_seed)
        if ctx.blind_seed:  # blind_sum: a mask the aggregator never learns, removed by the clients
            expander.add_into(acc, ctx.blind_seed)
        for peer in sorted(senders):
            seed = crypto.pairwise_seed(
                ctx.s_sk, ctx.peers[peer].s_pk, session=ctx.info.session, round=ctx.info.round,
                tag=ctx.info.tag, pair=(ctx.pid, peer),
            )
            expander.add_into(acc, seed, subtract=peer < ctx.pid)
        ctx.send(Stage.MASKED_INPUT, encode_packed(acc, quantizer.bits))
        ctx.vector = ctx.vector[:0]  # the input is no longer needed
        return ConsistencyCheck(ctx) if settings.signatures else Unmask(ctx)
