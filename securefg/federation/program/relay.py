"""``relay`` under ``sealed_relay`` and ``plaintext`` as party-program halves (``ckks_relay``
delegated to :mod:`~securefg.federation.program.ckks_flows`).

Each runs the lockstep mechanism's flow with each role in its own process and emits the same
envelopes (sender, receivers, tag, stage, form, payload sizes), with the mechanism's own helpers:

* **sealed_relay** (:class:`~securefg.protocol.relay.sealed_relay.SealedRelay`, without the
  shuffler): the sealing-key directory first (``sealed_relay/sealing`` step: every recipient whose
  key a sender lacks publishes it, :func:`~securefg.protocol.relay.sealing_directory.publish`, to
  those senders, and for a shuffled relay its membership secret,
  :func:`~securefg.protocol.relay.membership.publish`, through the server, encrypted and
  authenticated end to end by the channel keys); then the ``relay/upload`` step (each sender
  frames and pads its item and seals it to every recipient, tied to its sender:
  :func:`~securefg.protocol.relay.sealed_relay.seal_item`, one ``relay/upload`` envelope of
  boxes); the server checks the routing and shuffles each recipient's boxes
  (``SealedRelay._server_route``) and sends each its ``relay/forward`` bundle; the
  ``relay/forward`` step (each recipient checks the count and that every box came from a member,
  or from its sender when unshuffled, and opens it).
* **plaintext** (``Plaintext.run_relay``): the items in the clear at ``relay/upload``; the server
  combines them if the method planned a mix (``Plaintext.plan_mix``), shuffles each bundle and
  forwards every item as its own ``relay/forward`` envelope.

Which (holder, owner) sealing keys were published is public routing knowledge: the server keeps
it in a ledger (shared with the CKKS key setup's, which publishes sealing keys the same way), so
each key crosses once per session, as ``sealing_directory.ensure`` does in process; membership
secrets have a ledger of their own (:data:`MEMBER_LEDGER`). Whether the relay is shuffled rides
in the upload and forward steps' ``shuffle`` info (missing means shuffled): it says how items are
tied to their senders.

A client offers its item while it handles one of the method's actions
(:meth:`NodeRelay.offer`); the server then runs the relay; a recipient reads what it got in a
later action (:meth:`NodeRelay.relayed`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from securefg.errors import ConfigError, InvalidInputError, ProtocolError, UnexpectedMessageError
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SERVER
from securefg.federation.program import ckks_flows
from securefg.federation.program.calls import party_call
from securefg.federation.program.ckks_keys import LEDGER as CKKS_LEDGER
from securefg.federation.program.halves import client_half
from securefg.federation.program.step import Step
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.plaintext import Plaintext, _mix
from securefg.protocol.relay import membership, sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs
from securefg.protocol.relay.ckks_relay import CKKSRelay
from securefg.protocol.relay.constants import RelayStage
from securefg.protocol.relay.sealed_relay import SealedRelay, open_bundle, seal_upload
from securefg.protocol.stack import Resolved
from securefg.protocol.transform_rules import require_item_transforms

if TYPE_CHECKING:
    from securefg.federation.program.exchange import ClientExchange, ServerExchange

ACTION_SEALING = "sealed_relay/sealing"
ACTION_UPLOAD = "relay/upload"
ACTION_FORWARD = "relay/forward"
#: The server's ledger of published sealing keys: ``{(holder, owner), ...}``.
LEDGER = "program/sealing-keys"
#: The server's ledger of sent membership secrets: ``{(holder, owner), ...}``.
MEMBER_LEDGER = "program/membership-secrets"
RELAY = ExchangeKind.RELAY


def _names(text: object) -> list[str]:
    return [p for p in str(text).split(",") if p]


def _resolve(stack: object, tag: str) -> Resolved:
    """The binding of relay ``tag``; refuses mechanisms without party-program halves."""
    res = stack.resolve(tag, RELAY)  # type: ignore[attr-defined]
    require_item_transforms(tag, res.transforms)
    mech = res.mechanism
    if not isinstance(mech, (SealedRelay, Plaintext, CKKSRelay)):
        raise ConfigError(f"relay tag {tag!r}: mechanism {mech.name!r} has no party-program halves "
                          "(sealed_relay, plaintext, ckks_relay)")
    if isinstance(mech, SealedRelay) and mech.params["shuffler"]:
        raise ConfigError(f"relay tag {tag!r}: sealed_relay with shuffler = true has no party-program halves yet; "
                          "set shuffler = false")
    return res


def check_relay(stack: object, tag: str) -> None:
    """Refuse, before anything runs, a relay binding that party programs cannot carry."""
    _resolve(stack, tag)


# ====================================================================== server half
def relay(ex: ServerExchange, tag: str, *, clients: Iterable[str] | None = None, exclude_self: bool = True,
          shuffle: bool = True) -> list[str]:
    """The server's half of ``Exchange.relay``: forwards the items ``clients`` offered for ``tag``
    among them (combined first if the method planned a mix); returns the recipients that got a bundle."""
    ex.use_tag(tag, RELAY)
    res = _resolve(ex.stack, tag)
    rt = ex.rt
    members = [c for c in (rt.live if clients is None else clients) if c not in rt.dropped]
    mech = res.mechanism
    if isinstance(mech, CKKSRelay):
        return ckks_flows.relay(rt, ex.stack, tag, round=ex.round, clients=members, exclude_self=exclude_self,
                                shuffle=shuffle)
    call = ex.call(tag, res, RELAY)
    if isinstance(mech, SealedRelay):
        return _sealed_server(ex, mech, call, sorted(members), exclude_self=exclude_self, shuffle=shuffle)
    assert isinstance(mech, Plaintext)
    return _plaintext_server(ex, mech, call, members, exclude_self=exclude_self, shuffle=shuffle)


def _known(ex: ServerExchange, holder: str, owner: str) -> bool:
    """Whether ``holder`` already holds ``owner``'s sealing key (from a relay or the CKKS key setup)."""
    state = ex.rt.party.state
    return (holder, owner) in state.get(LEDGER, set()) or owner in state.get(CKKS_LEDGER, {}).get(f"{holder}/sealing", ())


