"""CKKS key distribution between party programs: ``CKKSKeySetup.ensure``'s steps, each end in its owner's process.

In process, :meth:`~securefg.protocol.ckks.key_setup.CKKSKeySetup.ensure` plays every role. Here
the server decides what is missing (who got which key is public routing knowledge, kept in its
ledger) and drives at most two Flower steps:

1. ``ckks/sealing`` to the decrypting clients whose sealing key the key holder lacks: each
   publishes it to the key holder (relayed by the server, which cannot alter it: the channel
   authenticates the client to the key holder).
2. ``ckks/keys`` to the key holder: it keeps the sealing keys, generates its secret context on
   first use and sends the server its public context (with Galois keys when asked), each
   decrypting client the secret context sealed to it, and the encrypt-only clients the public
   context. Clients install what they got when their next CKKS action runs (:class:`NodeKeys`).

The envelopes are the in-process ones (same sender, receivers, tag, stage, form and payload
sizes), so transcripts count the same bytes on both backends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from securefg.errors import MechanismError, ProtocolError, SecretKeyError
from securefg.federation.party import SERVER
from securefg.federation.program.calls import party_call, stand_ins
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.server_runtime import ServerRuntime
from securefg.federation.program.step import Step
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.relay import sealing_directory
from securefg.protocol.stack import ProtocolStack

ACTION_SEALING = "ckks/sealing"
ACTION_KEYS = "ckks/keys"
LEDGER = "program/ckks-keys"


def _names(text: object) -> list[str]:
    return [p for p in str(text).split(",") if p]


def ensure_keys(rt: ServerRuntime, keys: CKKSKeySetup, call: ExchangeCall, *, kind: ExchangeKind,
                encryptors: Iterable[str], decryptors: Iterable[str], galois: bool) -> str:
    """The server's half of ``CKKSKeySetup.ensure``; returns the key holder.

    Raises:
        MechanismError: The key holder is not connected or dropped out.
        SecretKeyError: The server is listed as a decryptor.
    """
    holder = keys.holder(call)
    if holder not in rt.peers or holder in rt.dropped:
        raise MechanismError(f"CKKS key holder {holder!r} is not online ({rt.dropped.get(holder, 'not connected')}); "
                             "nobody can decrypt")
    ledger = rt.party.state.setdefault(LEDGER, {})
    held = ledger.setdefault(f"{holder}/{keys.preset.fingerprint}", {"public": set(), "secret": set()})
    sealing: set[str] = ledger.setdefault(f"{holder}/sealing", set())
    server_ctx = keys.held(call, SERVER)
    to_server = server_ctx is None or (galois and not server_ctx.has_galois_keys())
    dec = [p for p in dict.fromkeys(decryptors) if p != holder and p not in rt.dropped]
    if SERVER in dec:
        raise SecretKeyError("the server may never receive the CKKS secret key")
    need_secret = [p for p in dec if p not in held["secret"]]
    publish = [p for p in need_secret if p not in sealing]
    if publish:
        rt.step(publish, action=ACTION_SEALING, round=call.round, tag=call.tag, info={"holder": holder, "kind": kind.value})
        sealing.update(p for p in publish if p not in rt.dropped)
        need_secret = [p for p in need_secret if p not in rt.dropped]
    need_public = [p for p in dict.fromkeys(encryptors)
                   if p not in (holder, SERVER, *need_secret) and p not in rt.dropped
                   and p not in held["public"] and p not in held["secret"]]
    if not (to_server or need_secret or need_public):
        return holder
    info = {"kind": kind.value, "galois": int(galois), "server": int(to_server),
            "secret": ",".join(need_secret), "public": ",".join(need_public)}
    if holder not in rt.step([holder], action=ACTION_KEYS, round=call.round, tag=call.tag, info=info):
        raise MechanismError(f"CKKS key holder {holder!r} dropped out during key setup: {rt.dropped.get(holder)}")
    if to_server:
        got = rt.transport.receive_from(SERVER, [holder], tag=call.tag, round=call.round, stage=Stage.PUBLIC_CONTEXT)
        if holder not in got:
            raise MechanismError(f"key holder {holder!r} sent the server no public context")
        keys.accept_public(call, SERVER, holder, got[holder])
    held["secret"].update(need_secret)
    held["public"].update(need_public)
    return holder


class NodeKeys:
    """A client's or the key holder's half of the key distribution.

    Args:
        rt (ClientRuntime): This party's runtime (registers ``ckks/sealing`` and ``ckks/keys``).
        stack (ProtocolStack): The run's stack.
        pids (Sequence[str]): Every non-server party of the run (public).
    """

    def __init__(self, rt: ClientRuntime, stack: ProtocolStack, pids: Sequence[str]) -> None:
        self.rt, self.stack = rt, stack
        self.parties = stand_ins(rt.party, pids)
        rt.on(ACTION_SEALING, self._on_sealing)
        rt.on(ACTION_KEYS, self._on_keys)

    def call(self, tag: str, round: int, kind: ExchangeKind) -> tuple[CKKSKeySetup, ExchangeCall]:
        """The key roles of ``tag``'s CKKS mechanism and this party's call for it."""
        res = self.stack.resolve(tag, kind)
        keys = getattr(res.mechanism, "keys", None)
        if not isinstance(keys, CKKSKeySetup):
            raise ProtocolError(f"tag {tag!r} is not carried by a CKKS mechanism ({res.mechanism.name!r})")
        return keys, party_call(self.rt.transport, self.parties, round=round, tag=tag, res=res, kind=kind)

    def install(self, keys: CKKSKeySetup, call: ExchangeCall) -> None:
        """Keep the contexts the key holder sent this party for ``call`` (public, then sealed secret)."""
        pid, holder = self.rt.party.pid, keys.holder(call)
        for env in self.rt.transport.receive(pid, tag=call.tag, round=call.round, stage=Stage.PUBLIC_CONTEXT):
            keys.accept_public(call, pid, holder, env)
        for env in self.rt.transport.receive(pid, tag=call.tag, round=call.round, stage=Stage.SECRET_CONTEXT):
            keys.accept_secret(call, pid, holder, env)

    def _on_sealing(self, step: Step) -> None:
        keys, call = self.call(step.tag, step.round, ExchangeKind(step.info["kind"]))
        holder = str(step.info["holder"])
        if holder != keys.holder(call):
            raise ProtocolError(f"the server asked for a sealing key for {holder!r}, but the key holder is {keys.holder(call)!r}")
        sealing_directory.publish(call, self.rt.party.pid, [holder])

    def _on_keys(self, step: Step) -> None:
        pid = self.rt.party.pid
        keys, call = self.call(step.tag, step.round, ExchangeKind(step.info["kind"]))
        if keys.holder(call) != pid:
            raise ProtocolError(f"{pid} was asked to distribute CKKS keys but the key holder is {keys.holder(call)!r}")
        for env in self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
            sealing_directory.accept(call, pid, env)
        secret = keys.holder_secret(call, pid)
        if step.info.get("server"):
            keys.send_public(call, pid, secret, [SERVER], galois=bool(step.info.get("galois")))
        if _names(step.info.get("secret", "")):
            keys.send_secret(call, pid, secret, _names(step.info["secret"]))
        if _names(step.info.get("public", "")):
            keys.send_public(call, pid, secret, _names(step.info["public"]), galois=False)
