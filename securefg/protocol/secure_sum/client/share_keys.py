"""Client stage 2, ShareKeys: check the neighbours' keys, send each one encrypted Shamir shares."""

from __future__ import annotations

import os

from securefg.errors import CodecError, KeySubstitutionError
from securefg.protocol.secure_sum import crypto, shamir
from securefg.protocol.secure_sum.client.base import ClientStage
from securefg.protocol.secure_sum.client.masked_input import MaskedInput
from securefg.protocol.secure_sum.constants import AbortReason, Domain, Stage
from securefg.protocol.secure_sum.messages import (
    PeerKeys,
    decode_peer_keys,
    encode_addressed,
    encode_share_plaintext,
)
from securefg.protocol.secure_sum.pinned import key_message
from securefg.protocol.secure_sum.prg import SEED_BYTES


class ShareKeys(ClientStage):
    """Expects the live neighbours' public keys; answers with one AEAD ciphertext per neighbour.

    The self-mask seed ``b`` (32 fresh bytes from the OS CSPRNG) and the raw ``s_sk`` are each
    split t-of-k with :mod:`~securefg.protocol.secure_sum.shamir`; neighbour ``j`` gets
    ``AEAD_{KA(c_sk, c_pk_j)}(i || j || s_share_j || b_share_j)`` with the call, stage, sender and
    receiver as associated data.

    Refuses a list that repeats a peer, names a non-neighbour or this client, has fewer than
    ``t`` peers, or reuses a key (this client's own, or another peer's). With pinned keys it
    first refuses (:class:`KeySubstitutionError`) a peer whose keys are not signed by the peer's
    pinned key over this call and *this client's* client list: a key the server substituted,
    or a peer the server showed another client list.
    """

    expects = Stage.SHARE_KEYS

    def on_message(self, payload: bytes) -> ClientStage:
        ctx = self.ctx
        assert ctx.own_keys is not None and ctx.c_sk is not None and ctx.s_sk is not None
        pinned = ctx.info.pinned
        try:
            peers = decode_peer_keys(payload, signed=pinned is not None)
        except CodecError as exc:
            raise self.refuse(AbortReason.MALFORMED_CLAIM, f"unreadable peer keys: {exc}") from exc
        ids = [p.pid for p in peers]
        if ctx.pid in ids:
            raise self.refuse(AbortReason.SELF_LISTED_AS_PEER, "the server lists this client among its peers")
        self.check_ids(ids, allowed=ctx.neighbours, what="the peer-key list")
        if len(peers) < ctx.threshold:
            raise self.refuse(
                AbortReason.BELOW_THRESHOLD, f"only {len(peers)} live neighbours, fewer than t = {ctx.threshold}"
            )
        seen = [ctx.own_keys.c_pk, ctx.own_keys.s_pk]
        for p in peers:
            if len(p.c_pk) != crypto.KEY_BYTES or len(p.s_pk) != crypto.KEY_BYTES:
                raise self.refuse(AbortReason.MALFORMED_CLAIM, f"{p.pid!r} has a malformed public key")
            seen += [p.c_pk, p.s_pk]
            if pinned is not None:
                self._check_pinned(p)
        if len(set(seen)) != len(seen):
            raise self.refuse(AbortReason.DUPLICATE_KEY, "two parties advertise the same public key")
        ctx.peers = {p.pid: p for p in peers}

        ctx.b_seed = os.urandom(SEED_BYTES)
        xs = [ctx.x_of(p) for p in sorted(ctx.peers)]
        s_shares = shamir.split(ctx.s_sk.private_bytes_raw(), xs, ctx.threshold)
        b_shares = shamir.split(ctx.b_seed, xs, ctx.threshold)
        rows = []
        for pid in sorted(ctx.peers):
            x = ctx.x_of(pid)
            aead, ad = crypto.directional_aead(
                ctx.c_sk, ctx.peers[pid].c_pk, domain=Domain.SHARE_AEAD, session=ctx.info.session,
                round=ctx.info.round, tag=ctx.info.tag, stage=Stage.SHARE_KEYS.value,
                sender=ctx.pid, receiver=pid,
            )
            plain = encode_share_plaintext(
                ctx.pid, pid, shamir.encode_share(s_shares[x]), shamir.encode_share(b_shares[x])
            )
            rows.append((pid, crypto.seal(aead, ad, plain)))
        ctx.send(Stage.SHARE_KEYS, encode_addressed(rows))
        return MaskedInput(ctx)

    def _check_pinned(self, p: PeerKeys) -> None:
        ctx = self.ctx
        assert ctx.info.pinned is not None
        if p.sign_pk != ctx.info.pinned.key_of(p.pid):
            raise self.forged(KeySubstitutionError, AbortReason.KEY_SUBSTITUTION, f"the signing key of {p.pid!r}",
                              "is not its pinned key")
        if not ctx.info.pinned.verify(p.pid, p.key_sig, key_message(ctx.info, p.pid, ctx.clients, p.c_pk, p.s_pk)):
            raise self.forged(KeySubstitutionError, AbortReason.KEY_SUBSTITUTION, f"the keys of {p.pid!r}",
                              "are not signed by its pinned key over this call and client list (keys the server "
                              "substituted, or it showed that client another client list)")
