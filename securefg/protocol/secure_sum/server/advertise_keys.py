"""Aggregator stage 1, AdvertiseKeys: announce the round, collect keys, send live neighbours' keys."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from securefg.errors import CodecError, ConfigError
from securefg.protocol.secure_sum.constants import ClientDropReason, Stage
from securefg.protocol.secure_sum.context import AggregatorContext
from securefg.protocol.secure_sum.crypto import KEY_BYTES
from securefg.protocol.secure_sum.messages import AdvertiseRequest, PeerKeys, decode_keys, encode_peer_keys
from securefg.protocol.secure_sum.pinned import aggregator_key_message, key_message
from securefg.protocol.secure_sum.server.base import ServerStage
from securefg.protocol.secure_sum.server.share_keys import ShareKeys


def peel(live: set[str], graph: Mapping[str, frozenset[str]], threshold: int) -> set[str]:
    """Remove clients with fewer than ``threshold`` live neighbours until none is left to remove."""
    live = set(live)
    while True:
        weak = {pid for pid in live if len(graph[pid] & live) < threshold}
        if not weak:
            return live
        live -= weak


def begin(ctx: AggregatorContext, online: Collection[str]) -> AdvertiseKeys:
    """Send every online client the round's configuration; return the stage awaiting keys. With
    pinned keys a ``peer_sum`` target signs its end-to-end key (so the relay cannot swap it).

    Raises:
        ConfigError: Pinned keys in a relayed call whose target holds no pinned signing key.
    """
    agg_pk = ctx.e2e_sk.public_key().public_bytes_raw() if ctx.e2e_sk is not None else b""
    pinned = ctx.info.pinned is not None
    agg_sig = b""
    if pinned and agg_pk:
        if ctx.identity is None:
            raise ConfigError(f"{ctx.pid} holds no pinned signing key, but its stack asks for pinned_keys")
        agg_sig = ctx.identity.sign(aggregator_key_message(ctx.info, ctx.pid, ctx.clients, agg_pk))
    for pid in ctx.clients:
        if pid not in online:
            ctx.drop(pid, ClientDropReason.NO_RESPONSE)
            continue
        req = AdvertiseRequest(
            clients=ctx.clients,
            neighbours=tuple(sorted(ctx.graph[pid])),
            threshold=ctx.threshold,
            degree=ctx.degree,
            length=ctx.length,
            aggregator_key=agg_pk,
            aggregator_sig=agg_sig,
        )
        ctx.send(pid, Stage.ADVERTISE_KEYS, req.encode(signed=pinned))
    return AdvertiseKeys(ctx, (p for p in ctx.clients if p in online))


class AdvertiseKeys(ServerStage):
    """Collects public keys; drops malformed and duplicated keys, keys not signed by their
    owner's pinned key (pinned keys: ``INVALID_SIGNATURE``) and clients left with fewer than
    ``t`` live neighbours; aborts below ``max(t, 2)`` live clients."""

    stage = Stage.ADVERTISE_KEYS

    def on_responses(self, got: Mapping[str, bytes]) -> ServerStage:
        ctx = self.ctx
        sign_len = KEY_BYTES if ctx.info.settings.signatures else 0
        pinned = ctx.info.pinned is not None
        for pid, payload in got.items():
            try:
                keys = decode_keys(pid, payload, signed=pinned)
            except CodecError:
                ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            if (len(keys.c_pk), len(keys.s_pk), len(keys.sign_pk)) != (KEY_BYTES, KEY_BYTES, sign_len):
                ctx.drop(pid, ClientDropReason.MALFORMED_MESSAGE)
                continue
            if pinned and not self._pinned_ok(keys):
                ctx.drop(pid, ClientDropReason.INVALID_SIGNATURE)
                continue
            ctx.keys[pid] = keys
        uses = Counter(k for keys in ctx.keys.values() for k in {keys.c_pk, keys.s_pk} | ({keys.sign_pk} - {b""}))
        for pid, keys in ctx.keys.items():
            if keys.c_pk == keys.s_pk or any(uses[k] > 1 for k in (keys.c_pk, keys.s_pk)):
                ctx.drop(pid, ClientDropReason.DUPLICATE_KEY)
        valid = {pid for pid in ctx.keys if pid not in ctx.drops}
        live = peel(valid, ctx.graph, ctx.threshold)
        for pid in valid - live:
            ctx.drop(pid, ClientDropReason.TOO_FEW_NEIGHBOURS)
        self.require(len(live), ctx.info.settings.min_survivors(ctx.threshold), "clients with enough live neighbours")
        for pid in sorted(live):
            told = ctx.graph[pid] & live
            ctx.told_keys[pid] = frozenset(told)
            ctx.send(pid, Stage.SHARE_KEYS, encode_peer_keys([ctx.keys[j] for j in sorted(told)], signed=pinned))
        return ShareKeys(ctx, live)

    def _pinned_ok(self, keys: PeerKeys) -> bool:
        """Whether ``keys`` carry their owner's pinned signing key and its signature over them."""
        info = self.ctx.info
        assert info.pinned is not None
        return keys.sign_pk == info.pinned.key_of(keys.pid) and info.pinned.verify(
            keys.pid, keys.key_sig, key_message(info, keys.pid, self.ctx.clients, keys.c_pk, keys.s_pk))