def _learn(ex: ServerExchange, holder: str, owner: str) -> None:
    state = ex.rt.party.state
    state.setdefault(LEDGER, set()).add((holder, owner))
    state.setdefault(CKKS_LEDGER, {}).setdefault(f"{holder}/sealing", set()).add(owner)


def _sealed_server(ex: ServerExchange, mech: SealedRelay, call: ExchangeCall, senders: list[str], *,
                   exclude_self: bool, shuffle: bool) -> list[str]:
    """``SealedRelay.run_relay`` as the server (no shuffler)."""
    rt = ex.rt
    # --- the sealing-key directory (sealing_directory.ensure): owners publish to holders lacking their key,
    # and for a shuffled relay their membership secret (membership.ensure)
    members: set[tuple[str, str]] = rt.party.state.setdefault(MEMBER_LEDGER, set())
    need = {o: [h for h in senders if h != o and not _known(ex, h, o)] for o in senders}
    need_member = {o: [h for h in senders if h != o and (h, o) not in members] for o in senders} if shuffle else {}
    owners = [o for o in senders if need.get(o) or need_member.get(o)]
    if owners:
        info = {f"to.{o}": ",".join(need[o]) for o in owners if need[o]}
        info.update({f"member.{o}": ",".join(need_member[o]) for o in owners if need_member.get(o)})
        got = ex.step(owners, action=ACTION_SEALING, tag=call.tag, info=info)
        for o in got:
            for h in need[o]:
                _learn(ex, h, o)
            members.update((h, o) for h in need_member.get(o, []))
        senders = [s for s in senders if s not in rt.dropped]
    # --- each sender seals its item to every recipient and uploads the boxes
    info = {"recipients": ",".join(senders), "exclude_self": int(exclude_self), "shuffle": int(shuffle)}
    answered = ex.step(senders, action=ACTION_UPLOAD, tag=call.tag, stage=RelayStage.UPLOAD, info=info)
    uploads = rt.transport.receive_from(SERVER, sorted(answered), tag=call.tag, round=call.round, stage=RelayStage.UPLOAD)
    if not uploads:
        raise ProtocolError(f"no client uploaded anything for relay {call.tag!r}")
    targets = {s: [r for r in senders if not (exclude_self and r == s)] for s in uploads}
    bundles = mech._server_route({s: env.payload for s, env in uploads.items()}, targets, shuffle=shuffle)
    recipients = [r for r in senders if r not in rt.dropped]
    for r in recipients:
        rt.transport.send(Envelope(SERVER, (r,), call.round, call.tag, pack_blobs(bundles.get(r, [])),
                                   stage=RelayStage.FORWARD, form=Form.SEALED))
    got = ex.step(recipients, action=ACTION_FORWARD, tag=call.tag, stage=RelayStage.FORWARD,
                  info={"senders": ",".join(sorted(uploads)), "exclude_self": int(exclude_self),
                        "shuffle": int(shuffle)})
    return sorted(got)


