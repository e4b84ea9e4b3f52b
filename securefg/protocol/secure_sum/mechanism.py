"""The ``secure_sum`` mechanism: SecAgg+ for ``aggregate`` and ``peer_sum``.

Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine Learning", CCS
2017 (https://eprint.iacr.org/2017/281), with the sparse random neighbour graph of Bell et al.
2020 (https://eprint.iacr.org/2020/704). This module only *drives* the parties in lockstep
through the stages; each side's logic is in ``client/`` and ``server/``, one module per stage.

**Who learns what.**

* ``aggregate``: the server is the aggregator. It sees public keys, share ciphertexts it
  cannot open (AEAD under client-to-client keys), masked inputs (uniform in the ring), and one
  kind of unmasking share per client; it learns ``sum_{u in U3} w_u x_u`` (and the weight
  total, which the exchange appends), the survivor set ``U3`` and who dropped when.
* ``peer_sum(target=i)``: client ``i`` is the aggregator and learns the same about its peers;
  the server is only a relay and sees public keys and end-to-end sealed bytes (it learns who
  took part and message sizes, not the sum). Peers learn nothing about each other's inputs.
* A client learns its neighbours' public keys and the survivor list.

Dropouts are simulated with ``call.dropouts[stage]`` (a client drops before answering that
stage) and ``call.transport.offline`` (a client is gone from the start).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from securefg.errors import InvalidInputError, UnexpectedMessageError
from securefg.federation.envelope import Form
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.secure_sum import server, threshold_bound
from securefg.protocol.secure_sum.client import AdvertiseKeys, ClientStage
from securefg.protocol.secure_sum.constants import NAME, ClientDropReason, Stage
from securefg.protocol.secure_sum.context import AggregatorContext, CallInfo, ClientContext, party_info
from securefg.protocol.secure_sum.harary import harary_graph
from securefg.protocol.secure_sum.relay_sum import forward_sum
from securefg.protocol.secure_sum.route import Route
from securefg.protocol.secure_sum.settings import DEFAULTS, Settings, validate
from securefg.protocol.shared_result import share_sum


@dataclass(frozen=True)
class SecureSumReport:
    """The aggregator's public record of one call (kept in its state under ``"reports"``)."""

    tag: str
    round: int
    aggregator: str
    degree: int
    threshold: int
    contributors: tuple[str, ...]
    drops: Mapping[str, ClientDropReason]
    error_bound: float
    """Worst-case absolute error per element of the returned sum (see ``quantize.py``)."""
    ring_bits: int = 64
    """Bits per element of the ring the call used (and of each packed masked input)."""


