"""The exchange API split into its server half and client half, over Flower steps.

In one process :class:`~securefg.federation.exchange.Exchange` runs both halves of a call in
lockstep. On Flower each half runs in its own party's process and the halves meet only through
sealed envelopes carried by :class:`~securefg.integrations.flower.runtime.ServerRuntime.step`:

* ``broadcast``: the server seals the tensors for each receiver; the receivers' handler of the
  step's action decodes them.
* ``aggregate``: each client prepares its input exactly as ``Exchange.aggregate`` does
  (weighting, client transforms such as DP clipping/noise, the weight appended) and keeps it
  until the server runs the mechanism. ``secure_sum`` runs its own server and client stage
  machines (``protocol/secure_sum/server`` and ``client``), one Flower step per stage;
  ``ckks`` runs :func:`securefg.integrations.flower.ckks.sum_server` (upload, then the key
  holder decrypts the sum); ``plaintext`` is one upload step. The server then applies the
  server transforms and the mean, as in process, so both backends compute the same numbers.

``similarity`` and ``relay`` under CKKS are in :mod:`securefg.integrations.flower.ckks`; a
:class:`ClientExchange` carries their client (and key-holder) halves too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from securefg.errors import ConfigError, InvalidInputError, UnexpectedMessageError
from securefg.federation.codec import TensorSpec, decode_tensor, decode_tensors, encode_tensor, encode_tensors
from securefg.federation.envelope import Envelope
from securefg.federation.flatten import Layout, flatten, unflatten
from securefg.federation.party import SERVER, Party
from securefg.integrations.flower.calls import party_call, stand_ins
from securefg.integrations.flower.ckks import NodeCKKS, sum_server
from securefg.integrations.flower.records import Step
from securefg.integrations.flower.runtime import ClientRuntime, ServerRuntime
from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.constants import Stage as CKKSStage
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.route import Route
from securefg.protocol.stack import ProtocolStack, Resolved

ACTION_AGGREGATE = "aggregate"
PLAINTEXT_UPLOAD = "plaintext/upload"
SUPPORTED = ("plaintext", "secure_sum", "ckks")


def _resolve(stack: ProtocolStack, tag: str, kind: ExchangeKind) -> Resolved:
    res = stack.resolve(tag, kind)
    if res.mechanism.name not in SUPPORTED:
        raise ConfigError(
            f"tag {tag!r}: mechanism {res.mechanism.name!r} does not run on the Flower backend yet "
            f"(supported there: {list(SUPPORTED)}); use --backend inprocess or another stack"
        )
    return res


def _call(transport: object, parties: Mapping[str, Party], round: int, tag: str, res: Resolved,
          rng: torch.Generator | None) -> ExchangeCall:
    return party_call(transport, parties, round=round, tag=tag, res=res, kind=ExchangeKind.AGGREGATE, rng=rng)


# ====================================================================== server half
def broadcast(rt: ServerRuntime, stack: ProtocolStack, tag: str, tensors: Mapping[str, torch.Tensor], *,
              action: str, round: int) -> dict[str, Step]:
    """Seal ``tensors`` for every live client and run ``action`` on each; returns the replies."""
    res = _resolve(stack, tag, ExchangeKind.BROADCAST)
    if res.mechanism.name != "plaintext":
        raise ConfigError(f"broadcast tag {tag!r} must be plaintext on the Flower backend")
    receivers = rt.live
    rt.transport.send(Envelope(SERVER, tuple(receivers), round, tag, encode_tensors(tensors)))
    return rt.step(receivers, action=action, round=round, tag=tag)


def aggregate(rt: ServerRuntime, stack: ProtocolStack, tag: str, *, round: int, clients: list[str],
              template: Mapping[str, torch.Tensor], mean: bool = True) -> dict[str, torch.Tensor]:
    """The server's half of ``Exchange.aggregate``: the (mean) sum over the surviving clients.

    Args:
        template (Mapping[str, Tensor]): Tensors shaped like each client's input (the layout).
    """
    res = _resolve(stack, tag, ExchangeKind.AGGREGATE)
    _, layout = flatten(template, what=f"{tag!r} template")
    length = layout.size + 1
    clients = [c for c in clients if c not in rt.dropped]
    if isinstance(res.mechanism, SecureSum):
        total, contributors = _secure_sum_server(rt, res.mechanism, tag, round, clients, length)
    elif isinstance(res.mechanism, CKKS):
        total, contributors = sum_server(rt, res, tag=tag, round=round, clients=clients, length=length,
                                         action=ACTION_AGGREGATE)
    else:
        rt.step(clients, action=ACTION_AGGREGATE, round=round, tag=tag, stage=PLAINTEXT_UPLOAD)
        got = rt.transport.receive_from(SERVER, clients, tag=tag, round=round, stage=PLAINTEXT_UPLOAD)
        spec = TensorSpec({"x": (torch.float64, (length,))})
        contributors = tuple(sorted(got))
        if not contributors:
            raise InvalidInputError(f"{tag!r}: no client contributed")
        total = torch.stack([decode_tensor(got[p].payload, spec=spec) for p in contributors]).sum(0)
    return _finish(rt, res, tag, round, total, contributors, layout, mean)


def _finish(rt: ServerRuntime, res: Resolved, tag: str, round: int, total_all: torch.Tensor,
            contributors: tuple[str, ...], layout: Layout, mean: bool) -> dict[str, torch.Tensor]:
    call = _call(rt.transport, stand_ins(rt.party, rt.parties), round, tag, res, None)
    total, wsum = total_all[: layout.size], float(total_all[-1])
    for t in res.transforms:
        total = t.server(call, total, contributors)
    if mean:
        if wsum <= 0:
            raise InvalidInputError(f"{tag!r}: total weight of the survivors is {wsum}")
        total = total / wsum
    rt.party.state.setdefault("contributors", {})[(tag, round)] = contributors
    return unflatten(total, layout)


def _secure_sum_server(rt: ServerRuntime, mech: SecureSum, tag: str, round: int, clients: list[str],
                       length: int) -> tuple[torch.Tensor, tuple[str, ...]]:
    """``SecureSum._protocol``'s aggregator side, one Flower step per stage."""
    route = Route(rt.transport, relay=SERVER, aggregator=SERVER, round=round, tag=tag)  # type: ignore[arg-type]
    info = CallInfo(rt.transport.session, round, tag, mech.settings, route)
    members = tuple(sorted(clients))
    degree, threshold = mech.settings.graph(len(members))
    ctx = AggregatorContext(
        pid=SERVER, info=info, clients=members,
        graph=harary_graph(members, degree) if len(members) > 1 else {c: frozenset() for c in members},
        degree=degree, threshold=threshold, length=length,
        quantizer=mech.settings.quantizer(len(members)), e2e_sk=None,
    )
    agg: ss_server.ServerStage = ss_server.begin(ctx, set(members))
    for stage in Stage.ordered(signatures=mech.settings.signatures):
        asked = rt.transport.outbox_receivers()
        rt.step(asked, action=ACTION_AGGREGATE, round=round, tag=tag, stage=stage.value)
        agg = agg.handle(route.aggregator_inbox(stage))
    if not isinstance(agg, ss_server.Completed):
        raise UnexpectedMessageError("the aggregator did not complete the round")
    rt.party.state.setdefault("secure_sum_drops", {})[(tag, round)] = {p: r.value for p, r in ctx.drops.items()}
    return agg.total, agg.contributors


