"""Client stage 1, AdvertiseKeys: check the round's configuration, send fresh public keys."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import CodecError, ConfigError, InvalidClaimError, KeySubstitutionError
from securefg.protocol.secure_sum.client.base import ClientStage
from securefg.protocol.secure_sum.client.share_keys import ShareKeys
from securefg.protocol.secure_sum.constants import AbortReason, Stage
from securefg.protocol.secure_sum.crypto import KEY_BYTES
from securefg.protocol.secure_sum.messages import AdvertiseRequest, PeerKeys, encode_keys
from securefg.protocol.secure_sum.pinned import aggregator_key_message, key_message
from securefg.protocol.secure_sum.range_check import check_input


class AdvertiseKeys(ClientStage):
    """Expects the aggregator's configuration; answers with ``c_pk``, ``s_pk`` (and ``sign_pk``).

    Refuses (:class:`InvalidClaimError`) a client list that repeats an id or omits this client,
    neighbours that repeat, include this client or fall outside the list, a degree or threshold
    other than what this client's stack gives for that many clients, a vector length other than
    its own input's, and a missing or unexpected target key. With pinned keys it also refuses
    (:class:`KeySubstitutionError`) a client list naming an id without a pinned key and a target
    key its target did not sign, and signs its own keys with its pinned key. With a
    ``norm_bound`` it first refuses its own input beyond it (before anything is sent).
    """

    expects = Stage.ADVERTISE_KEYS

    def on_message(self, payload: bytes) -> ClientStage:
        ctx = self.ctx
        pinned, settings = ctx.info.pinned, ctx.info.settings
        check_input(ctx.vector, bound=settings.norm_bound, pid=ctx.pid, tag=ctx.info.tag)
        try:
            req = AdvertiseRequest.decode(payload, signed=pinned is not None)
        except CodecError as exc:
            raise self.refuse(AbortReason.MALFORMED_CLAIM, f"unreadable configuration: {exc}") from exc
        if ctx.pid not in req.clients:
            raise self.refuse(AbortReason.UNKNOWN_ID, "the client list does not include this client")
        self.check_ids(req.clients, allowed=req.clients, what="the client list")
        if ctx.pid in req.neighbours:
            raise self.refuse(AbortReason.SELF_LISTED_AS_PEER, "the server lists this client as its own neighbour")
        self.check_ids(req.neighbours, allowed=req.clients, what="the neighbour list")
        degree, threshold = ctx.info.settings.graph(len(req.clients))
        self._expect(req.degree == degree and len(req.neighbours) == degree, f"degree {req.degree} (expected {degree})")
        self._expect(req.threshold == threshold, f"threshold {req.threshold} (expected {threshold})")
        self._expect(req.length == ctx.vector.size, f"vector length {req.length} (this input has {ctx.vector.size})")
        relayed = ctx.info.route.relayed
        self._expect(len(req.aggregator_key) == (KEY_BYTES if relayed else 0), "target key presence or size")
        if pinned is not None:
            unpinned = sorted(c for c in req.clients if pinned.key_of(c) is None)
            if unpinned:
                raise self.forged(KeySubstitutionError, AbortReason.KEY_SUBSTITUTION, "the client list",
                                  f"names {unpinned}, which have no pinned key (clients the server made up?)")
            agg = ctx.info.aggregator
            if relayed and not pinned.verify(agg, req.aggregator_sig,
                                             aggregator_key_message(ctx.info, agg, req.clients, req.aggregator_key)):
                raise self.forged(KeySubstitutionError, AbortReason.KEY_SUBSTITUTION, f"the end-to-end key of {agg!r}",
                                  "is not signed by its pinned key over this call and client list")
            if ctx.identity is None:
                raise ConfigError(f"{ctx.pid} holds no pinned signing key, but its stack asks for pinned_keys")

        ctx.clients = req.clients
        ctx.neighbours = frozenset(req.neighbours)
        ctx.threshold = threshold
        ctx.aggregator_pk = req.aggregator_key
        ctx.c_sk = X25519PrivateKey.generate()
        ctx.s_sk = X25519PrivateKey.generate()
        # with pinned keys the pinned key signs (Bonawitz et al. 2017's PKI key); else a fresh one
        ctx.sign_sk = ctx.identity if pinned is not None else Ed25519PrivateKey.generate() if settings.signatures else None
        c_pk, s_pk = ctx.c_sk.public_key().public_bytes_raw(), ctx.s_sk.public_key().public_bytes_raw()
        key_sig = b""
        if pinned is not None and ctx.sign_sk is not None:
            key_sig = ctx.sign_sk.sign(key_message(ctx.info, ctx.pid, req.clients, c_pk, s_pk))
        ctx.own_keys = PeerKeys(
            ctx.pid, c_pk, s_pk, ctx.sign_sk.public_key().public_bytes_raw() if ctx.sign_sk else b"", key_sig,
        )
        ctx.send(Stage.ADVERTISE_KEYS, encode_keys(ctx.own_keys, signed=pinned is not None))
        return ShareKeys(ctx)

    def _expect(self, ok: bool, what: str) -> None:
        if not ok:
            raise InvalidClaimError(
                f"{self.ctx.pid} aborts: the server's {what} does not match this client's stack "
                f"({AbortReason.CONFIG_MISMATCH.value})",
                reason=AbortReason.CONFIG_MISMATCH,
            )
