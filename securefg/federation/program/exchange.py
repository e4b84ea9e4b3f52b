"""The exchange API split into its server half and its client half.

In a party program each half runs as its own party, on any backend; the halves meet only
through sealed envelopes carried by :meth:`ServerRuntime.step
<securefg.federation.program.server_runtime.ServerRuntime.step>`:

* ``broadcast``: the server seals the tensors for each receiver; they ride with the receiver's
  next step, whose handler decodes them (:meth:`ClientExchange.received`).
* ``aggregate``: a client *contributes* its input while it handles an action (weighting and
  client transforms such as DP clipping/noise run then, as in ``Exchange.aggregate``); the
  layout of what it contributed (public model metadata) goes back in that step's reply. The
  server then runs the mechanism: ``secure_sum`` its own server and client stage machines
  (``protocol/secure_sum/server`` and ``client``), one step per stage; ``ckks`` an upload and a
  decryption by the key holder (:mod:`~securefg.federation.program.ckks_flows`); ``plaintext``
  one upload step. The server applies the server transforms and the mean, so every backend
  computes the same numbers.

``similarity`` and ``relay`` under CKKS are in :mod:`~securefg.federation.program.ckks_flows`;
:class:`ClientExchange` carries their client (and key-holder) halves too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from securefg.errors import ConfigError, InvalidInputError, UnexpectedMessageError
from securefg.federation.codec import TensorSpec, decode_tensor, decode_tensors, encode_tensor, encode_tensors
from securefg.federation.envelope import Envelope
from securefg.federation.exchange import from_wire, to_wire
from securefg.federation.flatten import Layout, flatten, layout_from_text, layout_to_text, unflatten
from securefg.federation.party import SERVER, Party
from securefg.federation.program.calls import party_call, stand_ins
from securefg.federation.program.ckks_flows import NodeCKKS, sum_server
from securefg.federation.program.ckks_robust_flows import (
    NodeCKKSRobust,
    masked_robust_server,
    robust_sum_server,
)
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.halves import build_halves
from securefg.federation.program.server_runtime import LAYOUT, ServerRuntime
from securefg.federation.program.step import Step
from securefg.protocol.ckks.ckks_mechanism import CKKS
from securefg.protocol.ckks.constants import Stage as CKKSStage
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind
from securefg.protocol.robust.ckks_robust import CKKSRobust
from securefg.protocol.robust.ckks_robust import Stage as RobustStage
from securefg.protocol.robust.masked_robust import MaskedRobust
from securefg.protocol.robust.masked_robust import Stage as MaskedStage
from securefg.protocol.robust.mechanism import SubgroupRelease, SubgroupRobust
from securefg.protocol.robust.subgroups import check_sizes, grouping_seed, partition
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext, party_info
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.route import Route
from securefg.protocol.stack import ProtocolStack, Resolved

ACTION_AGGREGATE = "aggregate"
PLAINTEXT_UPLOAD = "plaintext/upload"

Tensors = Mapping[str, torch.Tensor]


def resolve_aggregate(stack: ProtocolStack, tag: str) -> Resolved:
    """The stack's binding of aggregate ``tag``."""
    return stack.resolve(tag, ExchangeKind.AGGREGATE)


class _Bound:
    """A mechanism standing alone as a resolved binding (a robust mechanism's inner one)."""

    def __init__(self, mechanism: Any) -> None:
        self.mechanism, self.transforms = mechanism, ()


