"""``ckks_robust`` and ``masked_robust`` aggregates split by party: the server, each client, the key holder.

The steps of :mod:`securefg.protocol.robust.ckks_robust`, each role in its own process, with
the same helper functions for each role's computation:

* keys (the server gets Galois keys); an ``aggregate`` step at stage ``ckks_robust/upload``
  (each client encrypts its prepared input, its count sketch split into a power-of-two
  magnitude and a part of norm at most 1, and its count tail apart);
* the server's Gram request over the sketches in a secret pseudonym order;
  ``ckks_robust/judge`` step (the key holder decrypts the inner products, magnitudes and tails,
  runs the rule, returns the coefficients);
* the server's kept sums; ``ckks_robust/release`` step (the key holder checks the value sum's
  sketch against the sketch sum and the Gram matrix, floods and releases it).

``masked_robust`` runs the same judge on sketch-only uploads (stage ``masked_robust/sketch``), then
the inner ``secure_sum`` over the kept clients (the server's own SecAgg+ half, passed in), then a
``ckks_robust/release`` step that releases the sketch sum of the clients in the masked sum, which
the server checks the unmasked sum against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from securefg.errors import InvalidInputError, ProtocolError, UnexpectedMessageError
from securefg.federation.codec import TensorSpec, decode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import SERVER
from securefg.federation.program.ckks_flows import _ask_holder, _server_call, _uploads
from securefg.federation.program.ckks_keys import NodeKeys, ensure_keys
from securefg.federation.program.client_runtime import ClientRuntime
from securefg.federation.program.server_runtime import ServerRuntime
from securefg.federation.program.step import Step
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.relay import sealing_directory
from securefg.protocol.robust import masked_robust as mr
from securefg.protocol.robust.blind_robust import BlindRobust, seal_release
from securefg.protocol.robust.blind_robust import Stage as BlindStage
from securefg.protocol.robust.ckks_robust import (
    NAME,
    CKKSRobust,
    Expectation,
    Stage,
    encrypt_upload,
    gram_request,
    judge,
    parse_upload,
    pseudonym_order,
    read_coefficients,
    record_release,
    release_checked_sum,
    selected_sum,
    sketch_width,
)
from securefg.protocol.stack import ProtocolStack, Resolved

ACTION_JUDGE = "ckks_robust/judge"
ACTION_RELEASE = "ckks_robust/release"


# ====================================================================== server half
def robust_sum_server(rt: ServerRuntime, res: Resolved, *, tag: str, round: int, clients: Sequence[str], length: int,
                      action: str, info: Mapping[str, str | int], count_tail: int,
                      weighted: bool) -> tuple[torch.Tensor, tuple[str, ...]]:
    """The server's half: ``(robust sum || kept tails' sum, kept clients)``."""
    mech = res.mechanism
    assert isinstance(mech, CKKSRobust)
    mech.preset.require_levels(2, what="ckks_robust (ciphertext product, then a mask)")
    call = _server_call(rt, res, round=round, tag=tag, kind=ExchangeKind.AGGREGATE)
    senders = [c for c in clients if c not in rt.dropped]
    holder = ensure_keys(rt, mech.keys, call, kind=ExchangeKind.AGGREGATE, encryptors=senders, decryptors=(),
                         galois=True)
    rt.step(senders, action=action, round=round, tag=tag, stage=Stage.UPLOAD,
            info={**info, "tail": count_tail})
    server_ctx = mech.keys.context_of(call, SERVER)
    parsed = {pid: parse_upload(server_ctx, payload, length=length, tail=count_tail)
              for pid, payload in _uploads(rt, call, senders, Stage.UPLOAD).items()}
    order, uploads = pseudonym_order(parsed)
    rt.transport.send(Envelope(SERVER, (holder,), round, tag, gram_request(uploads), stage=Stage.GRAM_REQUEST,
                               form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ACTION_JUDGE, stage=Stage.GRAM_RESULT,
                      info={"n": len(order), "tail": count_tail, "weighted": int(weighted)})
    coeffs = read_coefficients(env.payload, len(order))
    rt.transport.send(Envelope(SERVER, (holder,), round, tag,
                               selected_sum(uploads, coeffs, weighted=bool(count_tail and weighted)),
                               stage=Stage.SUM_REQUEST, form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ACTION_RELEASE, stage=Stage.SUM_RESULT,
                      info={"length": length, "tail": count_tail})
    total = decode_tensor(env.payload, spec=TensorSpec({"x": (torch.float64, (length,))}))
    release = record_release(rt.party.state.setdefault(f"mech/{NAME}", {}), tag, round,
                             {p: float(coeffs[k]) for k, p in enumerate(order)})
    return total, release.kept


def judge_server(rt: ServerRuntime, res: Resolved, *, tag: str, round: int, senders: Sequence[str], length: int,
                 action: str, info: Mapping[str, str | int], count_tail: int, weighted: bool,
                 kind: ExchangeKind = ExchangeKind.AGGREGATE) -> tuple[mr.ServerSide, str, Any]:
    """Steps 1-2 of ``masked_robust`` (and ``blind_robust``) as the server: the clients' sketch
    uploads, the pseudonymous Gram request, the key holder's coefficients; returns ``(the server's
    side, the key holder, the call)``."""
    mech = res.mechanism
    assert isinstance(mech, mr.MaskedRobust)
    call = _server_call(rt, res, round=round, tag=tag, kind=kind)
    holder = ensure_keys(rt, mech.keys, call, kind=kind, encryptors=senders, decryptors=(), galois=True)
    rt.step(list(senders), action=action, round=round, tag=tag, stage=mr.Stage.SKETCH,
            info={**info, "tail": count_tail, "kind": kind.value})
    server_ctx = mech.keys.context_of(call, SERVER)
    order, uploads = pseudonym_order({
        pid: parse_upload(server_ctx, payload, length=length, tail=count_tail, with_values=False)
        for pid, payload in _uploads(rt, call, senders, mr.Stage.SKETCH).items()})
    rt.transport.send(Envelope(SERVER, (holder,), round, tag, gram_request(uploads), stage=Stage.GRAM_REQUEST,
                               form=Form.CIPHERTEXT))
    env = _ask_holder(rt, holder, call, action=ACTION_JUDGE, stage=Stage.GRAM_RESULT,
                      info={"n": len(order), "tail": count_tail, "weighted": int(weighted), "kind": kind.value})
    return mr.ServerSide(order, uploads, read_coefficients(env.payload, len(order))), holder, call


def masked_robust_server(rt: ServerRuntime, res: Resolved, *, tag: str, round: int, clients: Sequence[str],
                         length: int, action: str, info: Mapping[str, str | int], count_tail: int, weighted: bool,
                         secure_sum: Callable[[list[str]], tuple[torch.Tensor, tuple[str, ...]]],
                         ) -> tuple[torch.Tensor, tuple[str, ...]]:
    """The server's half of ``masked_robust``: ``(robust sum || kept tails' sum, clients in it)``;
    ``secure_sum(kept)`` runs the server's SecAgg+ half over the kept clients."""
    mech = res.mechanism
    assert isinstance(mech, mr.MaskedRobust)
    mech.preset.require_levels(2, what="masked_robust (ciphertext product, then a sum)")
    senders = [c for c in clients if c not in rt.dropped]
    if not mech.judges(len(senders)):
        total, contributors = secure_sum(senders)
        out = mr.unjudged(rt.party.state.setdefault(f"mech/{mr.NAME}", {}), tag, round, senders, total, contributors,
                          tail=count_tail, weighted=bool(count_tail and weighted))
        return out.total, out.contributors
    weighted = bool(count_tail and weighted)
    side, holder, call = judge_server(rt, res, tag=tag, round=round, senders=senders, length=length, action=action,
                                      info=info, count_tail=count_tail, weighted=weighted)
    kept = side.kept
    total, contributors = secure_sum(kept)

    def ask(coeffs: torch.Tensor) -> bytes:
        rt.transport.send(Envelope(SERVER, (holder,), round, tag, mr.sketch_sum_request(side.uploads, coeffs, weighted=weighted),
                                   stage=Stage.SUM_REQUEST, form=Form.CIPHERTEXT))
        return _ask_holder(rt, holder, call, action=ACTION_RELEASE, stage=Stage.SUM_RESULT,
                           info={"length": length, "tail": count_tail}).payload

    out = mr.finish(side, total, contributors, ask=ask, length=length, tail=count_tail, slots=mech.preset.slots,
                    weighted=weighted, quantization_error=mech.quantization_error(len(contributors)))
    record_release(rt.party.state.setdefault(f"mech/{mr.NAME}", {}), tag, round,
                   {p: (float(side.coefficients[k]) if p in contributors else 0.0) for k, p in enumerate(side.order)})
    return out, tuple(sorted(contributors))


