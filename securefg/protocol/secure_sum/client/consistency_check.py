"""Client stage 4 (optional), ConsistencyCheck: sign the survivor list the server claims.

Bonawitz et al. 2017, round 3 of the actively secure protocol: every client signs the set
``U_3`` of clients whose masked inputs the server says it holds. In Unmask, a client reveals
nothing unless at least ``t`` valid signatures over the *same* list come back, so a server that
tells different clients different lists (to collect both share kinds of one client) is caught.

Without a PKI, signing keys travel in AdvertiseKeys through the server: the check defends
against a server that equivocates about survivors, not one that also substitutes keys. With
pinned keys (:mod:`~securefg.protocol.secure_sum.pinned`) every signing key must be the
signer's pinned key, and the signature binds the client list too.
"""

from __future__ import annotations

from securefg.errors import CodecError, KeySubstitutionError
from securefg.protocol.secure_sum import crypto
from securefg.protocol.secure_sum.client.base import ClientStage
from securefg.protocol.secure_sum.client.unmask import Unmask
from securefg.protocol.secure_sum.constants import AbortReason, Stage
from securefg.protocol.secure_sum.messages import decode_peer_keys
from securefg.protocol.secure_sum.pinned import consistency_message


class ConsistencyCheck(ClientStage):
    """Expects the survivor list with each survivor's signing key; answers with a signature.

    Refuses a list that repeats or invents ids, omits this client, is shorter than
    ``max(t, 2)``, or gives a neighbour a signing key other than the one it advertised (with
    pinned keys: any survivor a key other than its pinned one, :class:`KeySubstitutionError`).
    """

    expects = Stage.CONSISTENCY_CHECK

    def on_message(self, payload: bytes) -> ClientStage:
        ctx = self.ctx
        assert ctx.sign_sk is not None
        try:
            rows = decode_peer_keys(payload)
        except CodecError as exc:
            raise self.refuse(AbortReason.MALFORMED_CLAIM, f"unreadable survivor list: {exc}") from exc
        survivors = [r.pid for r in rows]
        self.check_ids(survivors, allowed=ctx.clients, what="the survivor list")
        if ctx.pid not in survivors:
            raise self.refuse(AbortReason.SELF_LISTED_AS_DEAD, "the survivor list omits this client")
        need = ctx.info.settings.min_survivors(ctx.threshold)
        if len(survivors) < need:
            raise self.refuse(AbortReason.BELOW_THRESHOLD, f"{len(survivors)} survivors, fewer than {need}")
        pinned = ctx.info.pinned
        for r in rows:
            if pinned is not None and r.sign_pk != pinned.key_of(r.pid):
                raise self.forged(KeySubstitutionError, AbortReason.KEY_SUBSTITUTION, f"the signing key of {r.pid!r}",
                                  "in the survivor list is not its pinned key")
            known = ctx.own_keys if r.pid == ctx.pid else ctx.peers.get(r.pid)
            if known is not None and known.sign_pk != r.sign_pk:
                raise self.refuse(AbortReason.CONFIG_MISMATCH, f"the signing key of {r.pid!r} changed since AdvertiseKeys")
            if len(r.sign_pk) != crypto.KEY_BYTES:
                raise self.refuse(AbortReason.MALFORMED_CLAIM, f"{r.pid!r} has a malformed signing key")
        ctx.survivors = tuple(survivors)
        ctx.survivor_sign_keys = {r.pid: r.sign_pk for r in rows}
        signature = ctx.sign_sk.sign(consistency_message(ctx.info, ctx.clients, survivors))
        ctx.send(Stage.CONSISTENCY_CHECK, signature)
        return Unmask(ctx)