class ServerExchange:
    """The server's half of the exchanges.

    Args:
        rt (ServerRuntime): The server's runtime on its backend.
        stack (ProtocolStack): The server's copy of the run's stack.
        seed (int): Seed of the server's non-cryptographic randomness (transforms).
        run_seed (int): The run's public seed (public draws such as robust subgroups). (default: ``0``)
    """

    def __init__(self, rt: ServerRuntime, stack: ProtocolStack, *, seed: int, run_seed: int = 0) -> None:
        self.rt, self.stack, self.run_seed = rt, stack, run_seed
        self.rng = torch.Generator().manual_seed(seed)
        self.round = -1
        self.calls: dict[str, ExchangeKind] = {}
        self.contributors: dict[tuple[str, int], tuple[str, ...]] = {}

    def use_tag(self, tag: str, kind: ExchangeKind) -> None:
        """Claim ``tag`` for exchange ``kind`` (a tag serves one kind of exchange for the whole run)."""
        prev = self.calls.setdefault(tag, kind)
        if prev is not kind:
            raise InvalidInputError(f"tag {tag!r} was used as {prev.value!r} and now as {kind.value!r}")

    def call(self, tag: str, res: Resolved, kind: ExchangeKind) -> ExchangeCall:
        """The server's :class:`ExchangeCall` for ``tag`` this round (for transforms)."""
        return party_call(self.rt.transport, stand_ins(self.rt.party, self.rt.parties), round=self.round, tag=tag,
                          res=res, kind=kind, rng=self.rng)

    # ------------------------------------------------------------------------ asking
    def step(self, pids: Iterable[str], *, action: str, tag: str = "", stage: str = "",
             info: Mapping[str, str | int] | None = None) -> dict[str, Step]:
        """One step with ``pids`` this round."""
        return self.rt.step(pids, action=action, round=self.round, tag=tag, stage=stage, info=info)

    def ask(self, action: str, *, to: Iterable[str] | None = None,
            info: Mapping[str, str | int] | None = None) -> dict[str, dict[str, str | int]]:
        """Run a method's client ``action`` on ``to`` (default: every live client).

        Returns:
            ``{party: the public info its handler returned}`` for every party that answered.
        """
        pids = self.rt.live if to is None else list(to)
        replies = self.step(pids, action=action, info=info)
        return {pid: {k: v for k, v in rep.info.items() if not k.startswith(LAYOUT)} for pid, rep in replies.items()}

    # ------------------------------------------------------------------------ broadcast
    def broadcast(self, tag: str, tensors: Tensors, *, to: Iterable[str] | None = None) -> list[str]:
        """Seal ``tensors`` for ``to`` (default: every live client); they ride with each
        receiver's next step. Returns the receivers."""
        self.use_tag(tag, ExchangeKind.BROADCAST)
        res = self.stack.resolve(tag, ExchangeKind.BROADCAST)
        if res.mechanism.name != "plaintext":
            raise ConfigError(f"broadcast tag {tag!r} must be plaintext in a party program, not {res.mechanism.name!r}")
        receivers = self.rt.live if to is None else [p for p in to if p not in self.rt.dropped]
        if receivers:
            wire = encode_tensors(to_wire(res, tag, tensors))
            self.rt.transport.send(Envelope(SERVER, tuple(receivers), self.round, tag, wire))
        return receivers

    # ------------------------------------------------------------------------ aggregate
    def layout_of(self, tag: str, clients: Sequence[str]) -> tuple[Layout, Layout | None]:
        """The one layout every contributor reported for ``tag`` this round (and its side part)."""
        text = agreed_layout(self.rt, (tag, self.round), clients, tag=tag, what="this round")
        main, _, side = text.partition("|")
        return layout_from_text(main, what=f"{tag!r} layout"), (layout_from_text(side) if side else None)

    def aggregate(self, tag: str, *, clients: Iterable[str] | None = None, mean: bool = True,
                  weighted: bool = False) -> dict[str, torch.Tensor]:
        """The server learns Σ_k w_k x_k over the surviving contributors (divided by Σ_k w_k
        when ``mean``); side inputs come back summed under their own names.

        The weight total rides in the same protected sum when the call is a mean, has side
        inputs, or ``weighted`` asks for it; a plain sum appends nothing, so a tag's clip need
        only cover the values.

        Raises:
            InvalidInputError: A contributor missing or with another layout, or a zero weight
                total for a mean.
        """
        self.use_tag(tag, ExchangeKind.AGGREGATE)
        res = resolve_aggregate(self.stack, tag)
        members = [c for c in (self.rt.live if clients is None else clients) if c not in self.rt.dropped]
        layout, side = self.layout_of(tag, members)
        with_weight = int(mean or weighted or side is not None)
        length = layout.size + (side.size if side is not None else 0) + with_weight
        info = {"weighted": with_weight}
        total, contributors = self._sum(res.mechanism, tag, members, length, info, count_tail=length - layout.size,
                                        weighted=bool(with_weight))
        call = self.call(tag, res, ExchangeKind.AGGREGATE)
        values = total[: layout.size]
        wsum = float(total[-1]) if with_weight else float("nan")
        for t in res.transforms:
            values = t.server(call, values, contributors)
        if mean:
            if not wsum > 0:
                raise InvalidInputError(f"{tag!r}: total weight of the survivors is {wsum}")
            values = values / wsum
        self.contributors[(tag, self.round)] = contributors
        out = unflatten(values, layout)
        if side is not None:
            out.update(unflatten(total[layout.size: layout.size + side.size], side))
        return out

    def _sum(self, mech: Any, tag: str, members: list[str], length: int, info: Mapping[str, int], *,
             count_tail: int, weighted: bool) -> tuple[torch.Tensor, tuple[str, ...]]:
        """Run ``mech``'s server half over ``members``: the total (or the robust statistic the
        mechanism returns in its place) and who contributed."""
        if isinstance(mech, SecureSum):
            return self._secure_sum(mech, tag, members, length, info)
        if isinstance(mech, CKKS):
            return sum_server(self.rt, _Bound(mech), tag=tag, round=self.round, clients=members, length=length,
                              action=ACTION_AGGREGATE, info=dict(info))
        if isinstance(mech, CKKSRobust):
            return robust_sum_server(self.rt, _Bound(mech), tag=tag, round=self.round, clients=members, length=length,
                                     action=ACTION_AGGREGATE, info=dict(info), count_tail=count_tail, weighted=weighted)
        if isinstance(mech, MaskedRobust):
            inner = mech.inner
            return masked_robust_server(self.rt, _Bound(mech), tag=tag, round=self.round, clients=members, length=length,
                                        action=ACTION_AGGREGATE, info=dict(info), count_tail=count_tail,
                                        weighted=weighted,
                                        secure_sum=lambda kept: self._secure_sum(inner, tag, kept, length, info))
        if isinstance(mech, SubgroupRobust):
            return self._subgroups(mech, tag, members, length, info, count_tail=count_tail, weighted=weighted)
        if not hasattr(mech, "combine_uploads"):
            raise ConfigError(f"tag {tag!r}: mechanism {mech.name!r} has no party-program halves")
        self.step(members, action=ACTION_AGGREGATE, tag=tag, stage=PLAINTEXT_UPLOAD, info=info)
        got = self.rt.transport.receive_from(SERVER, members, tag=tag, round=self.round, stage=PLAINTEXT_UPLOAD)
        if not got:
            raise InvalidInputError(f"{tag!r}: no client contributed")
        spec = TensorSpec({"x": (torch.float64, (length,))})
        uploads = {p: decode_tensor(got[p].payload, spec=spec) for p in sorted(got)}
        outcome = (mech.combine_uploads(uploads, count_tail=count_tail, weighted=weighted)
                   if getattr(mech, "wants_tail", False) else mech.combine_uploads(uploads))
        return outcome.total, outcome.contributors

    def _subgroups(self, mech: SubgroupRobust, tag: str, members: list[str], length: int, info: Mapping[str, int], *,
                   count_tail: int, weighted: bool) -> tuple[torch.Tensor, tuple[str, ...]]:
        """``subgroup_robust``: one inner sum per public subgroup, then the robust rule."""
        k = int(mech.params["k"])
        groups = partition(members, k=k, seed=grouping_seed(str(self.run_seed), tag, self.round))
        sums, survivors = [], []
        for g in groups:
            total, contributors = self._sum(mech.inner, tag, list(g), length, info, count_tail=count_tail,
                                            weighted=weighted)
            survivors.append(tuple(contributors))
            sums.append(total.detach().to(torch.float64).cpu())
        check_sizes(survivors, k=k)
        release = SubgroupRelease(tag, self.round, tuple(groups), tuple(survivors), tuple(sums), count_tail, weighted)
        self.rt.party.state.setdefault(f"mech/{mech.name}", {}).setdefault("released", {})[(tag, self.round)] = release
        return mech.combine(release), tuple(sorted(p for s in survivors for p in s))

    def _secure_sum(self, mech: SecureSum, tag: str, clients: list[str], length: int,
                    info: Mapping[str, int]) -> tuple[torch.Tensor, tuple[str, ...]]:
        """``SecureSum._protocol``'s aggregator side, one step per stage."""
        rt = self.rt
        route = Route(rt.transport, relay=SERVER, aggregator=SERVER, round=self.round, tag=tag)  # type: ignore[arg-type]
        call_info, _ = party_info(CallInfo(rt.transport.session, self.round, tag, mech.settings, route),
                                  rt.party.state, SERVER)
        members = tuple(sorted(clients))
        degree, threshold = mech.settings.graph(len(members))
        ctx = AggregatorContext(
            pid=SERVER, info=call_info, clients=members,
            graph=harary_graph(members, degree) if len(members) > 1 else {c: frozenset() for c in members},
            degree=degree, threshold=threshold, length=length,
            quantizer=mech.settings.quantizer(len(members)), e2e_sk=None,
        )
        agg: ss_server.ServerStage = ss_server.begin(ctx, set(members))
        for stage in Stage.ordered(signatures=mech.settings.signatures):
            asked = rt.transport.outbox_receivers()
            self.step(asked, action=ACTION_AGGREGATE, tag=tag, stage=stage.value, info=info)
            agg = agg.handle(route.aggregator_inbox(stage))
        if not isinstance(agg, ss_server.Completed):
            raise UnexpectedMessageError("the aggregator did not complete the round")
        return agg.total, agg.contributors


