"""``peer_sum`` split by party: target client ``i`` learns only the sum of its peers' inputs.

The same envelopes as :meth:`securefg.federation.exchange.Exchange.peer_sum`:

* ``plaintext``: each peer sends its vector to the target (``plaintext/peer``); in a party
  program the wire rides through the server, which forwards it unopened (star topology).
* ``secure_sum``: SecAgg+ with the *target* as the aggregator and the server as a pure relay
  (:class:`~securefg.protocol.secure_sum.route.Route` in relayed mode, every payload after the
  keys sealed end to end). The target runs the aggregator's stage machine
  (``protocol/secure_sum/server``), the peers the client one (``protocol/secure_sum/client``),
  the server only forwards (``Route.forward_up``/``forward_down``, or with ``relay_sum`` adds
  the masked inputs, :func:`~securefg.protocol.secure_sum.relay_sum.forward_sum`).

A peer *contributes* while it handles one of the method's actions (:meth:`PeerSumHalf.contribute`:
its vector through the tag's client transforms, and the public layout in the reply); the server
then calls :func:`peer_sum`; the target reads the sum with :meth:`PeerSumHalf.result`. The
transforms' server step (``dp_gaussian`` accounting) runs at the server, as in the lockstep
exchange; a transform that must change the result there (central noise) is refused, since only
the target holds the sum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import ConfigError, InvalidInputError, MechanismError, UnexpectedMessageError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope
from securefg.federation.flatten import flatten, layout_from_text, layout_to_text, unflatten
from securefg.federation.party import SERVER
from securefg.federation.program.calls import party_call
from securefg.federation.program.exchange import advance_client_stage, agreed_layout
from securefg.federation.program.halves import client_half
from securefg.federation.program.server_runtime import LAYOUT
from securefg.federation.program.step import Step
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext, party_info
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.relay_sum import forward_sum
from securefg.protocol.secure_sum.route import Route

ACTION = "peer_sum"
PLAIN_STAGE = "plaintext/peer"
"""The plaintext upload's envelope stage (as ``Plaintext.run_peer_sum``)."""
BEGIN = "peer_sum/begin"
COLLECT = "peer_sum/collect"

Tensors = Mapping[str, torch.Tensor]


def layout_key(tag: str, target: str) -> str:
    """The reply-info key of a contribution's layout (one per target: shapes may differ)."""
    return f"{tag}>{target}"


def client_transform(t: Any, call: Any, pid: str, vec: torch.Tensor) -> torch.Tensor:
    """``t.client`` as one party: the client's copy of a transform never runs the server step
    (the server's copy does), so the copy's pending-call guard is released once it has run."""
    out = t.client(call, pid, vec)
    if hasattr(t, "_awaiting_server"):
        t._awaiting_server = None
    return out


def server_transforms(res: Any, call: Any, length: int, contributors: tuple[str, ...]) -> None:
    """The transforms' server step where the server does not hold the result: accounting only.

    Raises:
        ConfigError: A transform that would change the result (central noise).
    """
    for t in res.transforms:
        mode = getattr(getattr(t, "mode", None), "value", None)
        if mode not in ("distributed", "local"):
            raise ConfigError(f"tag {call.tag!r}: transform {type(t).name!r} needs a server-side step on the result, "
                              "which the server does not hold here; use dp_gaussian with mode = \"distributed\" or \"local\"")
        t.server(call, torch.zeros(length, dtype=torch.float64), contributors)


