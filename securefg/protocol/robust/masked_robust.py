r"""``masked_robust``: multi-Krum judged on encrypted sketches, the kept updates summed by SecAgg+.

``ckks_robust`` encrypts every update under CKKS so that nobody reads one; that costs a CKKS sum
of the whole model each round (30x a masked sum at FedAvg's 184k values). The rule itself only
needs the updates' geometry, which the count sketches carry in one ciphertext per client. So here:

1. Client ``a`` uploads only ``Enc(y_a)``, ``Enc(s_a)`` and ``Enc(t_a)`` of ``ckks_robust``
   (its count sketch split into a power of two and a unit part, its count tail), and keeps its
   update.
2. The server computes the pseudonymous encrypted Gram request; the key holder decrypts only the
   inner products, magnitudes and counts, runs multi-Krum and returns a 0/1 coefficient per
   pseudonym (:func:`~securefg.protocol.robust.ckks_robust.judge`, unchanged).
3. The server runs ``secure_sum`` (SecAgg+, its own parameters) over the **kept** clients only: a
   dropped client is never asked for its masked input, so its update never leaves it. A kept
   client that drops out during the sum is handled by SecAgg+ as any dropout.
4. The server asks the key holder for ``Enc(sum of the sketches of the clients in the sum)`` and
   their counts; the key holder checks the request against the inner products it judged
   (``||sum||^2 = c^T G c``, a subset of its kept set) and releases the sketch sum and counts.
5. The server checks that the sketch of the unmasked sum equals that sketch sum (within CKKS and
   quantization error) and the counts: a kept client that masked another vector than the one it
   sketched makes the round abort (:class:`~securefg.errors.ImplausibleSumError`) and nothing is
   applied.

**Who learns what** (semi-honest server and key holder, not colluding): the *server* learns the
kept clients' sum (as ``secure_sum`` over them) and who was dropped; the sketch sum it receives is
a function of that sum. The *key holder* learns the pseudonymous sketches' Gram matrix and counts,
as under ``ckks_robust``, and nothing of any sum but its sketch. A dropped client is, to SecAgg+,
a client that was never asked. The rule keeps or drops (``krum``: multi-Krum, ``trim``;
``norm_filter``: drop an input above ``norm_factor`` times the median norm): a norm bound that
scales would need a client to scale its own input by a coefficient the server tells it, not
implemented. :mod:`.blind_robust` runs the same judge for a sum only the clients may read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from securefg.errors import CodecError, ImplausibleSumError, InvalidInputError
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.ckks_mechanism import CKKS_KEY_DEFAULTS, ckks_key_problems
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.presets import CKKSPreset, resolve_preset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.robust import ckks_robust as cr
from securefg.protocol.robust.ckks_robust import (
    KEYHOLDER,
    Expectation,
    Upload,
    sketch_of,
    sketch_width,
    sum_factor,
)
from securefg.protocol.robust.gram_rules import selecting_rule_problems, tolerated, trim_problems
from securefg.protocol.secure_sum.mechanism import SecureSum
from securefg.protocol.secure_sum.settings import DEFAULTS as SECURE_SUM_DEFAULTS
from securefg.protocol.shared_result import share_sum

NAME = "masked_robust"


class Stage:
    """Envelope stages of one call besides the key setup and the inner ``secure_sum``'s; the
    key holder's requests reuse ``ckks_robust``'s stage names (the same messages)."""

    SKETCH = "masked_robust/sketch"
    GRAM_REQUEST = cr.Stage.GRAM_REQUEST
    GRAM_RESULT = cr.Stage.GRAM_RESULT
    SUM_REQUEST = cr.Stage.SUM_REQUEST
    SUM_RESULT = cr.Stage.SUM_RESULT


# ====================================================================== the checks
def sketch_sum_request(uploads: Sequence[Upload], coefficients: torch.Tensor, *, weighted: bool) -> bytes:
    """Server side: the coefficients of the clients that ended up in the masked sum (0 for the
    others), ``Enc(m sum_a c_a s_a y_a)`` and their tails' sum, packed."""
    parts = unpack_blobs(cr.selected_sum(uploads, coefficients, weighted=weighted, with_values=False), max_count=2)
    return pack_blobs([encode_tensor(coefficients.to(torch.float64)), *parts])