class ClientExchange:
    """A client's half of the exchanges: received broadcasts, prepared inputs, mechanism stages.

    Args:
        rt (ClientRuntime): The party's runtime (registers the mechanism actions).
        stack (ProtocolStack): This party's copy of the run's stack.
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
        self.pending: dict[tuple[str, int], _Prepared] = {}
        self.calls: dict[tuple[str, int], ClientStage] = {}
        self.ckks = NodeCKKS(rt, stack, (*clients, *helpers))
        self.ckks_robust = NodeCKKSRobust(rt, stack, self.ckks.keys)
        rt.on(ACTION_AGGREGATE, self._on_aggregate)
        self.deviations: dict[tuple[str, str], Any] = {}
        """(exchange kind, tag) -> how this party deviates from its honest input there (attack
        harnesses install it for an adversarial party only; honest parties have none)."""
        self.halves = build_halves(self)
        """The other exchange kinds' client halves, by name (:mod:`~securefg.federation.program.halves`)."""

    @property
    def party(self) -> Party:
        return self.rt.party

    def deviate(self, kind: str, tag: str, value: Any) -> Any:
        """``value`` as this party hands it to exchange ``kind`` of ``tag``: the honest value,
        unless an attack harness made this party deviate there. Every client half calls it on
        the input it is given, so a deviation sits exactly where a malicious client acts:
        after computing its honest input, before the stack's transforms and the mechanism."""
        poison = self.deviations.get((kind, tag))
        return value if poison is None else poison(value)

    def received(self, tag: str, round: int, like: Tensors | None = None) -> dict[str, torch.Tensor]:
        """Decode the one broadcast of ``tag`` this round (checked against ``like``'s names,
        dtypes and shapes when given).

        Raises:
            UnexpectedMessageError: None or several came, or not from the server.
        """
        envs = self.rt.transport.receive(self.rt.party.pid, tag=tag, round=round)
        if len(envs) != 1 or envs[0].sender != SERVER:
            raise UnexpectedMessageError(f"{self.rt.party.pid} expected one {tag!r} broadcast from the server, got {len(envs)}")
        res = self.stack.resolve(tag, ExchangeKind.BROADCAST)
        if like is None:
            return decode_tensors(envs[0].payload)
        spec = TensorSpec.like(to_wire(res, tag, like))
        return from_wire(decode_tensors(envs[0].payload, spec=spec), like)

    def contribute(self, tag: str, round: int, tensors: Tensors, *, weight: float | None = None,
                   side: Tensors | None = None) -> None:
        """Prepare this client's input to ``aggregate(tag)`` as ``Exchange.aggregate`` does:
        the vector times ``weight`` through the tag's client transforms, then (once the server
        says whether the call is weighted) the side counts and the weight appended.

        Raises:
            InvalidInputError: A negative weight, non-floating or non-finite tensors.
        """
        res = resolve_aggregate(self.stack, tag)
        pid = self.rt.party.pid
        tensors = self.deviate("aggregate", tag, tensors)
        vec, layout = flatten(tensors, what=f"{tag!r} from {pid}")
        w = 1.0 if weight is None else float(weight)
        if not w >= 0:
            raise InvalidInputError(f"{tag!r}: weight of {pid} must be >= 0, got {w}")
        v = vec * w
        call = party_call(self.rt.transport, self.parties, round=round, tag=tag, res=res, kind=ExchangeKind.AGGREGATE,
                          rng=self.rng)
        for t in res.transforms:
            v = t.client(call, pid, v)
            getattr(t, "handed_off", lambda: None)()
        text = layout_to_text(layout)
        extra = torch.zeros(0, dtype=torch.float64)
        if side is not None:
            extra, side_layout = flatten(side, what=f"{tag!r} side from {pid}")
            clash = {n for n, _, _ in side_layout.fields} & {n for n, _, _ in layout.fields}
            if clash:
                raise InvalidInputError(f"{tag!r}: side names {sorted(clash)} are also input names")
            text += "|" + layout_to_text(side_layout)
        for old in [k for k in self.pending if k[0] == tag and k[1] < round]:  # masked_robust: a dropped client's
            del self.pending[old]  # input is never asked for
        self.pending[(tag, round)] = _Prepared(v.detach().to("cpu", torch.float64), extra, w)
        self.rt.reply_info[LAYOUT + tag] = text

    def _input(self, step: Step) -> np.ndarray:
        key = (step.tag, step.round)
        if key not in self.pending:
            raise InvalidInputError(f"{self.rt.party.pid} has no input prepared for {step.tag!r} round {step.round}")
        return self.pending[key].vector(bool(step.info.get("weighted", 1)))

    def _on_aggregate(self, step: Step) -> None:
        key, pid = (step.tag, step.round), self.rt.party.pid
        res = resolve_aggregate(self.stack, step.tag)
        mech = res.mechanism.inner if isinstance(res.mechanism, SubgroupRobust) else res.mechanism
        if step.stage == PLAINTEXT_UPLOAD:
            vec = torch.from_numpy(self._input(step))
            del self.pending[key]
            self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, encode_tensor(vec), stage=PLAINTEXT_UPLOAD))
            return
        if isinstance(mech, MaskedRobust):
            if step.stage == MaskedStage.SKETCH:  # the update stays here until the kept clients' masked sum
                self.ckks_robust.upload(step, torch.from_numpy(self._input(step)))
                return
            mech = mech.inner
        if isinstance(mech, CKKSRobust):
            if step.stage != RobustStage.UPLOAD:
                raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for ckks_robust tag {step.tag!r}")
            vec = torch.from_numpy(self._input(step))
            del self.pending[key]
            self.ckks_robust.upload(step, vec)
            return
        if isinstance(mech, CKKS):
            if step.stage != CKKSStage.UPLOAD:
                raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for CKKS tag {step.tag!r}")
            vec = torch.from_numpy(self._input(step))
            del self.pending[key]
            self.ckks.upload_sum_input(step.tag, step.round, vec)
            return
        if not isinstance(mech, SecureSum):
            raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for {mech.name!r} tag {step.tag!r}")
        route = Route(self.rt.transport, relay=SERVER, aggregator=SERVER, round=step.round, tag=step.tag)  # type: ignore[arg-type]

        def begin() -> ClientStage:
            info, identity = party_info(CallInfo(self.rt.transport.session, step.round, step.tag, mech.settings, route),
                                        self.rt.party.state, pid)
            return AdvertiseKeys(ClientContext(pid, info, self._input(step), identity=identity))

        if advance_client_stage(self.calls, key, pid, step, route, begin):
            del self.pending[key]


