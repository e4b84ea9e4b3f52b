"""``ckks_robust`` aggregates split by party: the server, each client, the key holder.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from securefg.protocol.relay.shuffle import secure_permutation
from securefg.protocol.robust.ckks_robust import (
    NAME,
    CKKSRobust,
    Expectation,
    Stage,
    encrypt_upload,
    gram_request,
    judge,
    parse_upload,
    read_coefficients,
    record_release,
    release_checked_sum,
    selected_sum,
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
    uploaders = sorted(parsed)
    order = [uploaders[k] for k in secure_permutation(len(uploaders))]  # pseudonym k -> client
    uploads = [parsed[p] for p in order]
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


# ====================================================================== client and key-holder halves
class NodeCKKSRobust:
    """A client's upload and the key holder's two steps of ``ckks_robust``.

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
        payload = encrypt_upload(keys.context_of(call, pid), vector, tail=tail, preset=mech.preset, pid=pid)
        self.rt.transport.send(Envelope(pid, (SERVER,), step.round, step.tag, payload, stage=Stage.UPLOAD,
                                        form=Form.CIPHERTEXT))

    def _mech(self, step: Step) -> tuple[CKKSRobust, Any, Any]:
        keys, call = self.keys.call(step.tag, step.round, ExchangeKind.AGGREGATE)
        mech = self.stack.resolve(step.tag, ExchangeKind.AGGREGATE).mechanism
        if not isinstance(mech, CKKSRobust):
            raise UnexpectedMessageError(f"{self.rt.party.pid} got a ckks_robust step for {step.tag!r}, bound to {mech.name!r}")
        return mech, call, keys

    def _request(self, step: Step, stage: str) -> tuple[CKKSRobust, Any, Any, Envelope]:
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
        self.rt.transport.send(req.reply(reply, sender=self.rt.party.pid, stage=Stage.GRAM_RESULT, form=Form.AGGREGATE))

    def _on_release(self, step: Step) -> None:
        mech, call, keys, req = self._request(step, Stage.SUM_REQUEST)
        expect = self.expect.pop((step.tag, step.round), None)
        if expect is None:
            raise UnexpectedMessageError(f"{self.rt.party.pid} was asked to release {step.tag!r} round {step.round} "
                                         "before it judged it")
        released = release_checked_sum(keys.secret_of(call, self.rt.party.pid), req.payload, expect, mech.noise,
                                       length=int(step.info["length"]), tail=int(step.info["tail"]))
        self.rt.transport.send(req.reply(released, sender=self.rt.party.pid, stage=Stage.SUM_RESULT, form=Form.AGGREGATE))


__all__ = ["ACTION_JUDGE", "ACTION_RELEASE", "NodeCKKSRobust", "robust_sum_server"]
