"""``collect`` and ``reply`` (``plaintext``, ``mailbox``) as party-program halves.

``collect``: the server learns every client's tensors individually, under a pseudonym;
``reply``: the owner of each pseudonym receives its tensors. Each runs the lockstep mechanism's
flow (``Plaintext.run_collect``/``run_reply``, ``Mailbox.run_collect``/``run_reply``) with each
role in its own process, through the mechanism's own role functions, and emits the same envelopes
(sender, receivers, tag, stage, form, payload):

* **collect** under ``plaintext``: a ``collect`` step at stage ``plaintext/collect``; each client
  uploads the vector it offered in the clear; its pseudonym is its id.
* **collect** under ``mailbox``: the sealing keys first (once per session and client: the server
  publishes its own, and its membership secret (:mod:`~securefg.protocol.relay.membership`),
  with the next step; a ``mailbox/publish`` step has the ``shuffler`` publish its own), then a
  ``collect`` step at stage ``mailbox/upload`` (each client seals its vector to the server, under
  the membership secret, inside an onion sealed to the shuffler, under its session pseudonym), then a
  ``mailbox/mix`` step (the shuffler peels, records ``pseudonym -> client``, shuffles, hands the
  batch to the server); the server opens the boxes.
* **reply** under ``plaintext``: each output goes to the client named by its pseudonym at stage
  ``plaintext/reply``.
* **reply** under ``mailbox``: the server seals each output to its pseudonym's key and sends the
  batch to the shuffler; a ``mailbox/route`` step has the shuffler deliver each box to the client
  it recorded for the pseudonym.

A client offers its input while it handles one of the method's actions (transforms, e.g. local
DP noise, run then, and the layout, public model metadata, rides back in that step's reply, as
for ``aggregate``). A reply's boxes ride with the owner's next step; the owner opens it when its
action reads it (:meth:`NodeCollect.replied`). Envelopes between the shuffler and a client ride
through the server, sealed to their receiver and authenticated end to end by the channel layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from securefg.errors import (
    ConfigError,
    InvalidInputError,
    MechanismError,
    ProtocolError,
    UnexpectedMessageError,
)
from securefg.federation.codec import TensorSpec, decode_tensors, encode_tensors
from securefg.federation.envelope import Envelope
from securefg.federation.exchange import from_wire, to_wire
from securefg.federation.flatten import flatten, layout_to_text, unflatten
from securefg.federation.party import SERVER, SHUFFLER, is_client
from securefg.federation.program.calls import party_call, stand_ins
from securefg.federation.program.halves import client_half
from securefg.federation.program.server_runtime import LAYOUT
from securefg.federation.program.step import Step
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.plaintext import Plaintext
from securefg.protocol.relay import mailbox, membership, sealing_directory
from securefg.protocol.relay.mailbox import Mailbox, MailboxStage
from securefg.protocol.stack import Resolved
from securefg.protocol.transform_rules import require_local

if TYPE_CHECKING:
    from securefg.federation.program.exchange import ClientExchange, ServerExchange

ACTION_COLLECT = "collect"
ACTION_PUBLISH = "mailbox/publish"
ACTION_MIX = "mailbox/mix"
ACTION_ROUTE = "mailbox/route"
PLAINTEXT_COLLECT = "plaintext/collect"
PLAINTEXT_REPLY = "plaintext/reply"
#: The server's record of which clients hold which owner's sealing key (public routing facts).
LEDGER = "program/mailbox-sealing"
#: The key of that record listing the clients holding the server's membership secret.
MEMBERSHIP = "membership"

COLLECT = ExchangeKind.COLLECT
REPLY = ExchangeKind.REPLY

Tensors = Mapping[str, torch.Tensor]


def _names(text: object) -> list[str]:
    return [p for p in str(text).split(",") if p]


def resolve_collect(stack: Any, tag: str) -> Resolved:
    """The binding of collect ``tag``; refuses transforms with a server step as ``Exchange.collect`` does.

    Raises:
        ConfigError: A transform not in ``mode = "local"``, or a mechanism without halves here.
    """
    res = stack.resolve(tag, COLLECT)
    require_local(tag, res.transforms)
    _check_mechanism(res, tag, "collect")
    return res


def resolve_reply(stack: Any, tag: str) -> Resolved:
    """The binding of reply ``tag`` (no transforms, as ``Exchange.reply``)."""
    res = stack.resolve(tag, REPLY)
    if res.transforms:
        raise ConfigError(f"tag {tag!r}: a reply exchange takes no transforms")
    _check_mechanism(res, tag, "reply")
    return res


def _check_mechanism(res: Resolved, tag: str, kind: str) -> None:
    if not isinstance(res.mechanism, (Plaintext, Mailbox)):
        raise ConfigError(f"{kind} tag {tag!r}: mechanism {res.mechanism.name!r} has no party-program halves "
                          "(plaintext, mailbox)")


def _server_call(ex: ServerExchange, res: Resolved, tag: str, kind: ExchangeKind) -> ExchangeCall:
    rt = ex.rt
    return party_call(rt.transport, stand_ins(rt.party, rt.parties), round=ex.round, tag=tag, res=res, kind=kind)


def _require_shuffler(ex: ServerExchange, tag: str) -> None:
    """``Mailbox._require_shuffler``, and the shuffler must still answer."""
    if SHUFFLER not in ex.rt.peers:
        raise ConfigError(
            f"mailbox for {tag!r} needs a {SHUFFLER!r} party; the method must list it in "
            "extra_parties (or bind the tag to plaintext)"
        )
    if SHUFFLER in ex.rt.dropped:
        raise MechanismError(f"mailbox for {tag!r}: the shuffler dropped out ({ex.rt.dropped[SHUFFLER]})")


def _step_shuffler(ex: ServerExchange, *, action: str, tag: str, info: Mapping[str, str | int] | None = None) -> None:
    if SHUFFLER not in ex.rt.step([SHUFFLER], action=action, round=ex.round, tag=tag, info=info):
        raise MechanismError(f"mailbox for {tag!r}: the shuffler did not answer {action!r} "
                             f"({ex.rt.dropped.get(SHUFFLER, 'no reply')})")


# ====================================================================== server halves
def collect(ex: ServerExchange, tag: str, *,
            clients: Iterable[str] | None = None) -> dict[str, dict[str, torch.Tensor]]:
    """The server's half of ``Exchange.collect``: ``{pseudonym: tensors}`` over what ``clients``
    (default: every live client) offered for ``tag`` this round.

    Under ``plaintext`` the pseudonym is the client's id; under ``mailbox`` a session pseudonym
    the server cannot link to a client.

    Raises:
        InvalidInputError: A client offered nothing, or tensors of another layout.
        ConfigError: A transform with a server step; ``mailbox`` without a shuffler party.
    """
    ex.use_tag(tag, COLLECT)
    rt, round = ex.rt, ex.round
    res = resolve_collect(ex.stack, tag)
    members = [c for c in (rt.live if clients is None else clients) if c not in rt.dropped]
    layout, _ = ex.layout_of(tag, members)
    spec = TensorSpec({"x": (torch.float64, (layout.size,))})
    if isinstance(res.mechanism, Mailbox):
        got = _collect_mailbox(ex, res, tag, members)
    else:
        senders = sorted(rt.step(members, action=ACTION_COLLECT, round=round, tag=tag, stage=PLAINTEXT_COLLECT))
        envs = rt.transport.receive_from(SERVER, senders, tag=tag, round=round, stage=PLAINTEXT_COLLECT)
        got = {pid: env.payload for pid, env in envs.items()}
    return {nym: unflatten(decode_tensors(b, spec=spec)["x"], layout) for nym, b in got.items()}


def _collect_mailbox(ex: ServerExchange, res: Resolved, tag: str, members: list[str]) -> dict[str, bytes]:
    """``Mailbox.run_collect``'s flow, one step per role's turn; ``{pseudonym: payload}``."""
    _require_shuffler(ex, tag)
    rt, round = ex.rt, ex.round
    call = _server_call(ex, res, tag, COLLECT)
    holders = sorted(members)
    # sealing_directory.ensure(holders=senders, owners=[server, shuffler]): only missing pairs cost
    ledger: dict[str, set[str]] = rt.party.state.setdefault(LEDGER, {})
    session = ledger.setdefault(rt.transport.session.hex(), {SERVER: set(), SHUFFLER: set()})
    missing = [h for h in holders if h not in session[SERVER]]
    if missing:
        sealing_directory.publish(call, SERVER, missing)
        session[SERVER].update(missing)
    # membership.ensure(holders=senders, owners=[server]): what proves an input came from a client
    missing = [h for h in holders if h not in session.setdefault(MEMBERSHIP, set())]
    if missing:
        membership.publish(call, SERVER, missing)
        session[MEMBERSHIP].update(missing)
    missing = [h for h in holders if h not in session[SHUFFLER]]
    if missing:
        _step_shuffler(ex, action=ACTION_PUBLISH, tag=tag, info={"to": ",".join(missing)})
        session[SHUFFLER].update(missing)
    senders = sorted(rt.step(holders, action=ACTION_COLLECT, round=round, tag=tag, stage=MailboxStage.UPLOAD))
    _step_shuffler(ex, action=ACTION_MIX, tag=tag, info={"senders": ",".join(senders)})
    got = rt.transport.receive_from(SERVER, [SHUFFLER], tag=tag, round=round, stage=MailboxStage.MIX)
    if SHUFFLER not in got:
        raise ProtocolError(f"the shuffler handed the server no batch for {tag!r}")
    return mailbox.open_batch(call, got[SHUFFLER].payload, count=len(senders), name=res.mechanism.name)


def reply(ex: ServerExchange, tag: str, outputs: Mapping[str, Tensors]) -> list[str]:
    """The server's half of ``Exchange.reply``: the owner of each pseudonym (from :func:`collect`)
    receives its tensors, with its next step (it reads them with ``ClientContext.replied``).

    Returns:
        The pseudonyms replied to.

    Raises:
        InvalidInputError: No outputs, or outputs of different names, shapes or dtypes.
        ProtocolError: A pseudonym nobody holds (``plaintext``: not a client; ``mailbox``: the
            server never collected from it).
    """
    ex.use_tag(tag, REPLY)
    rt, round = ex.rt, ex.round
    res = resolve_reply(ex.stack, tag)
    if not outputs:
        raise InvalidInputError(f"{tag!r}: no outputs")
    specs = [TensorSpec.like(t) for t in outputs.values()]
    if any(s != specs[0] for s in specs):
        raise InvalidInputError(f"{tag!r}: outputs have different tensor names, shapes or dtypes")
    payloads = {nym: encode_tensors(to_wire(res, tag, t)) for nym, t in outputs.items()}
    if isinstance(res.mechanism, Mailbox):
        _require_shuffler(ex, tag)
        call = _server_call(ex, res, tag, REPLY)
        boxes = mailbox.seal_replies(call, payloads, res.mechanism.params["padding"], name=res.mechanism.name)
        rt.transport.send(mailbox.reply_envelope(call, boxes))
        _step_shuffler(ex, action=ACTION_ROUTE, tag=tag)
        return sorted(outputs)
    for pid, payload in payloads.items():  # Plaintext.run_reply
        if pid not in rt.peers or not is_client(pid):
            raise ProtocolError(f"{tag!r}: reply addressed to {pid!r}, which is not a client")
        rt.transport.send(Envelope(SERVER, (pid,), round, tag, payload, stage=PLAINTEXT_REPLY))
    return sorted(outputs)


# ====================================================================== client halves
@client_half("collect")
class NodeCollect:
    """A client's half of ``collect``/``reply``, and the ``shuffler``'s part of ``mailbox``.

    Args:
        ex (ClientExchange): The party's exchange half (registers its actions).
    """

    def __init__(self, ex: ClientExchange) -> None:
        self.ex = ex
        self.inputs: dict[tuple[str, int], bytes] = {}
        ex.rt.on(ACTION_COLLECT, self._on_collect)
        ex.rt.on(ACTION_PUBLISH, self._on_publish)
        ex.rt.on(ACTION_MIX, self._on_mix)
        ex.rt.on(ACTION_ROUTE, self._on_route)

    @property
    def pid(self) -> str:
        return self.ex.rt.party.pid

    def _call(self, res: Resolved, tag: str, round: int, kind: ExchangeKind) -> ExchangeCall:
        return party_call(self.ex.rt.transport, self.ex.parties, round=round, tag=tag, res=res, kind=kind,
                          rng=self.ex.rng)

    # ------------------------------------------------------------------ a client
    def offer(self, tag: str, round: int, tensors: Tensors) -> None:
        """This client's input to ``collect(tag)`` this round: flattened to ``float64`` and through
        the tag's client transforms, as ``Exchange.collect`` prepares it (its layout goes back in
        the current step's reply)."""
        res = resolve_collect(self.ex.stack, tag)
        pid = self.pid
        tensors = self.ex.deviate(COLLECT.value, tag, tensors)
        vec, layout = flatten(tensors, what=f"{tag!r} from {pid}")
        call = self._call(res, tag, round, COLLECT)
        for t in res.transforms:
            vec = t.client(call, pid, vec)
        self.inputs[(tag, round)] = encode_tensors({"x": vec})
        self.ex.rt.reply_info[LAYOUT + tag] = layout_to_text(layout)

    def replied(self, tag: str, round: int, like: Tensors | None = None) -> dict[str, torch.Tensor]:
        """This client's own output of ``reply(tag)`` in ``round`` (checked against ``like``'s
        names, dtypes and shapes when given).

        Raises:
            UnexpectedMessageError: None or several came, or not from the expected party.
        """
        res = resolve_reply(self.ex.stack, tag)
        pid = self.pid
        mailbox_mech = isinstance(res.mechanism, Mailbox)
        stage, sender = (MailboxStage.DELIVER, SHUFFLER) if mailbox_mech else (PLAINTEXT_REPLY, SERVER)
        envs = self.ex.rt.transport.receive(pid, tag=tag, round=round, stage=stage)
        if len(envs) != 1 or envs[0].sender != sender:
            raise UnexpectedMessageError(f"{pid} expected one {tag!r} reply from the {sender}, got {len(envs)}")
        payload = envs[0].payload
        if mailbox_mech:
            payload = mailbox.open_reply(self._call(res, tag, round, REPLY), pid, payload)
        if like is None:
            return decode_tensors(payload)
        spec = TensorSpec.like(to_wire(res, tag, like))
        return from_wire(decode_tensors(payload, spec=spec), like)

    def _on_collect(self, step: Step) -> None:
        pid, key = self.pid, (step.tag, step.round)
        if key not in self.inputs:
            raise InvalidInputError(f"{pid} has no input prepared for collect {step.tag!r} round {step.round}")
        res = resolve_collect(self.ex.stack, step.tag)
        payload = self.inputs.pop(key)
        if step.stage == PLAINTEXT_COLLECT and isinstance(res.mechanism, Plaintext):
            self.ex.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, payload, stage=PLAINTEXT_COLLECT))
            return
        if step.stage != MailboxStage.UPLOAD or not isinstance(res.mechanism, Mailbox):
            raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for {res.mechanism.name!r} tag {step.tag!r}")
        call = self._call(res, step.tag, step.round, COLLECT)
        for env in self.ex.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
            if env.sender not in (SERVER, SHUFFLER):
                raise ProtocolError(f"{pid} got a sealing key from {env.sender!r} in a mailbox collect")
            sealing_directory.accept(call, pid, env)
        for env in self.ex.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=membership.STAGE):
            if env.sender != SERVER:
                raise ProtocolError(f"{pid} got a membership secret from {env.sender!r} in a mailbox collect")
            membership.accept(call, pid, env)
        onion = mailbox.seal_upload(call, pid, payload, res.mechanism.params["padding"])
        self.ex.rt.transport.send(mailbox.upload_envelope(call, pid, onion))

    # ------------------------------------------------------------------ the shuffler
    def _shuffler_call(self, step: Step, kind: ExchangeKind) -> tuple[Resolved, ExchangeCall]:
        if self.pid != SHUFFLER:
            raise ProtocolError(f"{self.pid} was asked {step.action!r}, which only the {SHUFFLER!r} runs")
        res = resolve_collect(self.ex.stack, step.tag) if kind is COLLECT else resolve_reply(self.ex.stack, step.tag)
        if not isinstance(res.mechanism, Mailbox):
            raise UnexpectedMessageError(f"{SHUFFLER} got {step.action!r} for {res.mechanism.name!r} tag {step.tag!r}")
        return res, self._call(res, step.tag, step.round, kind)

    def _on_publish(self, step: Step) -> None:
        _, call = self._shuffler_call(step, COLLECT)
        to = [p for p in _names(step.info.get("to", "")) if is_client(p)]
        if to:
            sealing_directory.publish(call, SHUFFLER, to)

    def _on_mix(self, step: Step) -> None:
        res, call = self._shuffler_call(step, COLLECT)
        senders = [p for p in _names(step.info.get("senders", "")) if is_client(p)]
        got = self.ex.rt.transport.receive_from(SHUFFLER, senders, tag=step.tag, round=step.round,
                                                stage=MailboxStage.UPLOAD)
        self.ex.rt.transport.send(mailbox.mix_envelope(call, mailbox.mix_uploads(call, got, name=res.mechanism.name)))

    def _on_route(self, step: Step) -> None:
        res, call = self._shuffler_call(step, REPLY)
        got = self.ex.rt.transport.receive_from(SHUFFLER, [SERVER], tag=step.tag, round=step.round,
                                                stage=MailboxStage.REPLY)
        if SERVER not in got:
            raise UnexpectedMessageError(f"{SHUFFLER} was asked to route {step.tag!r} replies but got none")
        for owner, box in mailbox.route_replies(call, got[SERVER].payload, name=res.mechanism.name):
            self.ex.rt.transport.send(mailbox.deliver_envelope(call, owner, box))