def agreed_layout(rt: ServerRuntime, key: tuple[str, int], members: Sequence[str], *, tag: str, what: str) -> str:
    """The one layout text every member reported under ``key`` (as the server).

    Raises:
        InvalidInputError: A member reported none, or members reported different layouts.
    """
    got = rt.layouts.pop(key, {})
    missing = [c for c in members if c not in got]
    if missing:
        raise InvalidInputError(f"{tag!r}: {missing} contributed nothing {what}")
    texts = {got[c] for c in members}
    if len(texts) != 1:
        raise InvalidInputError(f"{tag!r}: contributors {what} sent tensors whose names/shapes differ from the others'")
    return texts.pop()


def advance_client_stage(calls: dict[Any, ClientStage], key: Any, pid: str, step: Step, route: Route,
                         begin: Callable[[], ClientStage]) -> bool:
    """One secure-sum stage as a client: ``begin()`` the call at advertise-keys, feed the stage's
    one message to the client's stage machine. Returns whether the call ended (its secrets, the
    stage machine, are dropped then).

    Raises:
        UnexpectedMessageError: A stage before the call began, or not exactly one message.
    """
    stage = Stage(step.stage)
    if stage is Stage.ADVERTISE_KEYS:
        calls[key] = begin()
    if key not in calls:
        raise UnexpectedMessageError(f"{pid} got {stage.value!r} for {step.tag!r} before the call began")
    msgs = route.client_inbox(pid, stage)
    if len(msgs) != 1:
        raise UnexpectedMessageError(f"{pid} got {len(msgs)} {stage.value!r} messages, expected one")
    calls[key] = calls[key].handle(msgs[0])
    if stage is Stage.UNMASK:  # the call's secrets die with it
        del calls[key]
        return True
    return False


class _Prepared:
    """A client's prepared aggregate input: the transformed vector, side counts and weight."""

    def __init__(self, values: torch.Tensor, side: torch.Tensor, weight: float) -> None:
        self.values, self.side, self.weight = values, side, weight

    def vector(self, weighted: bool) -> np.ndarray:
        tail = torch.tensor([self.weight] if weighted else [], dtype=torch.float64)
        return torch.cat([self.values, self.side, tail]).numpy()