# ====================================================================== server half
def peer_sum(ex: Any, tag: str, target: str, peers: Iterable[str] | None = None) -> tuple[str, ...]:
    """The server's half of ``peer_sum(tag, target)`` this round: ``peers`` (default: every
    other live client) contributed; ``target`` ends up holding their sum. Returns who is in it.

    Raises:
        InvalidInputError: The target among the peers, or a peer without (or with another) layout.
        MechanismError: The target did not complete the sum.
    """
    ex.use_tag(tag, ExchangeKind.PEER_SUM)
    res = ex.stack.resolve(tag, ExchangeKind.PEER_SUM)
    rt = ex.rt
    if target in rt.dropped:
        raise MechanismError(f"{tag!r}: the peer-sum target {target} dropped out: {rt.dropped[target]}")
    pool = [p for p in rt.live if p != target] if peers is None else list(peers)
    if target in pool:
        raise InvalidInputError(f"{tag!r}: target {target} cannot contribute to its own peer sum")
    members = sorted(p for p in pool if p not in rt.dropped)
    text = agreed_layout(rt, (layout_key(tag, target), ex.round), members, tag=tag,
                         what=f"to the peer sum of {target}")
    length = layout_from_text(text, what=f"{tag!r} layout").size
    info = {"target": target, "layout": text, "peers": ",".join(members)}
    mech = res.mechanism
    if isinstance(mech, SecureSum):
        rep = _secure(ex, mech, tag, target, members, length, info)
    elif mech.name == "plaintext":
        ex.step(members, action=ACTION, tag=tag, stage=PLAIN_STAGE, info=info)
        rep = ex.step([target], action=ACTION, tag=tag, stage=COLLECT, info=info)
    else:
        raise ConfigError(f"peer_sum tag {tag!r}: mechanism {mech.name!r} has no party-program halves")
    if target not in rep or "contributors" not in rep[target].info:
        raise MechanismError(f"{tag!r}: the peer-sum target {target} did not complete: {rt.dropped.get(target, 'no sum')}")
    text_c = str(rep[target].info["contributors"])
    contributors = tuple(text_c.split(",")) if text_c else ()
    server_transforms(res, ex.call(tag, res, ExchangeKind.PEER_SUM), length, contributors)
    return contributors


def _secure(ex: Any, mech: SecureSum, tag: str, target: str, members: list[str], length: int,
            info: dict[str, str | int]) -> dict[str, Step]:
    """``SecureSum._protocol`` with the server as the relay: forward, step, forward, step."""
    rt = ex.rt
    route = Route(rt.transport, relay=SERVER, aggregator=target, round=ex.round, tag=tag,  # type: ignore[arg-type]
                  sum_at_relay=mech.settings.relay_sum)
    rep = ex.step([target], action=ACTION, tag=tag, stage=BEGIN, info=info)
    for stage in Stage.ordered(signatures=mech.settings.signatures):
        route.forward_down(stage)
        waiting = set(rt.transport.outbox_receivers())
        ex.step([p for p in members if p in waiting], action=ACTION, tag=tag, stage=stage.value, info=info)
        if route.sum_at_relay and stage is Stage.MASKED_INPUT:
            forward_sum(route, clients=members, bits=mech.settings.ring_bits(len(members)), length=length)
        else:
            route.forward_up(stage)
        rep = ex.step([target], action=ACTION, tag=tag, stage=stage.value, info=info)
        if target not in rep:
            break
    return rep