# ====================================================================== client and key-holder halves
class NodeCKKSRobust:
    """A client's upload and the key holder's two steps of ``ckks_robust`` (and ``masked_robust``:
    a sketch-only upload, the same judge, a sketch-sum release).

    Args:
        rt (ClientRuntime): This party's runtime (registers the key holder's actions).
        stack (ProtocolStack): The run's stack.
        keys (NodeKeys): The party's one key-setup half (shared with its other CKKS exchanges).
    """

    def __init__(self, rt: ClientRuntime, stack: ProtocolStack, keys: NodeKeys) -> None:
        self.rt, self.stack, self.keys = rt, stack, keys
        self.expect: dict[tuple[str, int], Expectation] = {}
        rt.on(ACTION_JUDGE, self._on_judge)
        rt.on(ACTION_RELEASE, self._on_release)

    def upload(self, step: Step, vector: torch.Tensor) -> None:
        """Encrypt this client's prepared input (values, sketch, magnitude, count tail) and send it."""
        pid = self.rt.party.pid
        mech, call, keys = self._mech(step)
        tail = int(step.info.get("tail", 0))
        if not 0 <= tail < vector.numel():
            raise InvalidInputError(f"{pid}: a count tail of {tail} does not fit its {vector.numel()} values")
        self.keys.install(keys, call)
        masked = isinstance(mech, mr.MaskedRobust)
        if masked:  # the vector its masked sum will carry (saturated at the clip, if the sum saturates)
            vector = mech.as_masked(vector)
        payload = encrypt_upload(keys.context_of(call, pid), vector, tail=tail, preset=mech.preset, pid=pid,
                                 with_values=not masked)
        self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, payload,
                                        stage=mr.Stage.SKETCH if masked else Stage.UPLOAD, form=Form.CIPHERTEXT))

    def _mech(self, step: Step) -> tuple[CKKSRobust | mr.MaskedRobust, Any, Any]:
        kind = ExchangeKind(step.info.get("kind", ExchangeKind.AGGREGATE.value))  # blind_robust: a shared sum
        keys, call = self.keys.call(step.tag, step.round, kind)
        mech = self.stack.resolve(step.tag, kind).mechanism
        if not isinstance(mech, (CKKSRobust, mr.MaskedRobust)):
            raise UnexpectedMessageError(f"{self.rt.party.pid} got a robust judge step for {step.tag!r}, bound to "
                                         f"{mech.name!r}")
        return mech, call, keys

    def _request(self, step: Step, stage: str) -> tuple[CKKSRobust | mr.MaskedRobust, Any, Any, Envelope]:
        pid = self.rt.party.pid
        mech, call, keys = self._mech(step)
        if keys.holder(call) != pid:
            raise ProtocolError(f"{pid} was asked to judge {step.tag!r} but is not its key holder")
        got = self.rt.transport.receive_from(pid, [SERVER], tag=step.tag, round=step.round, stage=stage)
        if SERVER not in got:
            raise UnexpectedMessageError(f"{pid} got no {stage!r} request for {step.tag!r}")
        return mech, call, keys, got[SERVER]

    def _on_judge(self, step: Step) -> None:
        mech, call, keys, req = self._request(step, Stage.GRAM_REQUEST)
        reply, self.expect[(step.tag, step.round)] = judge(
            keys.secret_of(call, self.rt.party.pid), req.payload, n=int(step.info["n"]), tail=int(step.info["tail"]),
            weighted=bool(step.info.get("weighted", 0)), **mech.rule_params())
        form = getattr(mech, "coefficient_form", Form.AGGREGATE)  # blind_robust: bookkeeping, no value of the tag
        self.rt.transport.send(req.reply(reply, sender=self.rt.party.pid, stage=Stage.GRAM_RESULT, form=form))

    def _on_release(self, step: Step) -> None:
        mech, call, keys, req = self._request(step, Stage.SUM_REQUEST)
        expect = self.expect.pop((step.tag, step.round), None)
        if expect is None:
            raise UnexpectedMessageError(f"{self.rt.party.pid} was asked to release {step.tag!r} round {step.round} "
                                         "before it judged it")
        secret, length, tail = keys.secret_of(call, self.rt.party.pid), int(step.info["length"]), int(step.info["tail"])
        if isinstance(mech, BlindRobust):  # sealed to every client; the server forwards boxes it cannot open
            pid = self.rt.party.pid
            for env in self.rt.transport.receive(pid, tag=step.tag, round=step.round, stage=sealing_directory.STAGE):
                sealing_directory.accept(call, pid, env)
            publish_to = _names(step.info.get("publish_to", ""))
            if publish_to:  # the clients check its boxes against its sealing key
                sealing_directory.publish(call, pid, publish_to)
            released = mr.release_sketch_sum(secret, req.payload, expect, width=sketch_width(length, mech.preset.slots),
                                             tail=0)
            self.rt.transport.send(req.reply(seal_release(call, pid, _names(step.info["seal_to"]), released), sender=pid,
                                             stage=BlindStage.SKETCH_RELEASE, form=Form.SEALED))
            return
        if isinstance(mech, mr.MaskedRobust):
            released = mr.release_sketch_sum(secret, req.payload, expect, width=sketch_width(length - tail, mech.preset.slots),
                                             tail=tail)
        else:
            released = release_checked_sum(secret, req.payload, expect, mech.noise, length=length, tail=tail)
        self.rt.transport.send(req.reply(released, sender=self.rt.party.pid, stage=Stage.SUM_RESULT, form=Form.AGGREGATE))


def _names(text: object) -> list[str]:
    return [p for p in str(text).split(",") if p]


__all__ = ["ACTION_JUDGE", "ACTION_RELEASE", "NodeCKKSRobust", "judge_server", "masked_robust_server",
           "robust_sum_server"]