def _plaintext_server(ex: ServerExchange, mech: Plaintext, call: ExchangeCall, senders: list[str], *,
                      exclude_self: bool, shuffle: bool) -> list[str]:
    """``Plaintext.run_relay`` as the server."""
    rt = ex.rt
    answered = ex.step(senders, action=ACTION_UPLOAD, tag=call.tag, stage=RelayStage.UPLOAD)
    got = rt.transport.receive_from(SERVER, [s for s in senders if s in answered], tag=call.tag, round=call.round,
                                    stage=RelayStage.UPLOAD)
    if not got:
        raise ProtocolError(f"no client uploaded anything for relay {call.tag!r}")
    outputs = {s: env.payload for s, env in got.items()}
    plan = call.state_of(SERVER, mech.name).get("mix", {}).pop(call.tag, None)
    if plan is not None:
        outputs = _mix(plan, outputs)
    rng = random.Random(mech.params["shuffle_seed"])
    receivers = [s for s in senders if s in got]
    for receiver in receivers:
        bundle = [outputs[s] for s in sorted(outputs) if not (exclude_self and s == receiver)]
        if shuffle:
            rng.shuffle(bundle)
        for blob in bundle:
            rt.transport.send(Envelope(SERVER, (receiver,), call.round, call.tag, blob, stage=RelayStage.FORWARD))
    return sorted(ex.step(receivers, action=ACTION_FORWARD, tag=call.tag, stage=RelayStage.FORWARD))