# ====================================================================== client half
@client_half("peer_sum")
class PeerSumHalf:
    """A client's half of ``peer_sum``: as a peer (contributor) and as a target (aggregator)."""

    def __init__(self, ex: Any) -> None:
        self.ex, self.rt = ex, ex.rt
        self.pending: dict[tuple[str, int, str], torch.Tensor] = {}
        self.calls: dict[tuple[str, int, str], ClientStage] = {}
        self.aggregators: dict[tuple[str, int], tuple[ss_server.ServerStage, Any]] = {}
        self.results: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        ex.rt.on(ACTION, self._on_step)

    def contribute(self, tag: str, round: int, target: str, tensors: Tensors) -> None:
        """This client's input to ``target``'s peer sum of ``tag`` this round (transforms run here).

        Raises:
            InvalidInputError: This client is the target.
        """
        pid = self.rt.party.pid
        if target == pid:
            raise InvalidInputError(f"{tag!r}: target {target} cannot contribute to its own peer sum")
        res = self.ex.stack.resolve(tag, ExchangeKind.PEER_SUM)
        tensors = self.ex.deviate("peer_sum", tag, tensors)
        vec, layout = flatten(tensors, what=f"{tag!r} from {pid}")
        call = party_call(self.rt.transport, self.ex.parties, round=round, tag=tag, res=res,
                          kind=ExchangeKind.PEER_SUM, rng=self.ex.rng)
        for t in res.transforms:
            vec = client_transform(t, call, pid, vec)
        self.pending[(tag, round, target)] = vec.detach().to("cpu", torch.float64)
        self.rt.reply_info[LAYOUT + layout_key(tag, target)] = layout_to_text(layout)

    def result(self, tag: str, round: int) -> dict[str, torch.Tensor]:
        """The peer sum of ``tag`` this client received as the target this round.

        Raises:
            UnexpectedMessageError: None came.
        """
        if (tag, round) not in self.results:
            raise UnexpectedMessageError(f"{self.rt.party.pid} received no {tag!r} peer sum in round {round}")
        return self.results.pop((tag, round))

    # ------------------------------------------------------------------ steps
    def _on_step(self, step: Step) -> dict[str, str | int] | None:
        pid, target = self.rt.party.pid, str(step.info["target"])
        mech = self.ex.stack.resolve(step.tag, ExchangeKind.PEER_SUM).mechanism
        if step.stage == PLAIN_STAGE:
            vec = self.pending.pop((step.tag, step.round, target))
            self.rt.transport.send(Envelope(pid, (target,), step.round, step.tag, encode_tensor(vec), stage=PLAIN_STAGE))
            return None
        if pid != target:
            self._contributor(step, mech, target)
            return None
        layout = layout_from_text(str(step.info["layout"]), what=f"{step.tag!r} layout")
        peers = tuple(p for p in str(step.info["peers"]).split(",") if p)
        if step.stage == COLLECT:
            got = self.rt.transport.receive_from(pid, peers, tag=step.tag, round=step.round, stage=PLAIN_STAGE)
            if not got:
                raise MechanismError(f"{step.tag!r}: {pid} received no peer input")
            order = sorted(got)
            spec = TensorSpec({"x": (torch.float64, (layout.size,))})
            total = torch.stack([decode_tensor(got[p].payload, spec=spec) for p in order]).sum(0)
            self.results[(step.tag, step.round)] = unflatten(total, layout)
            return {"contributors": ",".join(order)}
        assert isinstance(mech, SecureSum)
        return self._aggregator(step, mech, peers, layout)

    def _route(self, step: Step, mech: SecureSum, target: str) -> Route:
        return Route(self.rt.transport, relay=SERVER, aggregator=target, round=step.round, tag=step.tag,  # type: ignore[arg-type]
                     sum_at_relay=mech.settings.relay_sum)

    def _contributor(self, step: Step, mech: Any, target: str) -> None:
        """As a peer: one stage of the client's stage machine (as ``ClientExchange._on_aggregate``)."""
        pid, key = self.rt.party.pid, (step.tag, step.round, target)
        if not isinstance(mech, SecureSum):
            raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for {mech.name!r} peer-sum tag {step.tag!r}")
        route = self._route(step, mech, target)

        def begin() -> ClientStage:
            if key not in self.pending:
                raise InvalidInputError(f"{pid} has no input prepared for {step.tag!r} to {target} round {step.round}")
            info, identity = party_info(CallInfo(self.rt.transport.session, step.round, step.tag, mech.settings, route),
                                        self.rt.party.state, pid)
            return AdvertiseKeys(ClientContext(pid, info, self.pending.pop(key).numpy(), identity=identity))

        advance_client_stage(self.calls, key, pid, step, route, begin)

    def _aggregator(self, step: Step, mech: SecureSum, peers: tuple[str, ...], layout: Any) -> dict[str, str | int] | None:
        """As the target: begin, or one stage of the aggregator's stage machine."""
        pid, key = self.rt.party.pid, (step.tag, step.round)
        if step.stage == BEGIN:
            route = self._route(step, mech, pid)
            info, identity = party_info(CallInfo(self.rt.transport.session, step.round, step.tag, mech.settings, route),
                                        self.rt.party.state, pid)
            degree, threshold = mech.settings.graph(len(peers))
            ctx = AggregatorContext(
                pid=pid, info=info, clients=peers,
                graph=harary_graph(peers, degree) if len(peers) > 1 else {c: frozenset() for c in peers},
                degree=degree, threshold=threshold, length=layout.size,
                quantizer=mech.settings.quantizer(len(peers)), e2e_sk=X25519PrivateKey.generate(), identity=identity,
            )
            self.aggregators[key] = (ss_server.begin(ctx, set(peers)), ctx)
            return None
        if key not in self.aggregators:
            raise UnexpectedMessageError(f"{pid} got {step.stage!r} for {step.tag!r} before its peer sum began")
        agg, ctx = self.aggregators[key]
        agg = agg.handle(ctx.info.route.aggregator_inbox(Stage(step.stage)))
        if isinstance(agg, ss_server.Completed):
            del self.aggregators[key]
            self.results[key] = unflatten(agg.total.to(torch.float64), layout)
            return {"contributors": ",".join(agg.contributors)}
        self.aggregators[key] = (agg, ctx)
        return None