def release_sketch_sum(secret: SecretContext, payload: bytes, judged: Expectation, *, width: int, tail: int) -> bytes:
    """Key holder side: decrypt the sketch sum the server asks for, check it against the inner
    products it judged, release ``sketch || counts``.

    Raises:
        ProtocolError: The request keeps an input the rule dropped.
        CodecError: Another number of parts or lengths than announced.
        ImplausibleSumError: The sketch sum's squared norm is not ``c^T G c`` or its counts are not
            the kept inputs' (the server altered the request).
    """
    blobs = unpack_blobs(payload, max_count=3)
    if len(blobs) != (3 if tail else 2):
        raise CodecError(f"the robust sketch sum holds {len(blobs)} part(s), expected {3 if tail else 2}")
    n = judged.coefficients.numel()
    expect = judged.restricted(decode_tensor(blobs[0], spec=TensorSpec({"x": (torch.float64, (n,))})))
    sketch = secret.decrypt(secret.load(blobs[1], expected_length=width))
    counts = secret.decrypt(secret.load(blobs[2], expected_length=tail)) if tail else torch.zeros(0, dtype=torch.float64)
    cr.check_sketch_sum(sketch, counts, expect)
    return encode_tensor(torch.cat([sketch, counts]))


def check_masked_sum(total: torch.Tensor, released: torch.Tensor, *, tail: int, width: int, terms: float,
                     quantization_error: float) -> None:
    """Server side: the unmasked sum (``values || tail``, already scaled as the sketches were) must
    have the released sketch sum as its sketch and the released counts as its tail.

    Raises:
        ImplausibleSumError: Naming which part differs.
    """
    values = total[: total.numel() - tail].to(torch.float64)
    sketch, counts = released[:width], released[width:]
    mine = sketch_of(values, width)
    scale = max(float(sketch.abs().max()), float(mine.abs().max())) if width else 0.0
    bound = (cr.SKETCH_CHECK_RTOL * scale + cr.ABS_NOISE * max(terms, 1.0)
             + quantization_error * cr.largest_bucket(values.numel(), width))
    if float((sketch - mine).abs().max()) > bound:
        raise ImplausibleSumError("the sketch of the masked robust sum is not the sum of the kept clients' sketches: a "
                                  "kept client masked another vector than the one it sketched")
    if tail and not torch.allclose(total[total.numel() - tail:].to(torch.float64), counts, rtol=cr.SUM_CHECK_RTOL,
                                   atol=1e-3 + quantization_error):
        raise ImplausibleSumError("the masked robust sum's counts are not those the kept clients sketched")


@dataclass(frozen=True)
class ServerSide:
    """What the server keeps between the judge and the check of one call."""

    order: tuple[str, ...]
    uploads: tuple[Upload, ...]
    coefficients: torch.Tensor

    @property
    def kept(self) -> list[str]:
        """The clients the rule kept, in pseudonym order."""
        return [p for k, p in enumerate(self.order) if float(self.coefficients[k]) > 0]

    def in_sum(self, contributors: Sequence[str]) -> torch.Tensor:
        """The judged coefficients restricted to the clients the masked sum holds.

        Raises:
            ImplausibleSumError: The sum holds a client the rule dropped.
        """
        c = torch.zeros_like(self.coefficients)
        index = {p: k for k, p in enumerate(self.order)}
        for p in contributors:
            k = index.get(p)
            if k is None or float(self.coefficients[k]) <= 0:
                raise ImplausibleSumError(f"the masked robust sum holds {p!r}, which the rule did not keep")
            c[k] = self.coefficients[k]
        return c


@dataclass(frozen=True)
class Judged:
    """One judged call (in process): the server's side, the uploads, the key holder and what it
    expects the released sketch sum to be."""

    side: ServerSide
    uploads: tuple[Upload, ...]
    holder: str
    secret: SecretContext
    expect: Expectation

    @property
    def kept(self) -> list[str]:
        return self.side.kept


def finish(side: ServerSide, total: torch.Tensor, contributors: Sequence[str], *,
           ask: Callable[[torch.Tensor], bytes], length: int, tail: int, slots: int, weighted: bool,
           quantization_error: float) -> torch.Tensor:
    """Server side, after the masked sum: ask the key holder for the sketch sum of the clients in
    it (``ask(coefficients) -> released bytes``), check, return the sum scaled as the exchange
    expects (``n / kept`` times the values of an unweighted sum, as ``ckks_robust``)."""
    coeffs = side.in_sum(contributors)
    width = sketch_width(length - tail, slots)
    released = decode_tensor(ask(coeffs), spec=TensorSpec({"x": (torch.float64, (width + tail,))}))
    m = sum_factor(coeffs, bool(tail and weighted))
    scaled = total.to(torch.float64).clone()
    scaled[: length - tail] *= m
    terms = float(coeffs.sum()) * m
    check_masked_sum(scaled, released, tail=tail, width=width, terms=terms,
                     quantization_error=quantization_error * m)
    return scaled


def unjudged(state: dict[str, Any], tag: str, round: int, senders: Sequence[str], total: torch.Tensor,
             contributors: Sequence[str], *, tail: int, weighted: bool) -> SumOutcome:
    """The masked sum of a call the rule could not judge (too few clients): every client kept, an
    unweighted sum scaled by ``n / contributors`` when some dropped out, as a judged one is."""
    out = total.to(torch.float64).clone()
    if not weighted and contributors:
        out[: out.numel() - tail] *= len(senders) / len(contributors)
    cr.record_release(state, tag, round, {p: (1.0 if p in contributors else 0.0) for p in senders})
    return SumOutcome(out, tuple(sorted(contributors)))


