r"""``ckks_robust``: a robust update aggregate whose rule runs at the key holder, on inner products only.

``subgroup_robust`` shows the server one sum per subgroup, which a curious server reads (label
inference on 2-client sums). Here nobody but the owner ever sees an update:

1. Keys as ``ckks`` (the server gets Galois keys for inner products). The key holder should be a
   ``keyholder`` party: a stack with this mechanism adds one to the run.
2. Client ``a`` uploads ``Enc(v_a / s)`` and, apart, ``Enc(t_a)``: its weighted update ``v_a``
   divided by the public ``scale`` ``s`` (so that inner products fit CKKS's integer headroom) and
   its count tail ``t_a`` (side counts, then its weight ``w_a``). The server learns sizes only.
3. The server draws a secret permutation of the uploaders (pseudonyms), computes every pair's
   encrypted inner product ``Enc(<v_a, v_b> / s^2)`` (:meth:`EncryptedVector.dot`) in pseudonym
   order and sends them with the pseudonymous tails to the key holder.
4. The key holder decrypts the Gram matrix and the tails, divides the Gram by ``w_a w_b`` (the
   geometry of the unweighted updates), runs the rule (:mod:`.gram_rules`: multi-Krum and/or a
   norm bound at ``norm_factor`` times the median norm) and returns one coefficient per
   pseudonym (0: dropped). It keeps what the selected sum must look like.
5. The server maps the coefficients back to clients, computes ``Enc(sum_a c_a s v_a / s)`` and
   ``Enc(sum_{c_a > 0} t_a)`` (no rescale: :meth:`EncryptedVector.linear_combination`) and sends
   them to the key holder.
6. The key holder decrypts, **checks** that the sum's squared norm equals ``c^T G c`` and its
   tail the kept tails' sum (an input that overflowed CKKS, or a server that sent another
   ciphertext, fails: :class:`~securefg.errors.ImplausibleSumError`), floods and releases it.

**Who learns what** (semi-honest server and key holder, not colluding): the *server* learns the
robust sum (the exchange's output, with the kept tails' sum) and the coefficient of each client,
i.e. which clients the rule dropped and, with a norm bound, each clipped client's norm relative to
the bound. The *key holder* learns the Gram matrix of the pseudonymous updates (norms, pairwise
distances and angles, not the updates), their count tails (sample counts) and the released sum,
but not which client is which pseudonym. *Clients* learn nothing new. Not protected: a server
colluding with the key holder decrypts every upload; a malicious key holder can return any
coefficients (it is trusted for the rule, as a ``ckks`` key holder is for the sum).

The result is ``s * sum_a c_a v_a / s`` with the kept tails summed, so the exchange's division by
the weight total yields the mean of the kept (and bounded) updates (``returns_sum = False``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from securefg.errors import (
    CodecError,
    ImplausibleSumError,
    InvalidInputError,
    OverflowRiskError,
    ProtocolError,
)
from securefg.federation.codec import TensorSpec, decode_tensor, encode_tensor
from securefg.federation.envelope import Envelope, Form
from securefg.protocol.ckks.ckks_mechanism import CKKS, CKKS_KEY_DEFAULTS, ckks_key_problems
from securefg.protocol.ckks.encrypted_vector import EncryptedVector
from securefg.protocol.ckks.key_setup import CKKSKeySetup
from securefg.protocol.ckks.output_noise import OutputNoise
from securefg.protocol.ckks.presets import CKKSPreset, resolve_preset
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.shuffle import secure_permutation
from securefg.protocol.robust.gram_rules import GRAM_RULES, gram_coefficients

NAME = "ckks_robust"
#: The helper party a stack with this mechanism needs (the key holder, apart from the clients).
KEYHOLDER = "keyholder"
#: Relative tolerance of the key holder's check of the released sum against ``c^T G c``.
SUM_CHECK_RTOL = 1e-3


class Stage:
    """Envelope stages of one call (besides the ``ckks/keys/*`` key setup)."""

    UPLOAD = "ckks_robust/upload"
    GRAM_REQUEST = "ckks_robust/gram/request"
    GRAM_RESULT = "ckks_robust/gram/result"
    SUM_REQUEST = "ckks_robust/sum/request"
    SUM_RESULT = "ckks_robust/sum/result"


@dataclass(frozen=True)
class JudgedRelease:
    """What the server learned from one call besides the sum: each uploader's coefficient."""

    tag: str
    round: int
    coefficients: Mapping[str, float]

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(sorted(p for p, c in self.coefficients.items() if c > 0))


@dataclass(frozen=True)
class Expectation:
    """What the key holder keeps between its two steps: the released sum must match it."""

    coefficients: torch.Tensor
    gram: torch.Tensor
    tail: torch.Tensor
    scale: float

    @property
    def squared_norm(self) -> float:
        return float(self.coefficients @ self.gram @ self.coefficients)


# ====================================================================== client side
def encrypt_upload(ctx: Any, vector: torch.Tensor, *, tail: int, scale: float, preset: CKKSPreset, pid: str) -> bytes:
    """Client ``pid``'s upload: ``Enc(values / scale)`` and, if ``tail``, ``Enc(counts)``.

    Raises:
        OverflowRiskError: ``||values / scale||^2`` exceeds what an inner product decrypts
            correctly at the last level (raise the stack's ``scale``).
    """
    values, counts = vector[: vector.numel() - tail], vector[vector.numel() - tail :]
    u = values.to(torch.float64) / scale
    bound = 2.0 ** (preset.headroom_bits - 2)
    sq = float(u @ u)
    if not sq <= bound:
        need = math.sqrt(float(values.double() @ values.double()) / bound)
        raise OverflowRiskError(f"{pid}: squared norm {sq:.3g} of its update / scale exceeds {bound:.3g}, the largest "
                                f"inner product CKKS preset {preset.name!r} decrypts; set the ckks_robust scale to at "
                                f"least {need:.3g} (now {scale:g})")
    blobs = [ctx.encrypt(u).to_bytes()]
    if tail:
        blobs.append(ctx.encrypt(counts.to(torch.float64)).to_bytes())
    return pack_blobs(blobs)


def parse_upload(ctx: Any, payload: bytes, *, length: int, tail: int) -> tuple[EncryptedVector, EncryptedVector | None]:
    """Server side: the two ciphertexts of one upload, with their lengths checked.

    Raises:
        CodecError: Another number of parts or lengths than announced.
    """
    blobs = unpack_blobs(payload, max_count=2)
    if len(blobs) != (2 if tail else 1):
        raise CodecError(f"a ckks_robust upload holds {len(blobs)} part(s), expected {2 if tail else 1}")
    values = ctx.load(blobs[0], expected_length=length - tail)
    return values, (ctx.load(blobs[1], expected_length=tail) if tail else None)


# ====================================================================== server side
def gram_request(values: Sequence[EncryptedVector], tails: Sequence[EncryptedVector | None]) -> bytes:
    """Every pair's encrypted inner product (upper triangle, row by row, in pseudonym order),
    then each pseudonym's tail."""
    n = len(values)
    blobs = [values[i].dot(values[j]).to_bytes() for i in range(n) for j in range(i, n)]
    blobs += [t.to_bytes() for t in tails if t is not None]
    return pack_blobs(blobs)


def read_coefficients(payload: bytes, n: int) -> torch.Tensor:
    """Server side: the key holder's ``n`` coefficients, checked.

    Raises:
        ProtocolError: Not ``n`` finite values in ``[0, 1]``, or none above 0.
    """
    coeffs = decode_tensor(payload, spec=TensorSpec({"x": (torch.float64, (n,))}))
    if not bool(torch.isfinite(coeffs).all()) or bool((coeffs < 0).any()) or bool((coeffs > 1).any()):
        raise ProtocolError(f"the key holder's robust coefficients must be {n} values in [0, 1]")
    if not bool((coeffs > 0).any()):
        raise ProtocolError("the key holder's robust rule kept no input")
    return coeffs


def selected_sum(values: Sequence[EncryptedVector], tails: Sequence[EncryptedVector | None],
                 coefficients: torch.Tensor, scale: float) -> bytes:
    """``Enc(sum_a c_a s u_a)`` and ``Enc(sum over kept of t_a)`` (no rescale), packed."""
    kept = [i for i in range(len(values)) if float(coefficients[i]) > 0]
    blobs = [EncryptedVector.linear_combination([(values[i], float(coefficients[i]) * scale) for i in kept]).to_bytes()]
    if tails and tails[0] is not None:
        blobs.append(EncryptedVector.linear_combination([(tails[i], 1.0) for i in kept]).to_bytes())  # type: ignore[misc]
    return pack_blobs(blobs)


# ====================================================================== key-holder side
def judge(secret: SecretContext, payload: bytes, *, n: int, tail: int, weighted: bool, rule: str, trim: float,
          norm_factor: float, scale: float) -> tuple[bytes, Expectation]:
    """Decrypt the Gram matrix and tails, run the rule; return the coefficients and what to check.

    Raises:
        CodecError: Not ``n (n + 1) / 2`` products (and ``n`` tails).
        InvalidInputError: A Gram matrix no real vectors have (:func:`.gram_rules.check_gram`).
    """
    pairs = n * (n + 1) // 2
    blobs = unpack_blobs(payload, max_count=pairs + n)
    if len(blobs) != pairs + (n if tail else 0):
        raise CodecError(f"the robust request holds {len(blobs)} ciphertexts, expected {pairs + (n if tail else 0)}")
    gram = torch.zeros(n, n, dtype=torch.float64)
    k = 0
    for i in range(n):
        for j in range(i, n):
            gram[i, j] = gram[j, i] = float(secret.decrypt(secret.load(blobs[k], expected_length=1))[0])
            k += 1
    gram = gram * scale * scale
    tails = (torch.stack([secret.decrypt(secret.load(b, expected_length=tail)) for b in blobs[pairs:]])
             if tail else torch.zeros(n, 0, dtype=torch.float64))
    w = tails[:, -1] if (tail and weighted) else torch.ones(n, dtype=torch.float64)
    live = w > 0
    coeffs = torch.zeros(n, dtype=torch.float64)
    if bool(live.any()):
        idx = live.nonzero().flatten()
        wl = w[idx]
        unweighted = gram[idx][:, idx] / (wl.unsqueeze(0) * wl.unsqueeze(1))
        coeffs[idx] = gram_coefficients(unweighted, rule=rule, trim=trim, norm_factor=norm_factor)
    keep = coeffs > 0
    expected_tail = tails[keep].sum(0) if tail else torch.zeros(0, dtype=torch.float64)
    return encode_tensor(coeffs), Expectation(coeffs, gram, expected_tail, scale)


def release_checked_sum(secret: SecretContext, payload: bytes, expect: Expectation, noise: OutputNoise, *,
                        length: int, tail: int) -> bytes:
    """Decrypt the selected sum, check it against ``expect``, flood it, encode ``values || tail``.

    Raises:
        ImplausibleSumError: Its squared norm or tail differs from what the kept inputs give.
    """
    blobs = unpack_blobs(payload, max_count=2)
    if len(blobs) != (2 if tail else 1):
        raise CodecError(f"the robust sum holds {len(blobs)} part(s), expected {2 if tail else 1}")
    values = secret.decrypt(secret.load(blobs[0], expected_length=length - tail))
    got, want = float(values @ values), expect.squared_norm
    # CKKS error of each decrypted inner product is about 2^-20 in units of scale^2 (last level)
    atol = float(expect.coefficients.sum()) ** 2 * expect.scale**2 * 2.0**-16
    if not abs(got - want) <= SUM_CHECK_RTOL * abs(want) + atol:
        raise ImplausibleSumError(f"the robust sum's squared norm {got:.6g} is not the {want:.6g} of the kept inputs: "
                                  "an input overflowed CKKS or the server sent another ciphertext")
    counts = secret.decrypt(secret.load(blobs[1], expected_length=tail)) if tail else torch.zeros(0, dtype=torch.float64)
    if tail and not torch.allclose(counts, expect.tail, rtol=SUM_CHECK_RTOL, atol=1e-3):
        raise ImplausibleSumError("the robust sum's counts are not those of the kept inputs")
    return encode_tensor(torch.cat([noise(values), noise(counts) if tail else counts]))


# ====================================================================== the mechanism
@register_mechanism
class CKKSRobust(Mechanism):
    """A robust ``aggregate`` under CKKS: the key holder judges inner products, the server sums the kept.

    Args:
        preset (str): CKKS preset (needs two levels: product, mask). (default: ``"default"``)
        rule (str): ``"krum"`` (multi-Krum: drop ``ceil(trim * n)`` inputs) or ``"norm"``
            (keep every input, bound its norm). (default: ``"krum"``)
        trim (float): Share of inputs multi-Krum drops (at most a minority). (default: ``0.2``)
        norm_factor (float): Inputs are scaled to at most this times the kept inputs' median norm;
            ``0`` disables the bound. (default: ``0.0``)
        scale (float): Public divisor of every upload, so inner products fit CKKS's integer
            headroom (``||v / scale||^2 < 2^18`` at the presets). (default: ``64.0``)
        output_noise, flood_std, round_bits: As ``ckks``: what the key holder adds to the sum.

    Raises:
        ImplausibleSumError: The key holder's check of the selected sum fails.
        OverflowRiskError: A client's update is too large for ``scale``.
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.AGGREGATE})
    returns_sum = False
    defaults: ClassVar[Mapping[str, Any]] = {
        **CKKS_KEY_DEFAULTS, "output_noise": "flood", "flood_std": 2.0**-20, "round_bits": 20,
        "rule": "krum", "trim": 0.2, "norm_factor": 0.0, "scale": 64.0,
    }
    protects = ("ciphertext: the server sees CKKS ciphertexts, the robust sum and which clients the rule kept; "
                "the key holder sees the pseudonymous updates' inner products")
    #: Parties a run with this mechanism needs besides the server and the clients.
    needs_parties: ClassVar[tuple[str, ...]] = (KEYHOLDER,)

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.preset: CKKSPreset = resolve_preset(self.params)
        self.keys = CKKSKeySetup(self.preset, key_holder=self.params["key_holder"])
        self.noise = OutputNoise(self.params["output_noise"], flood_std=self.params["flood_std"],
                                 round_bits=self.params["round_bits"])

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        problems = super().validate_params(params)
        p = {**cls.defaults, **params}
        problems += ckks_key_problems(p)
        problems += OutputNoise.problems(p["output_noise"], p["flood_std"], p["round_bits"])
        if p["rule"] not in GRAM_RULES:
            problems.append(f"rule must be one of {list(GRAM_RULES)}, got {p['rule']!r}")
        for key, lo, hi in (("trim", 0.0, 0.5), ("norm_factor", 0.0, math.inf), ("scale", 0.0, math.inf)):
            v = p[key]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v < hi or (key == "scale" and v <= 0):
                problems.append(f"{key} must be a number in [{lo}, {hi}){' and > 0' if key == 'scale' else ''}, got {v!r}")
        if p["rule"] == "norm" and isinstance(p["norm_factor"], (int, float)) and p["norm_factor"] <= 0:
            problems.append("rule 'norm' needs norm_factor > 0 (otherwise nothing is bounded)")
        return problems

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """As ``ckks``: ``output_noise = "none"`` releases exact decryptions to the server."""
        return CKKS.voided_guarantees({k: v for k, v in params.items() if k in CKKS.defaults})

    def rule_params(self) -> dict[str, Any]:
        return {"rule": str(self.params["rule"]), "trim": float(self.params["trim"]),
                "norm_factor": float(self.params["norm_factor"]), "scale": float(self.params["scale"])}

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        """The six steps above, each party's part acting as that party."""
        self.preset.require_levels(2, what="ckks_robust (ciphertext product, then a mask)")
        senders = sorted(p for p in inputs if p not in call.transport.offline)
        if not senders:
            raise InvalidInputError(f"no client uploaded anything for {call.tag!r}")
        holder = self.keys.ensure(call, encryptors=senders, decryptors=(), galois=True)
        length, tail, scale = int(next(iter(inputs.values())).numel()), int(call.count_tail), float(self.params["scale"])

        # --- each client: encrypt and upload; the server parses
        server_ctx = self.keys.context_of(call, call.server)
        parsed: dict[str, tuple[EncryptedVector, EncryptedVector | None]] = {}
        for pid in senders:
            payload = encrypt_upload(self.keys.context_of(call, pid), inputs[pid].reshape(-1), tail=tail, scale=scale,
                                     preset=self.preset, pid=pid)
            call.transport.send(Envelope(pid, (call.server,), call.round, call.tag, payload, stage=Stage.UPLOAD,
                                         form=Form.CIPHERTEXT))
            (env,) = call.transport.receive_from(call.server, [pid], tag=call.tag, round=call.round,
                                                 stage=Stage.UPLOAD).values()
            parsed[pid] = parse_upload(server_ctx, env.payload, length=length, tail=tail)
        order = [senders[k] for k in secure_permutation(len(senders))]  # pseudonym k -> client

        # --- server: the Gram request in pseudonym order
        call.transport.send(Envelope(call.server, (holder,), call.round, call.tag,
                                     gram_request([parsed[p][0] for p in order], [parsed[p][1] for p in order]),
                                     stage=Stage.GRAM_REQUEST, form=Form.CIPHERTEXT))
        # --- key holder: judge
        (req,) = call.transport.receive_from(holder, [call.server], tag=call.tag, round=call.round,
                                             stage=Stage.GRAM_REQUEST).values()
        reply, expect = judge(self.keys.secret_of(call, holder), req.payload, n=len(order), tail=tail,
                              weighted=call.weighted, **self.rule_params())
        call.transport.send(req.reply(reply, sender=holder, stage=Stage.GRAM_RESULT, form=Form.AGGREGATE))
        # --- server: the kept sum
        (res,) = call.transport.receive_from(call.server, [holder], tag=call.tag, round=call.round,
                                             stage=Stage.GRAM_RESULT).values()
        coeffs = read_coefficients(res.payload, len(order))
        call.transport.send(Envelope(call.server, (holder,), call.round, call.tag,
                                     selected_sum([parsed[p][0] for p in order], [parsed[p][1] for p in order], coeffs,
                                                  scale),
                                     stage=Stage.SUM_REQUEST, form=Form.CIPHERTEXT))
        # --- key holder: check, flood, release
        (req,) = call.transport.receive_from(holder, [call.server], tag=call.tag, round=call.round,
                                             stage=Stage.SUM_REQUEST).values()
        released = release_checked_sum(self.keys.secret_of(call, holder), req.payload, expect, self.noise,
                                       length=length, tail=tail)
        call.transport.send(req.reply(released, sender=holder, stage=Stage.SUM_RESULT, form=Form.AGGREGATE))
        # --- server: read it
        (res,) = call.transport.receive_from(call.server, [holder], tag=call.tag, round=call.round,
                                             stage=Stage.SUM_RESULT).values()
        total = decode_tensor(res.payload, spec=TensorSpec({"x": (torch.float64, (length,))}))
        release = record_release(call.state_of(call.server, NAME), call.tag, call.round,
                                 {p: float(coeffs[k]) for k, p in enumerate(order)})
        return SumOutcome(total, release.kept)


def record_release(state: dict[str, Any], tag: str, round: int, coefficients: Mapping[str, float]) -> JudgedRelease:
    """Keep, in the server's own state, what it learned beyond the sum (audits read it)."""
    release = JudgedRelease(tag, round, dict(coefficients))
    state.setdefault("released", {})[(tag, round)] = release
    return release


__all__ = [
    "KEYHOLDER",
    "NAME",
    "CKKSRobust",
    "Expectation",
    "JudgedRelease",
    "Stage",
    "encrypt_upload",
    "gram_request",
    "judge",
    "parse_upload",
    "read_coefficients",
    "record_release",
    "release_checked_sum",
    "selected_sum",
]