# ====================================================================== client half
@client_half("relay")
class NodeRelay:
    """A client's half of ``relay``: ``sealed_relay`` and ``plaintext`` here, ``ckks_relay``
    through ``ex.ckks``.

    Args:
        ex (ClientExchange): The party's exchange half (registers the relay actions).
    """

    def __init__(self, ex: ClientExchange) -> None:
        self.ex = ex
        self.items: dict[tuple[str, int], bytes] = {}
        self.bundles: dict[tuple[str, int], list[bytes]] = {}
        ex.rt.on(ACTION_SEALING, self._on_sealing)
        ex.rt.on(ACTION_UPLOAD, self._on_upload)
        ex.rt.on(ACTION_FORWARD, self._on_forward)

    @property
    def pid(self) -> str:
        return self.ex.rt.party.pid

    def _call(self, tag: str, round: int) -> tuple[Resolved, ExchangeCall]:
        res = _resolve(self.ex.stack, tag)
        return res, party_call(self.ex.rt.transport, self.ex.parties, round=round, tag=tag, res=res, kind=RELAY)

    # ----------------------------------------------------------- what the method hands over
    def offer(self, tag: str, round: int, item: bytes) -> None:
        """This client's item for ``relay(tag)`` this round."""
        item = self.ex.deviate("relay", tag, item)
        if isinstance(_resolve(self.ex.stack, tag).mechanism, CKKSRelay):
            self.ex.ckks.offer_relay(tag, round, item)
            return
        self.items[(tag, round)] = bytes(item)

    def relayed(self, tag: str, round: int) -> list[bytes]:
        """The items this client received from ``relay(tag)`` this round.

        Raises:
            UnexpectedMessageError: No bundle came.
        """
        if isinstance(_resolve(self.ex.stack, tag).mechanism, CKKSRelay):
            return self.ex.ckks.relayed(tag, round)
        if (tag, round) not in self.bundles:
            raise UnexpectedMessageError(f"{self.pid} received no {tag!r} bundle in round {round}")
        return self.bundles.pop((tag, round))

    # ------------------------------------------------------------------ client actions
    def _on_sealing(self, step: Step) -> None:
        _, call = self._call(step.tag, step.round)
        to = _names(step.info.get(f"to.{self.pid}", ""))
        members = _names(step.info.get(f"member.{self.pid}", ""))
        if not to and not members:
            raise ProtocolError(f"{self.pid} was asked to publish its sealing key for {step.tag!r} to nobody")
        if to:
            sealing_directory.publish(call, self.pid, to)
        if members:  # refuses any receiver but a client
            membership.publish(call, self.pid, members)

    def _on_upload(self, step: Step) -> None:
        pid, key = self.pid, (step.tag, step.round)
        res, call = self._call(step.tag, step.round)
        if key not in self.items:
            raise InvalidInputError(f"{pid} has no item prepared for relay {step.tag!r} round {step.round}")
        item = self.items.pop(key)
        mech = res.mechanism
        if isinstance(mech, Plaintext):
            self.ex.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, item, stage=RelayStage.UPLOAD))
            return
        assert isinstance(mech, SealedRelay)
        transport = self.ex.rt.transport
        for env in transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
            sealing_directory.accept(call, pid, env)
        for env in transport.receive(pid, tag=step.tag, round=step.round, stage=membership.STAGE):
            membership.accept(call, pid, env)
        exclude_self = bool(step.info.get("exclude_self", 1))
        targets = [r for r in _names(step.info.get("recipients", "")) if not (exclude_self and r == pid)]
        payload = seal_upload(call, pid, item, targets, mech.params["padding"],
                              shuffle=bool(step.info.get("shuffle", 1)))
        self.ex.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, payload, stage=RelayStage.UPLOAD,
                                           form=Form.SEALED))

    def _on_forward(self, step: Step) -> None:
        pid, key = self.pid, (step.tag, step.round)
        res, call = self._call(step.tag, step.round)
        transport = self.ex.rt.transport
        if isinstance(res.mechanism, Plaintext):
            envs = transport.receive(pid, tag=step.tag, round=step.round, stage=RelayStage.FORWARD)
            if any(e.sender != SERVER for e in envs):
                raise UnexpectedMessageError(f"{pid} got a {step.tag!r} forward that did not come from the server")
            self.bundles[key] = [e.payload for e in envs]
            return
        got = transport.receive_from(pid, [SERVER], tag=step.tag, round=step.round, stage=RelayStage.FORWARD)
        if SERVER not in got:
            raise UnexpectedMessageError(f"{pid} got a {step.tag!r} forward step without its bundle")
        exclude_self = bool(step.info.get("exclude_self", 1))
        named = _names(step.info.get("senders", ""))
        senders: Sequence[str] = sorted(s for s in named if not (exclude_self and s == pid))
        self.bundles[key] = open_bundle(call, pid, got[SERVER].payload, senders=senders,
                                        shuffle=bool(step.info.get("shuffle", 1)))