# ====================================================================== the mechanism
@register_mechanism
class MaskedRobust(Mechanism):
    """Multi-Krum at the key holder on CKKS-encrypted sketches; the kept updates summed by SecAgg+.

    Args:
        preset (str): CKKS preset of the sketches (needs two levels). (default: ``"default"``)
        trim (float): Share of inputs multi-Krum drops (at most ``(n - 3) // 2``: Krum's ``n >= 2f + 3``). (default: ``0.2``)
        inner_params (dict): ``secure_sum`` parameters of the masked sum. (default: its defaults)

    Raises:
        ImplausibleSumError: The unmasked sum is not what the kept clients sketched, or the key
            holder's check of the sketch request fails.
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.AGGREGATE, ExchangeKind.SHARED_SUM})
    returns_sum = False
    defaults: ClassVar[Mapping[str, Any]] = {**CKKS_KEY_DEFAULTS, "rule": "krum", "trim": 0.2, "norm_factor": 0.0,
                                             "inner_params": {}}
    protects = ("each input: the server sees CKKS-encrypted sketches and, of the clients the rule kept, masked "
                "vectors; it learns their sum and who was dropped. The key holder sees the inner products of the "
                "pseudonymous sketches")
    needs_parties: ClassVar[tuple[str, ...]] = (KEYHOLDER,)
    #: Form of the key holder's coefficients to the server: an aggregate's by-product here (the
    #: server reads the kept sum anyway); bookkeeping under ``blind_robust``, where it reads no sum.
    coefficient_form: ClassVar[Form] = Form.AGGREGATE
    #: The masked sum over the kept clients (``blind_robust``: ``blind_sum``).
    inner_class: ClassVar[type[SecureSum]] = SecureSum

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.preset: CKKSPreset = resolve_preset(self.params)
        self.keys = CKKSKeySetup(self.preset, key_holder=self.params["key_holder"])
        self.inner = self.inner_class(**dict(self.params["inner_params"]))

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        problems = super().validate_params(params)
        p = {**cls.defaults, **params}
        problems += ckks_key_problems(p)
        problems += selecting_rule_problems(p["rule"], p["norm_factor"])
        problems += trim_problems(p["trim"])
        inner = p["inner_params"]
        if not isinstance(inner, Mapping):
            problems.append(f"inner_params must be a table of secure_sum parameters, got {inner!r}")
        else:
            unknown = sorted(set(inner) - set(SECURE_SUM_DEFAULTS))
            if unknown:
                problems.append(f"inner_params {unknown} are not secure_sum parameters")
            problems += [f"inner_params: {x}" for x in SecureSum.validate_params(dict(inner))]
        return problems

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """The inner masked sum's (a threshold an equivocating server can beat)."""
        inner = params.get("inner_params", {})
        return SecureSum.voided_guarantees(dict(inner) if isinstance(inner, Mapping) else {})

    def judges(self, n: int) -> bool:
        """Whether the rule may drop anyone among ``n`` uploaders (Krum's ``n >= 2f + 3``; the norm
        filter needs a median of at least three): otherwise the call is the inner masked sum alone
        (no sketches, no key holder: they would cost bytes and time to keep everyone)."""
        if self.params["rule"] == "norm_filter":
            return n >= 3
        return tolerated(n, float(self.params["trim"])) > 0

    def as_masked(self, vector: torch.Tensor) -> torch.Tensor:
        """A client's input as its masked sum will carry it: saturated at the clip when the inner
        sum saturates (``on_clip = "saturate"``), so the sketch it uploads is of that vector and
        the sums' check holds; unchanged otherwise (the sum refuses a value beyond the clip)."""
        settings = self.inner.settings
        if settings.on_clip == "saturate":
            return vector.clamp(-settings.clip, settings.clip)
        return vector

    def rule_params(self) -> dict[str, Any]:
        return {"rule": str(self.params["rule"]), "trim": float(self.params["trim"]),
                "norm_factor": float(self.params["norm_factor"])}

    def quantization_error(self, contributors: int) -> float:
        """Worst absolute error per element of the inner masked sum over ``contributors``."""
        return float(self.inner.settings.quantizer(contributors).error_bound(contributors))

    def judge_call(self, call: ExchangeCall, senders: Sequence[str], inputs: Mapping[str, torch.Tensor], *,
                   length: int, tail: int, weighted: bool) -> Judged:
        """Steps 1-2: each sender's encrypted sketch to the server, the pseudonymous Gram request
        to the key holder, its coefficients back (each party's part acting as that party)."""
        holder = self.keys.ensure(call, encryptors=senders, decryptors=(), galois=True)
        server_ctx = self.keys.context_of(call, call.server)
        parsed: dict[str, Upload] = {}
        for pid in senders:
            payload = cr.encrypt_upload(self.keys.context_of(call, pid), inputs[pid].reshape(-1), tail=tail,
                                        preset=self.preset, pid=pid, with_values=False)
            call.transport.send(Envelope(pid, (call.server,), call.round, call.tag, payload, stage=Stage.SKETCH,
                                         form=Form.CIPHERTEXT))
            (env,) = call.transport.receive_from(call.server, [pid], tag=call.tag, round=call.round,
                                                 stage=Stage.SKETCH).values()
            parsed[pid] = cr.parse_upload(server_ctx, env.payload, length=length, tail=tail, with_values=False)
        order, uploads = cr.pseudonym_order(parsed)
        call.transport.send(Envelope(call.server, (holder,), call.round, call.tag, cr.gram_request(uploads),
                                     stage=Stage.GRAM_REQUEST, form=Form.CIPHERTEXT))
        (req,) = call.transport.receive_from(holder, [call.server], tag=call.tag, round=call.round,
                                             stage=Stage.GRAM_REQUEST).values()
        secret = self.keys.secret_of(call, holder)
        reply, expect = cr.judge(secret, req.payload, n=len(order), tail=tail, weighted=weighted, **self.rule_params())
        call.transport.send(req.reply(reply, sender=holder, stage=Stage.GRAM_RESULT, form=self.coefficient_form))
        (res,) = call.transport.receive_from(call.server, [holder], tag=call.tag, round=call.round,
                                             stage=Stage.GRAM_RESULT).values()
        side = ServerSide(order, uploads, cr.read_coefficients(res.payload, len(order)))
        return Judged(side, uploads, holder, secret, expect)

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        """The five steps above, each party's part acting as that party."""
        self.preset.require_levels(2, what="masked_robust (ciphertext product, then a sum)")
        senders = sorted(p for p in inputs if p not in call.transport.offline)
        if not senders:
            raise InvalidInputError(f"no client uploaded anything for {call.tag!r}")
        length, tail = int(next(iter(inputs.values())).numel()), int(call.count_tail)
        weighted = bool(tail and call.weighted)
        inputs = {p: self.as_masked(inputs[p]) for p in senders}
        if not self.judges(len(senders)):
            inner = self.inner.run_aggregate(call, {p: inputs[p] for p in senders})
            return unjudged(call.state_of(call.server, NAME), call.tag, call.round, senders, inner.total,
                            inner.contributors, tail=tail, weighted=weighted)
        judged = self.judge_call(call, senders, inputs, length=length, tail=tail, weighted=weighted)
        side, holder, secret, uploads = judged.side, judged.holder, judged.secret, judged.uploads
        order = side.order

        # --- the kept clients' masked sum
        inner = self.inner.run_aggregate(call, {p: inputs[p] for p in side.kept})

        def ask(coeffs: torch.Tensor) -> bytes:
            call.transport.send(Envelope(call.server, (holder,), call.round, call.tag,
                                         sketch_sum_request(uploads, coeffs, weighted=weighted),
                                         stage=Stage.SUM_REQUEST, form=Form.CIPHERTEXT))
            (r,) = call.transport.receive_from(holder, [call.server], tag=call.tag, round=call.round,
                                               stage=Stage.SUM_REQUEST).values()
            out = release_sketch_sum(secret, r.payload, judged.expect, width=sketch_width(length - tail, self.preset.slots),
                                     tail=tail)
            call.transport.send(r.reply(out, sender=holder, stage=Stage.SUM_RESULT, form=Form.AGGREGATE))
            (back,) = call.transport.receive_from(call.server, [holder], tag=call.tag, round=call.round,
                                                  stage=Stage.SUM_RESULT).values()
            return back.payload

        total = finish(side, inner.total, inner.contributors, ask=ask, length=length, tail=tail,
                       slots=self.preset.slots, weighted=weighted, quantization_error=self.quantization_error(len(inner.contributors)))
        cr.record_release(call.state_of(call.server, NAME), call.tag, call.round,
                          {p: (float(side.coefficients[k]) if p in inner.contributors else 0.0)
                           for k, p in enumerate(order)})
        return SumOutcome(total, tuple(sorted(inner.contributors)))

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The robust aggregate, sent on to every client (``Form.AGGREGATE``): the server reads it."""
        return share_sum(call, inputs, self.run_aggregate(call, inputs), form=Form.AGGREGATE)


__all__ = ["NAME", "Judged", "MaskedRobust", "ServerSide", "Stage", "check_masked_sum", "finish",
           "release_sketch_sum", "sketch_sum_request", "unjudged"]