# ====================================================================== client half
class ClientExchange:
    """A client's half of the exchanges: prepared inputs and the mechanism stages.

    Args:
        rt (ClientRuntime): The client's runtime (registers the ``aggregate`` action).
        stack (ProtocolStack): The run's stack (every party loads the same one).
        seed (int): Seed of this party's non-cryptographic randomness (transforms).
        clients (Sequence[str]): Every client id of the run (public; transforms count them).
            (default: none)
        helpers (Sequence[str]): The run's other non-server parties, e.g. ``keyholder``.
            (default: none)
    """

    def __init__(self, rt: ClientRuntime, stack: ProtocolStack, *, seed: int, clients: Sequence[str] = (),
                 helpers: Sequence[str] = ()) -> None:
        self.rt, self.stack, self.clients = rt, stack, tuple(clients)
        self.parties = stand_ins(rt.party, (*clients, *helpers))
        self.rng = torch.Generator().manual_seed(seed)
        self.pending: dict[tuple[str, int], np.ndarray] = {}
        self.calls: dict[tuple[str, int], ClientStage] = {}
        self.ckks = NodeCKKS(rt, stack, (*clients, *helpers))
        rt.on(ACTION_AGGREGATE, self._on_aggregate)

    def receive_broadcast(self, tag: str, round: int, like: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Decode the one broadcast envelope of ``tag`` this round (shaped like ``like``)."""
        envs = self.rt.transport.receive(self.rt.party.pid, tag=tag, round=round)
        if len(envs) != 1 or envs[0].sender != SERVER:
            raise UnexpectedMessageError(f"{self.rt.party.pid} expected one {tag!r} broadcast from the server, got {len(envs)}")
        return decode_tensors(envs[0].payload, spec=TensorSpec.like(like))

    def contribute(self, tag: str, round: int, tensors: Mapping[str, torch.Tensor], weight: float = 1.0) -> None:
        """Prepare this client's input to ``aggregate(tag)`` as ``Exchange.aggregate`` does."""
        res = _resolve(self.stack, tag, ExchangeKind.AGGREGATE)
        vec, _ = flatten(tensors, what=f"{tag!r} from {self.rt.party.pid}")
        w = float(weight)
        if not w >= 0:
            raise InvalidInputError(f"{tag!r}: weight of {self.rt.party.pid} must be >= 0, got {w}")
        v = vec * w
        call = _call(self.rt.transport, self.parties, round, tag, res, self.rng)
        for t in res.transforms:
            v = t.client(call, self.rt.party.pid, v)
        full = torch.cat([v, torch.tensor([w], dtype=torch.float64)])
        self.pending[(tag, round)] = full.detach().to("cpu", torch.float64).numpy()

    def _on_aggregate(self, step: Step) -> None:
        key, pid = (step.tag, step.round), self.rt.party.pid
        if key not in self.pending:
            raise InvalidInputError(f"{pid} has no input prepared for {step.tag!r} round {step.round}")
        res = _resolve(self.stack, step.tag, ExchangeKind.AGGREGATE)
        if step.stage == PLAINTEXT_UPLOAD:
            vec = torch.from_numpy(self.pending.pop(key))
            self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, encode_tensor(vec), stage=PLAINTEXT_UPLOAD))
            return
        if isinstance(res.mechanism, CKKS):
            if step.stage != CKKSStage.UPLOAD:
                raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for CKKS tag {step.tag!r}")
            self.ckks.upload_sum_input(step.tag, step.round, torch.from_numpy(self.pending.pop(key)))
            return
        assert isinstance(res.mechanism, SecureSum)
        stage = Stage(step.stage)
        route = Route(self.rt.transport, relay=SERVER, aggregator=SERVER, round=step.round, tag=step.tag)  # type: ignore[arg-type]
        if stage is Stage.ADVERTISE_KEYS:
            info = CallInfo(self.rt.transport.session, step.round, step.tag, res.mechanism.settings, route)
            self.calls[key] = AdvertiseKeys(ClientContext(pid, info, self.pending[key]))
        if key not in self.calls:
            raise UnexpectedMessageError(f"{pid} got {stage.value!r} for {step.tag!r} before the call began")
        msgs = route.client_inbox(pid, stage)
        if len(msgs) != 1:
            raise UnexpectedMessageError(f"{pid} got {len(msgs)} {stage.value!r} messages, expected one")
        self.calls[key] = self.calls[key].handle(msgs[0])
        if stage is Stage.UNMASK:  # the call's secrets die with it
            del self.calls[key]
            del self.pending[key]

