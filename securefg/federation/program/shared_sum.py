"""``shared_sum`` split by party: every client learns the sum ("aggregate, then broadcast back").

The same envelopes as :meth:`securefg.federation.exchange.Exchange.shared_sum`:

* ``plaintext``: clear uploads (``plaintext/upload``), the server's sum sent to every input
  client (``shared_sum/result``, ``Form.PLAINTEXT``);
* ``secure_sum``: SecAgg+ with the server as the aggregator (its stage machine here, the
  clients' in their processes), the sum sent back (``Form.AGGREGATE``);
* ``blind_sum``: the clients' group key first (:mod:`~securefg.protocol.secure_sum.group_key`:
  sealing keys to the leader, sealed boxes forwarded by the server), then SecAgg+ with each
  client's input blinded under it; the server sends the still blinded ring sum
  (``Form.MASKED``) and each client unblinds it.

A client contributes while handling a method action (:meth:`SharedSumHalf.contribute`); the
server calls :func:`shared_sum`; each client reads the sum with :meth:`SharedSumHalf.result`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from securefg.errors import ConfigError, InvalidInputError, ProtocolError, UnexpectedMessageError
from securefg.federation.channel import length_prefixed, split_length_prefixed
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.federation.flatten import flatten, layout_from_text, layout_to_text, unflatten
from securefg.federation.party import SERVER, is_client
from securefg.federation.program import relay as relay_program
from securefg.federation.program.calls import party_call
from securefg.federation.program.ckks_flows import _ask_holder
from securefg.federation.program.ckks_keys import ACTION_SEALING as ROBUST_SEALING
from securefg.federation.program.ckks_robust_flows import ACTION_RELEASE as ROBUST_RELEASE
from securefg.federation.program.ckks_robust_flows import judge_server
from securefg.federation.program.exchange import advance_client_stage, agreed_layout
from securefg.federation.program.halves import client_half
from securefg.federation.program.peer_sum import client_transform, server_transforms
from securefg.federation.program.server_runtime import LAYOUT
from securefg.federation.program.step import Step
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.relay import sealing_directory
from securefg.protocol.relay.blob_list import unpack_blobs
from securefg.protocol.robust import masked_robust as mr
from securefg.protocol.robust.blind_robust import BlindRobust, pack_result, read_checked
from securefg.protocol.robust.blind_robust import Stage as BlindStage
from securefg.protocol.robust.ckks_robust import CKKSRobust, record_release
from securefg.protocol.robust.ckks_robust import Stage as RobustStage
from securefg.protocol.robust.masked_robust import MaskedRobust
from securefg.protocol.robust.masked_robust import Stage as MaskedStage
from securefg.protocol.robust.mechanism import SubgroupRobust
from securefg.protocol.robust.plaintext_krum import PlaintextKrum
from securefg.protocol.secure_sum import group_key
from securefg.protocol.secure_sum import server as ss_server
from securefg.protocol.secure_sum.blind import BlindSum
from securefg.protocol.secure_sum.blinded_result import BlindedResult, unblind
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext, party_info
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.route import Route
from securefg.protocol.shared_result import STAGE as RESULT_STAGE
from securefg.protocol.transform_rules import require_client_side

ACTION = "shared_sum"
UPLOAD = "plaintext/upload"
KEY_ACTION = "blind_sum/group_key"
PUBLISH, SEAL, OPEN = "publish", "seal", "open"

Tensors = Mapping[str, torch.Tensor]


def _resolve(stack: Any, tag: str) -> Any:
    res = stack.resolve(tag, ExchangeKind.SHARED_SUM)
    require_client_side(tag, res.transforms)
    return res


# ====================================================================== server half
def shared_sum(ex: Any, tag: str, clients: Iterable[str] | None = None) -> tuple[str, ...]:
    """The server's half of ``shared_sum(tag)`` this round; returns who is in the sum. Under
    ``subgroup_robust``, ``ckks_robust`` or ``masked_robust`` (the robust option) the server runs the aggregate's
    robust flow and sends the robust result back.

    Raises:
        InvalidInputError: A client without (or with another) layout; fewer than two under blind_sum.
    """
    ex.use_tag(tag, ExchangeKind.SHARED_SUM)
    res = _resolve(ex.stack, tag)
    rt = ex.rt
    members = sorted(c for c in (rt.live if clients is None else clients) if c not in rt.dropped)
    text = agreed_layout(rt, (tag, ex.round), members, tag=tag, what="this round")
    length = layout_from_text(text, what=f"{tag!r} layout").size
    info: dict[str, str | int] = {"layout": text, "members": ",".join(members)}
    mech = res.mechanism
    if isinstance(mech, BlindRobust) and mech.judges(len(members)):  # the rule, and still server-blind
        contributors = _blind_robust(ex, res, tag, members, length, info)
        server_transforms(res, ex.call(tag, res, ExchangeKind.SHARED_SUM), length, tuple(contributors))
        return tuple(contributors)
    if isinstance(mech, BlindRobust):  # too few clients to judge: the blind sum alone
        mech = mech.inner
    if isinstance(mech, (SubgroupRobust, CKKSRobust, MaskedRobust, PlaintextKrum)):  # a robust rule: the server reads the result
        total, contributors = ex._sum(mech, tag, members, length, {"weighted": 0}, count_tail=0, weighted=False)
        payload, form = encode_tensor(total), Form.AGGREGATE
    elif isinstance(mech, BlindSum):
        if len(members) < 2:
            raise InvalidInputError(f"{tag!r}: a blind sum needs at least two clients")
        _ensure_group_key(ex, tag, members)
        agg = _secure(ex, mech, tag, members, length, {**info, "blind": 1})
        assert agg.ring_total is not None
        bits = mech.settings.ring_bits(len(members))
        payload, form, contributors = (BlindedResult(len(members), bits, agg.contributors, agg.ring_total).encode(),
                                       Form.MASKED, agg.contributors)
    elif isinstance(mech, SecureSum):
        agg = _secure(ex, mech, tag, members, length, info)
        payload, form, contributors = encode_tensor(agg.total), Form.AGGREGATE, agg.contributors
    elif mech.name == "plaintext":
        ex.step(members, action=ACTION, tag=tag, stage=UPLOAD, info=info)
        ups = rt.transport.receive_from(SERVER, members, tag=tag, round=ex.round, stage=UPLOAD)
        if not ups:
            raise InvalidInputError(f"{tag!r}: no client contributed")
        spec = TensorSpec({"x": (torch.float64, (length,))})
        outcome = mech.combine_uploads({p: decode_tensor(ups[p].payload, spec=spec) for p in sorted(ups)})
        payload, form, contributors = encode_tensor(outcome.total), Form.PLAINTEXT, outcome.contributors
    else:
        raise ConfigError(f"shared_sum tag {tag!r}: mechanism {mech.name!r} has no party-program halves")
    rt.transport.send(Envelope(SERVER, tuple(members), ex.round, tag, payload, stage=RESULT_STAGE, form=form))
    ex.step(members, action=ACTION, tag=tag, stage=RESULT_STAGE,
            info={**info, "contributors": ",".join(contributors)})
    server_transforms(res, ex.call(tag, res, ExchangeKind.SHARED_SUM), length, tuple(contributors))
    return tuple(contributors)


def _blind_robust(ex: Any, res: Any, tag: str, members: list[str], length: int, info: Mapping[str, str | int]) -> tuple[str, ...]:
    """``blind_robust`` as the server: the judge (sketches, the key holder's coefficients), the
    kept clients' blinded SecAgg+, the key holder's release sealed to every client, then the
    blinded sum, the kept list and each client's box to the clients, who unblind and check."""
    rt, mech = ex.rt, res.mechanism
    mech.preset.require_levels(2, what="blind_robust (ciphertext product, then a sum)")
    _ensure_group_key(ex, tag, members)  # every member reads the result, the dropped ones too
    side, holder, call = judge_server(rt, res, tag=tag, round=ex.round, senders=members, length=length, action=ACTION,
                                      info=info, count_tail=0, weighted=False, kind=ExchangeKind.SHARED_SUM)
    kept = side.kept
    agg = _secure(ex, mech.inner, tag, kept, length, {**info, "blind": 1})
    assert agg.ring_total is not None
    result = BlindedResult(len(kept), mech.inner.settings.ring_bits(len(kept)), agg.contributors, agg.ring_total).encode()
    readers = [c for c in members if c not in rt.dropped]
    lacks = [c for c in readers if c != holder and not relay_program._known(ex, holder, c)]  # (a client may hold the key)
    if lacks:  # the key holder seals to their keys (the CKKS key setup's step and ledger)
        rt.step(lacks, action=ROBUST_SEALING, round=ex.round, tag=tag,
                info={"holder": holder, "kind": ExchangeKind.SHARED_SUM.value})
        for c in lacks:
            relay_program._learn(ex, holder, c)
        readers = [c for c in readers if c not in rt.dropped]
    unknown = [c for c in readers if c != holder and not relay_program._known(ex, c, holder)]
    rt.transport.send(Envelope(SERVER, (holder,), ex.round, tag,
                               mr.sketch_sum_request(side.uploads, side.in_sum(agg.contributors), weighted=False),
                               stage=RobustStage.SUM_REQUEST, form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ROBUST_RELEASE, stage=BlindStage.SKETCH_RELEASE,
                      info={"length": length, "tail": 0, "kind": ExchangeKind.SHARED_SUM.value,
                            "seal_to": ",".join(readers), "publish_to": ",".join(unknown)})
    for c in unknown:
        relay_program._learn(ex, c, holder)
    boxes = unpack_blobs(env.payload, max_count=len(readers))
    if len(boxes) != len(readers):
        raise ProtocolError(f"{tag!r}: the key holder sealed {len(boxes)} release(s) for {len(readers)} clients")
    for r, box in zip(readers, boxes, strict=True):  # forwarded unread
        rt.transport.send(Envelope(SERVER, (r,), ex.round, tag, box, stage=BlindStage.FORWARD, form=Form.SEALED))
    rt.transport.send(Envelope(SERVER, tuple(readers), ex.round, tag, pack_result(result, kept, members),
                               stage=RESULT_STAGE, form=Form.MASKED))
    record_release(rt.party.state.setdefault(f"mech/{mech.name}", {}), tag, ex.round,
                   {p: (1.0 if p in agg.contributors else 0.0) for p in side.order})
    ex.step(readers, action=ACTION, tag=tag, stage=RESULT_STAGE,
            info={**info, "contributors": ",".join(agg.contributors), "robust": 1})
    return tuple(agg.contributors)


def _secure(ex: Any, mech: SecureSum, tag: str, members: list[str], length: int,
            info: Mapping[str, str | int]) -> ss_server.Completed:
    """SecAgg+ with the server as the aggregator (as ``ServerExchange._secure_sum``)."""
    rt = ex.rt
    route = Route(rt.transport, relay=SERVER, aggregator=SERVER, round=ex.round, tag=tag)  # type: ignore[arg-type]
    call_info, _ = party_info(CallInfo(rt.transport.session, ex.round, tag, mech.settings, route), rt.party.state, SERVER)
    clients = tuple(members)
    degree, threshold = mech.settings.graph(len(clients))
    ctx = AggregatorContext(
        pid=SERVER, info=call_info, clients=clients,
        graph=harary_graph(clients, degree) if len(clients) > 1 else {c: frozenset() for c in clients},
        degree=degree, threshold=threshold, length=length, quantizer=mech.settings.quantizer(len(clients)), e2e_sk=None,
        blinded=bool(info.get("blind")),
    )
    agg: ss_server.ServerStage = ss_server.begin(ctx, set(clients))
    for stage in Stage.ordered(signatures=mech.settings.signatures):
        waiting = set(rt.transport.outbox_receivers())
        ex.step([p for p in clients if p in waiting], action=ACTION, tag=tag, stage=stage.value, info=info)
        agg = agg.handle(route.aggregator_inbox(stage))
    if not isinstance(agg, ss_server.Completed):
        raise UnexpectedMessageError("the aggregator did not complete the round")
    return agg


def _ensure_group_key(ex: Any, tag: str, members: list[str]) -> None:
    """``group_key.ensure_group_key`` by party: clients without the key publish their sealing
    keys to the leader (unless it holds them: the server's sealing-key ledger, shared with the
    relay's), the leader draws the key (once per session), publishes its own sealing key to the
    receivers lacking it (they open its boxes only under that key) and seals the key to each of
    them; the server forwards the boxes unread. The server knows who holds the key: it forwarded
    the boxes."""
    rt = ex.rt
    holders: list[str] = rt.party.state.setdefault(f"mech/{group_key.NAMESPACE}", {}).setdefault(
        "holders", {}).setdefault(rt.transport.session.hex(), [])
    live = sorted(members)
    missing = [c for c in live if c not in holders]
    if not missing:
        return
    held = [c for c in live if c in holders]
    leader = held[0] if held else live[0]
    receivers = [c for c in missing if c != leader]
    lacks = [o for o in receivers if not relay_program._known(ex, leader, o)]
    if lacks:
        for o in ex.step(lacks, action=KEY_ACTION, tag=tag, stage=PUBLISH, info={"leader": leader}):
            relay_program._learn(ex, leader, o)
    unknown = [r for r in receivers if not relay_program._known(ex, r, leader)]
    rep = ex.step([leader], action=KEY_ACTION, tag=tag, stage=SEAL,
                  info={"owners": ",".join(receivers), "publish_to": ",".join(unknown)})
    if leader not in rep:
        raise ProtocolError(f"{tag!r}: the group-key leader {leader} dropped out")
    for r in unknown:
        relay_program._learn(ex, r, leader)
    if leader not in holders:
        holders.append(leader)
    if not receivers:
        return
    for env in rt.transport.receive(SERVER, tag=tag, round=ex.round, stage=group_key.STAGE_UP):
        (dest, box), end = split_length_prefixed(env.payload, 2)  # forward, unread
        receiver = dest.decode("utf-8", errors="replace")
        if end != len(env.payload) or not is_client(receiver) or env.sender != leader:
            raise UnexpectedMessageError(f"server cannot forward a group-key box to {receiver!r}")
        rt.transport.send(Envelope(SERVER, (receiver,), ex.round, tag, box, stage=group_key.STAGE_DOWN, form=Form.SEALED))
    got = ex.step(receivers, action=KEY_ACTION, tag=tag, stage=OPEN, info={"leader": leader})
    holders.extend(p for p in receivers if p in got)


# ====================================================================== client half
@client_half("shared_sum")
class SharedSumHalf:
    """A client's half of ``shared_sum`` (and of the ``blind_sum`` group key)."""

    def __init__(self, ex: Any) -> None:
        self.ex, self.rt = ex, ex.rt
        self.pending: dict[tuple[str, int], torch.Tensor] = {}
        self.calls: dict[tuple[str, int], ClientStage] = {}
        self.results: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        ex.rt.on(ACTION, self._on_step)
        ex.rt.on(KEY_ACTION, self._on_key)

    def _call(self, tag: str, round: int) -> Any:
        res = self.ex.stack.resolve(tag, ExchangeKind.SHARED_SUM)
        return res, party_call(self.rt.transport, self.ex.parties, round=round, tag=tag, res=res,
                               kind=ExchangeKind.SHARED_SUM, rng=self.ex.rng)

    def contribute(self, tag: str, round: int, tensors: Tensors) -> None:
        """This client's input to ``shared_sum(tag)`` this round (transforms run here)."""
        pid = self.rt.party.pid
        _resolve(self.ex.stack, tag)
        res, call = self._call(tag, round)
        tensors = self.ex.deviate("shared_sum", tag, tensors)
        if isinstance(res.mechanism, (SubgroupRobust, CKKSRobust, MaskedRobust, PlaintextKrum)) and not isinstance(
                res.mechanism, BlindRobust):  # its sums run as aggregates
            self.ex.contribute(tag, round, tensors)
            return
        vec, layout = flatten(tensors, what=f"{tag!r} from {pid}")
        for t in res.transforms:
            vec = client_transform(t, call, pid, vec)
        self.pending[(tag, round)] = vec.detach().to("cpu", torch.float64)
        self.rt.reply_info[LAYOUT + tag] = layout_to_text(layout)

    def result(self, tag: str, round: int) -> dict[str, torch.Tensor] | None:
        """The sum this client received for ``tag`` this round (``None``: it cannot read it)."""
        return self.results.pop((tag, round), None)

    def _on_step(self, step: Step) -> None:
        pid, key = self.rt.party.pid, (step.tag, step.round)
        res, call = self._call(step.tag, step.round)
        mech = res.mechanism
        if isinstance(mech, BlindRobust) and step.stage == MaskedStage.SKETCH:  # the input stays for the kept sum
            if key not in self.pending:
                raise InvalidInputError(f"{pid} has no input prepared for {step.tag!r} round {step.round}")
            self.ex.ckks_robust.upload(step, self.pending[key])
            return
        if isinstance(mech, BlindRobust) and step.stage == RESULT_STAGE and step.info.get("robust"):
            self.pending.pop(key, None)  # a client the rule dropped never sent it
            self._read_robust(step, call, mech)
            return
        if isinstance(mech, BlindRobust):
            mech = mech.inner
        if step.stage == UPLOAD:
            vec = self.pending.pop(key)
            self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, encode_tensor(vec), stage=UPLOAD))
            return
        layout = layout_from_text(str(step.info["layout"]), what=f"{step.tag!r} layout")
        if step.stage == RESULT_STAGE:
            (env,) = self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=RESULT_STAGE)
            if env.sender != SERVER:
                raise UnexpectedMessageError(f"{pid} got a {step.tag!r} result from {env.sender!r}")
            if isinstance(mech, BlindSum):
                k = group_key.held_key(call, pid)
                if k is None:
                    return  # it was offline at key setup; it cannot read this result
                members = tuple(p for p in str(step.info["members"]).split(",") if p)
                total = unblind(BlindedResult.decode(env.payload), key=k, settings=mech.settings,
                                session=self.rt.transport.session, round=step.round, tag=step.tag, clients=members)
            else:
                total = decode_tensor(env.payload, spec=TensorSpec({"x": (torch.float64, (layout.size,))}))
            self.results[key] = unflatten(total, layout)
            return
        if not isinstance(mech, SecureSum):
            raise UnexpectedMessageError(f"{pid} got stage {step.stage!r} for {mech.name!r} tag {step.tag!r}")
        route = Route(self.rt.transport, relay=SERVER, aggregator=SERVER, round=step.round, tag=step.tag)  # type: ignore[arg-type]

        def begin() -> ClientStage:
            if key not in self.pending:
                raise InvalidInputError(f"{pid} has no input prepared for {step.tag!r} round {step.round}")
            blind = b""
            if step.info.get("blind"):
                k = group_key.held_key(call, pid)
                if k is not None:
                    blind = group_key.blinding_seed(k, session=self.rt.transport.session, round=step.round,
                                                    tag=step.tag, client=pid)
            info, identity = party_info(CallInfo(self.rt.transport.session, step.round, step.tag, mech.settings, route),
                                        self.rt.party.state, pid)
            return AdvertiseKeys(ClientContext(pid, info, self.pending.pop(key).numpy(), blind_seed=blind,
                                               identity=identity))

        advance_client_stage(self.calls, key, pid, step, route, begin)

    def _read_robust(self, step: Step, call: Any, mech: BlindRobust) -> None:
        """``blind_robust``'s result as this client: the key holder's sealing key (first time),
        its box, the blinded kept sum; unblind, open, check (:func:`~securefg.protocol.robust.blind_robust.read_checked`)."""
        pid = self.rt.party.pid
        for env in self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
            sealing_directory.accept(call, pid, env)
        (fwd,) = self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=BlindStage.FORWARD)
        (env,) = self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=RESULT_STAGE)
        if fwd.sender != SERVER or env.sender != SERVER:
            raise UnexpectedMessageError(f"{pid} got a {step.tag!r} result from {env.sender!r}")
        layout = layout_from_text(str(step.info["layout"]), what=f"{step.tag!r} layout")
        # the key holder is the stack's, not whoever the server names: only its boxes open
        out = read_checked(call, mech, receiver=pid, holder=mech.keys.holder(call), payload=env.payload,
                           box=fwd.payload, length=layout.size)
        self.results[(step.tag, step.round)] = unflatten(out.total, layout)

    def _on_key(self, step: Step) -> dict[str, str | int] | None:
        """The group key's steps, each as ``group_key.ensure_group_key`` acts as this party."""
        pid = self.rt.party.pid
        _, call = self._call(step.tag, step.round)
        if step.stage == PUBLISH:
            sealing_directory.publish(call, pid, [str(step.info["leader"])])
            return None
        if step.stage == SEAL:
            owners = [p for p in str(step.info["owners"]).split(",") if p]
            publish_to = [p for p in str(step.info.get("publish_to", "")).split(",") if p]
            for env in self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
                sealing_directory.accept(call, pid, env)
            if publish_to:  # the receivers check its boxes against its sealing key
                sealing_directory.publish(call, pid, publish_to)
            group_key.draw_key(call, pid)  # the leader draws the key, once per session
            for r in owners:  # refuses any receiver but another client
                box = group_key.seal_key(call, pid, r)
                self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, length_prefixed(r.encode(), box),
                                                stage=group_key.STAGE_UP, form=Form.SEALED))
            return None
        if step.stage == OPEN:
            for env in self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
                sealing_directory.accept(call, pid, env)
            (env,) = self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=group_key.STAGE_DOWN)
            group_key.open_key(call, pid, str(step.info["leader"]), env.payload)  # only a box its leader sealed
            return None
        raise UnexpectedMessageError(f"{pid} got an unknown group-key stage {step.stage!r}")
