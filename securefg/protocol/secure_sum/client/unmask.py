"""Client stage 5, Unmask: reveal, for each neighbour, exactly one kind of share.

A neighbour whose masked input reached the aggregator gets its self-mask share revealed; one
that dropped before it gets its ``s_sk`` share revealed. The two lists must be disjoint and
this stage runs once, so an honest client never reveals both kinds for the same peer.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from securefg.errors import CodecError, EquivocationError
from securefg.protocol.secure_sum import shamir
from securefg.protocol.secure_sum.client.base import ClientStage, Done
from securefg.protocol.secure_sum.constants import AbortReason, ShareKind, Stage
from securefg.protocol.secure_sum.messages import UnmaskRequest, encode_unmask_shares
from securefg.protocol.secure_sum.pinned import consistency_message, witnesses


class Unmask(ClientStage):
    """Expects the survivor list and this client's dead neighbours; answers with shares.

    Refuses (fcp r3 checks) a list that repeats an id or names an unknown one, lists this
    client as dead, lists a client both dead and alive, lists as dead a peer whose shares this
    client never held (already dead earlier), leaves a held peer unaccounted for, has fewer than
    ``max(t, 2)`` survivors, or — with signatures — differs from the signed list or carries
    fewer than ``t`` valid signatures. With pinned keys each of these signature failures is an
    :class:`EquivocationError`, and the valid signers must also number more than
    :func:`~securefg.protocol.secure_sum.pinned.witnesses` of the call's clients: then no other
    survivor list can have gathered as many, unless more than ``adversarial_rate * n`` clients
    signed both.
    """

    expects = Stage.UNMASK

    def on_message(self, payload: bytes) -> ClientStage:
        ctx = self.ctx
        try:
            req = UnmaskRequest.decode(payload)
        except CodecError as exc:
            raise self.refuse(AbortReason.MALFORMED_CLAIM, f"unreadable unmask request: {exc}") from exc
        alive = self.check_ids(req.survivors, allowed=ctx.clients, what="the survivor list")
        dead = self.check_ids(req.dead, allowed=ctx.clients, what="the dead list")
        if ctx.pid in dead or ctx.pid not in alive:
            raise self.refuse(AbortReason.SELF_LISTED_AS_DEAD, "the server lists this client as dead")
        if alive & dead:
            raise self.refuse(AbortReason.DEAD_AND_ALIVE, f"{sorted(alive & dead)} listed both dead and alive")
        if dead - ctx.held.keys():
            raise self.refuse(
                AbortReason.ALREADY_DEAD, f"{sorted(dead - ctx.held.keys())} were never live peers of this client"
            )
        unaccounted = ctx.held.keys() - alive - dead
        if unaccounted:
            raise self.refuse(AbortReason.UNACCOUNTED_PEER, f"peers {sorted(unaccounted)} are neither dead nor alive")
        need = ctx.info.settings.min_survivors(ctx.threshold)
        if len(alive) < need:
            raise self.refuse(AbortReason.BELOW_THRESHOLD, f"{len(alive)} survivors, fewer than {need}")
        if ctx.info.settings.signatures:
            self._check_signatures(req, alive)

        rows = []
        for peer in sorted(ctx.held):
            s_share, b_share = ctx.held[peer]
            if peer in dead:
                rows.append((peer, ShareKind.S_KEY, shamir.encode_share(s_share)))
            else:
                rows.append((peer, ShareKind.SELF_MASK, shamir.encode_share(b_share)))
        ctx.send(Stage.UNMASK, encode_unmask_shares(rows))
        ctx.held.clear()
        return Done(ctx)

    def _check_signatures(self, req: UnmaskRequest, alive: set[str]) -> None:
        ctx = self.ctx
        pinned = ctx.info.pinned is not None
        if alive != set(ctx.survivors):
            if pinned:
                raise self.forged(EquivocationError, AbortReason.EQUIVOCATION, "the survivor list",
                                  "at Unmask differs from the one this client signed")
            raise self.refuse(AbortReason.BAD_SIGNATURES, "the survivor list differs from the one this client signed")
        signers = self.check_ids([pid for pid, _ in req.signatures], allowed=alive, what="the signer list")
        message = consistency_message(ctx.info, ctx.clients, sorted(alive))
        for pid, sig in req.signatures:
            try:
                Ed25519PublicKey.from_public_bytes(ctx.survivor_sign_keys[pid]).verify(sig, message)
            except (InvalidSignature, ValueError) as exc:
                if pinned:  # a pinned key's signature over other lists: the server showed it other lists
                    raise self.forged(EquivocationError, AbortReason.EQUIVOCATION, f"the signature of {pid!r}",
                                      "is not over the survivor and client lists this client signed (the server "
                                      "showed that client other lists)") from exc
                raise self.refuse(AbortReason.BAD_SIGNATURES, f"the signature of {pid!r} does not verify") from exc
        need = max(ctx.threshold, witnesses(len(ctx.clients), ctx.info.settings.adversarial_rate))
        if not pinned and len(signers) < ctx.threshold:
            raise self.refuse(AbortReason.BAD_SIGNATURES, f"{len(signers)} signatures, fewer than t = {ctx.threshold}")
        if pinned and len(signers) < need:
            raise self.forged(EquivocationError, AbortReason.EQUIVOCATION, "the survivor list",
                              f"is vouched for by {len(signers)} of the {len(ctx.clients)} clients, fewer than "
                              f"{need}: the server could be showing the others another list")
