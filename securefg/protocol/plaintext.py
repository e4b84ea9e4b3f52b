"""The plaintext mechanism: every exchange carried in the clear (but still authenticated).

It is the baseline for speed and for measuring leakage: the server (or the receiving client)
sees every individual input, and the transcript records it as ``plaintext``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import torch

from securefg.errors import ProtocolError
from securefg.federation.codec import TensorSpec, decode_tensor, decode_tensors, encode_tensor, encode_tensors
from securefg.federation.envelope import Envelope, Form
from securefg.federation.party import Party
from securefg.protocol.mechanism import (
    ExchangeCall,
    ExchangeKind,
    Mechanism,
    SumOutcome,
    register_mechanism,
)
from securefg.protocol.shared_result import share_sum


def _vector_spec(length: int) -> TensorSpec:
    return TensorSpec({"x": (torch.float64, (length,))})


def upload_vectors(
    call: ExchangeCall, inputs: Mapping[str, torch.Tensor], receiver: str, stage: str
) -> dict[str, torch.Tensor]:
    """Each sender uploads its vector in the clear; returns what ``receiver`` decoded."""
    lengths = {v.numel() for v in inputs.values()}
    if len(lengths) > 1:
        raise ValueError(f"inputs to {call.tag!r} have different lengths {sorted(lengths)}")
    for pid, vec in inputs.items():
        if pid in call.transport.offline:
            continue
        call.transport.send(
            Envelope(pid, (receiver,), call.round, call.tag, encode_tensor(vec), stage=stage)
        )
    got = call.transport.receive_from(
        receiver, inputs.keys(), tag=call.tag, round=call.round, stage=stage
    )
    spec = _vector_spec(lengths.pop()) if lengths else None
    return {pid: decode_tensor(env.payload, spec=spec) for pid, env in got.items()}


@register_mechanism
class Plaintext(Mechanism):
    """Every exchange in the clear. Protects nothing beyond channel authentication."""

    name = "plaintext"
    exchanges = frozenset(ExchangeKind)
    defaults = {"shuffle_seed": None}
    protects = "nothing: the receiver sees every individual input"
    reveals_individual_inputs = True

    def run_broadcast(self, call: ExchangeCall, payload: bytes, receivers: Sequence[str]) -> dict[str, bytes]:
        call.transport.send(Envelope(call.server, tuple(receivers), call.round, call.tag, payload))
        out = {}
        for pid in receivers:
            if pid in call.transport.offline:
                continue
            (env,) = call.transport.receive(pid, tag=call.tag, round=call.round)
            out[pid] = env.payload
        return out

    def run_send(self, call: ExchangeCall, payload: bytes, sender: str, receiver: str) -> bytes:
        call.transport.send(Envelope(sender, (receiver,), call.round, call.tag, payload))
        (env,) = call.transport.receive(receiver, tag=call.tag, round=call.round)
        return env.payload

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        return self.combine_uploads(upload_vectors(call, inputs, call.server, "plaintext/upload"))

    def combine_uploads(self, uploads: Mapping[str, torch.Tensor]) -> SumOutcome:
        """The receiver's result from the clear uploads (a party program's server half)."""
        order = sorted(uploads)
        return SumOutcome(torch.stack([uploads[p] for p in order]).sum(0), tuple(order))

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The server sums the clear uploads and sends the sum, in the clear, to every client."""
        return share_sum(call, inputs, self.run_aggregate(call, inputs), form=Form.PLAINTEXT)

    def run_peer_sum(self, call: ExchangeCall, target: str, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        got = upload_vectors(call, inputs, target, "plaintext/peer")
        order = sorted(got)
        total = torch.stack([got[p] for p in order]).sum(0)
        return SumOutcome(total, tuple(order))

    def run_personalized_aggregate(
        self,
        call: ExchangeCall,
        inputs: Mapping[str, torch.Tensor],
        coefficients: Mapping[str, Mapping[str, float]],
    ) -> dict[str, torch.Tensor]:
        got = upload_vectors(call, inputs, call.server, "plaintext/upload")
        out: dict[str, torch.Tensor] = {}
        for i, row in coefficients.items():
            mix = sum(float(a) * got[j] for j, a in row.items() if j in got)
            assert isinstance(mix, torch.Tensor)
            call.transport.send(
                Envelope(call.server, (i,), call.round, call.tag, encode_tensor(mix), stage="plaintext/result")
            )
            (env,) = call.transport.receive(i, tag=call.tag, round=call.round, stage="plaintext/result")
            out[i] = decode_tensor(env.payload, spec=_vector_spec(mix.numel()))
        return out

    def run_similarity(
        self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor], metric: str
    ) -> dict[tuple[str, str], float]:
        got = upload_vectors(call, inputs, call.server, "plaintext/upload")
        return pairwise_similarity(got, metric)

    def run_collect(self, call: ExchangeCall, inputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """Each client uploads in the clear; its pseudonym is its own id (nothing is hidden)."""
        senders = [p for p in inputs if p not in call.transport.offline]
        for pid in senders:
            call.transport.send(
                Envelope(pid, (call.server,), call.round, call.tag, inputs[pid], stage="plaintext/collect")
            )
        got = call.transport.receive_from(call.server, senders, tag=call.tag, round=call.round, stage="plaintext/collect")
        return {pid: env.payload for pid, env in got.items()}

    def run_reply(self, call: ExchangeCall, outputs: Mapping[str, bytes]) -> dict[str, bytes]:
        """The server sends each output to the client whose id is the pseudonym."""
        out: dict[str, bytes] = {}
        for pid, payload in outputs.items():
            if pid not in call.parties or pid == call.server:
                raise ProtocolError(f"{call.tag!r}: reply addressed to {pid!r}, which is not a client")
            call.transport.send(Envelope(call.server, (pid,), call.round, call.tag, payload, stage="plaintext/reply"))
            if pid in call.transport.offline:
                continue
            (env,) = call.transport.receive(pid, tag=call.tag, round=call.round, stage="plaintext/reply")
            out[pid] = env.payload
        return out

    @staticmethod
    def plan_mix(server: Party, tag: str, plan: Mapping[str, Mapping[str, float]]) -> None:
        """Acting as the server: forward linear combinations in the next relay of ``tag``.

        Same contract as ``CKKSRelay.plan_mix`` (items are tensors from ``encode_tensors``;
        output ``o`` is ``sum_s plan[o][s] * item_s`` and counts as ``o``'s own item), computed
        in the clear: the plaintext baseline of CeFGC+'s pair averaging. The plan is used once.
        """
        server.state.setdefault("mech/plaintext", {}).setdefault("mix", {})[tag] = {
            o: {s: float(a) for s, a in row.items()} for o, row in plan.items()
        }

    def run_relay(
        self, call: ExchangeCall, items: Mapping[str, bytes], *, exclude_self: bool, shuffle: bool
    ) -> dict[str, list[bytes]]:
        senders = [p for p in items if p not in call.transport.offline]
        for pid in senders:
            call.transport.send(
                Envelope(pid, (call.server,), call.round, call.tag, items[pid], stage="relay/upload")
            )
        got = call.transport.receive_from(
            call.server, senders, tag=call.tag, round=call.round, stage="relay/upload"
        )
        rng = random.Random(self.params["shuffle_seed"])
        outputs = {s: env.payload for s, env in got.items()}
        plan = call.state_of(call.server, self.name).get("mix", {}).pop(call.tag, None)
        if plan is not None:
            outputs = _mix(plan, outputs)
        out: dict[str, list[bytes]] = {}
        for receiver in senders:
            bundle = [outputs[s] for s in sorted(outputs) if not (exclude_self and s == receiver)]
            if shuffle:
                rng.shuffle(bundle)
            for blob in bundle:
                call.transport.send(
                    Envelope(call.server, (receiver,), call.round, call.tag, blob, stage="relay/forward")
                )
            envs = call.transport.receive(receiver, tag=call.tag, round=call.round, stage="relay/forward")
            out[receiver] = [e.payload for e in envs]
        return out


def _mix(plan: Mapping[str, Mapping[str, float]], items: Mapping[str, bytes]) -> dict[str, bytes]:
    """Acting as the server: decode tensor items and combine them field by field."""
    decoded = {s: decode_tensors(b) for s, b in items.items()}
    out: dict[str, bytes] = {}
    for o, row in plan.items():
        terms = [(decoded[s], float(a)) for s, a in sorted(row.items()) if s in decoded and a != 0.0]
        if not terms:
            raise ProtocolError(f"mix plan output {o!r} combines no online sender")
        first = terms[0][0]
        out[o] = encode_tensors({
            k: sum((t[k].double() * a for t, a in terms), torch.zeros(first[k].shape, dtype=torch.float64)).to(first[k].dtype)
            for k in first
        })
    return out


def pairwise_similarity(vectors: Mapping[str, torch.Tensor], metric: str) -> dict[tuple[str, str], float]:
    """All ordered pairs' similarity; ``metric`` is ``"cosine"`` or ``"dot"``."""
    if metric not in ("cosine", "dot"):
        raise ValueError(f"unknown similarity metric {metric!r}; choices: ['cosine', 'dot']")
    out: dict[tuple[str, str], float] = {}
    for a, va in vectors.items():
        for b, vb in vectors.items():
            dot = float(va @ vb)
            if metric == "cosine":
                denom = float(va.norm() * vb.norm())
                dot = dot / denom if denom > 0 else 0.0
            out[(a, b)] = dot
    return out