@register_mechanism
class SecureSum(Mechanism):
    """Masked secure sum with dropouts (SecAgg+), for ``aggregate`` and ``peer_sum``.

    Args:
        bits (int | str): Ring Z_{2^bits}: ``"auto"`` sizes it per call to the smallest ring that
            holds n summands of ``clip`` at ``resolution`` (2^64 when no resolution is given); an
            integer in 2..64 pins it. Masked inputs travel bit-packed, ``bits`` bits per element.
            (default: ``"auto"``)
        resolution (float, optional): Coarsest fixed-point step acceptable, in (0, 1]; a pinned
            ring that cannot give it is refused (:class:`~securefg.errors.RingTooSmallError`).
            (default: :obj:`None`)
        clip (float): Largest |value| encoded (after the exchange's weighting). (default: ``2**24``)
        on_clip (str): ``"error"`` or ``"saturate"`` beyond the clip. (default: ``"error"``)
        threshold (int | float, optional): Shares to reconstruct, as a count or a fraction of
            the degree. (default: from :func:`~securefg.protocol.secure_sum.harary.choose_parameters`)
        degree (int, optional): Neighbours per client ``k`` (even; ``>= n - 1`` means all).
            (default: from the helper)
        dropout_rate (float): Dropout fraction the helper plans for. (default: ``0.1``)
        adversarial_rate (float): Colluding fraction the helper plans for. (default: ``0.1``)
        signatures (bool): Run the Ed25519 consistency check. (default: :obj:`False`)
        prg (str): ``"aes128-ctr"``, ``"aes-ctr"`` (AES-256) or ``"chacha20"`` mask
            expansion. (default: ``"aes128-ctr"``)
        relay_sum (bool): ``peer_sum`` only: the relaying server adds the masked inputs and
            forwards one sum to the target (one vector down instead of n; the relay could then
            corrupt the sum undetected, see :mod:`~securefg.protocol.secure_sum.relay_sum`).
            (default: :obj:`False`)
        pinned_keys (str, optional): Malicious-server mode (needs ``signatures = true``):
            ``"run"`` (the run's own directory of client signing keys) or a directory file;
            key substitution and survivor-list equivocation are then refused
            (:mod:`~securefg.protocol.secure_sum.pinned`). (default: :obj:`None`)
        norm_bound (float, optional): Per-client L2 bound on what is summed; clients refuse
            inputs beyond it and the sum is checked (:mod:`~securefg.protocol.secure_sum.range_check`).
            (default: :obj:`None`)
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.AGGREGATE, ExchangeKind.PEER_SUM, ExchangeKind.SHARED_SUM})
    defaults = DEFAULTS
    protects = "each input: the receiver sees masked vectors and learns only the sum over survivors"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.settings = Settings.from_params(self.params)
        self.last_report: SecureSumReport | None = None

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        problems = super().validate_params(params)
        return problems + validate({k: v for k, v in params.items() if k in DEFAULTS})

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """A threshold an equivocating server can beat (:mod:`.threshold_bound`)."""
        return threshold_bound.voided({**DEFAULTS, **params})

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        agg = self._run(call, call.server, inputs)
        return SumOutcome(agg.total, agg.contributors)

    def run_peer_sum(self, call: ExchangeCall, target: str, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        if target in inputs or target == call.server:
            raise InvalidInputError(f"{call.tag!r}: the peer-sum target {target!r} must be a client outside the inputs")
        agg = self._run(call, target, inputs)
        return SumOutcome(agg.total, agg.contributors)

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The server learns the sum (as for ``aggregate``) and sends it to every client
        (``Form.AGGREGATE``); bind the tag to ``blind_sum`` to keep the server out of it."""
        agg = self._run(call, call.server, inputs)
        return share_sum(call, inputs, SumOutcome(agg.total, agg.contributors), form=Form.AGGREGATE)

    # ---------------------------------------------------------------------------------------
    def _run(self, call: ExchangeCall, aggregator: str, inputs: Mapping[str, torch.Tensor], *,
             blinds: Mapping[str, bytes] | None = None) -> server.Completed:
        """Drive one call; ``blinds`` (``blind_sum``) gives each client a seed to blind its input."""
        vectors = _check_inputs(call.tag, inputs)
        route = Route(call.transport, relay=call.server, aggregator=aggregator, round=call.round, tag=call.tag,
                      sum_at_relay=self.settings.relay_sum)
        info = CallInfo(call.transport.session, call.round, call.tag, self.settings, route)
        parties = sorted({*vectors, aggregator, call.server})
        try:
            return self._protocol(call, info, vectors, blinds or {})
        finally:
            for pid in parties:  # secrets of this call die with it, success or abort
                call.state_of(pid, NAME).get("calls", {}).pop((call.tag, call.round), None)
                route.drain(pid)

    def _protocol(self, call: ExchangeCall, info: CallInfo, vectors: dict[str, np.ndarray],
                  blinds: Mapping[str, bytes]) -> server.Completed:
        route, key = info.route, (call.tag, call.round)
        clients = tuple(sorted(vectors))
        degree, threshold = self.settings.graph(len(clients))
        agg_info, agg_identity = party_info(info, call.parties[route.aggregator].state, route.aggregator)
        ctx = AggregatorContext(
            pid=route.aggregator, info=agg_info, clients=clients,
            graph=harary_graph(clients, degree) if len(clients) > 1 else {c: frozenset() for c in clients},
            degree=degree, threshold=threshold, length=next(iter(vectors.values())).size,
            quantizer=self.settings.quantizer(len(clients)),
            e2e_sk=X25519PrivateKey.generate() if route.relayed else None,
            identity=agg_identity if route.relayed else None, blinded=bool(blinds),
        )
        call.state_of(route.aggregator, NAME).setdefault("calls", {})[key] = ctx
        stages: dict[str, ClientStage] = {}
        for pid in clients:
            own_info, identity = party_info(info, call.parties[pid].state, pid)  # its own copy of the directory
            stages[pid] = AdvertiseKeys(ClientContext(pid, own_info, vectors[pid], blind_seed=blinds.get(pid, b""),
                                                      identity=identity))
            call.state_of(pid, NAME).setdefault("calls", {})[key] = stages[pid]

        gone = {pid for pid in clients if pid in call.transport.offline}
        agg: server.ServerStage = server.begin(ctx, set(clients) - gone)
        for stage in Stage.ordered(signatures=self.settings.signatures):
            route.forward_down(stage)
            for pid in clients:
                if pid in gone or pid in call.drops_at(stage.value):
                    gone.add(pid)
                    continue
                msgs = route.client_inbox(pid, stage)
                if len(msgs) > 1:
                    raise UnexpectedMessageError(f"{pid} got {len(msgs)} {stage.value!r} messages, expected one")
                if msgs:  # the aggregator did not ask a client it dropped
                    stages[pid] = stages[pid].handle(msgs[0])
                    call.state_of(pid, NAME)["calls"][key] = stages[pid]
            if route.sum_at_relay and stage is Stage.MASKED_INPUT:  # the relay knows n, m and the stack
                forward_sum(route, clients=clients, bits=self.settings.ring_bits(len(clients)), length=ctx.length)
            else:
                route.forward_up(stage)
            agg = agg.handle(route.aggregator_inbox(stage))
        if not isinstance(agg, server.Completed):
            raise UnexpectedMessageError("the aggregator did not complete the round")
        report = SecureSumReport(
            call.tag, call.round, route.aggregator, degree, threshold, agg.contributors, dict(ctx.drops),
            ctx.quantizer.error_bound(len(agg.contributors)), ctx.quantizer.bits,
        )
        call.state_of(route.aggregator, NAME).setdefault("reports", {})[key] = report
        self.last_report = report
        return agg


def _check_inputs(tag: str, inputs: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Each input as a float64 numpy vector; all must be 1-D, finite and of one length."""
    if not inputs:
        raise InvalidInputError(f"{tag!r}: a secure sum needs inputs")
    out = {}
    for pid, vec in inputs.items():
        if not isinstance(vec, torch.Tensor) or vec.dim() != 1:
            raise InvalidInputError(f"{tag!r}: the input of {pid} must be a 1-D tensor")
        out[pid] = vec.detach().to("cpu", torch.float64).numpy()
    lengths = {v.size for v in out.values()}
    if len(lengths) > 1:
        raise InvalidInputError(f"{tag!r}: inputs have different lengths {sorted(lengths)}; every client must send the same shape")
    return out
