r"""``ckks_robust``: a robust update aggregate whose rule runs at the key holder, on inner products only.

``subgroup_robust`` shows the server one sum per subgroup, which a curious server reads (label
inference on 2-client sums). Here nobody but the owner ever sees an update:

1. Keys as ``ckks`` (the server gets Galois keys for inner products). The key holder should be a
   ``keyholder`` party: a stack with this mechanism adds one to the run.
2. Client ``a`` uploads ``Enc(v_a)``, its weighted update, and, for the rule, ``Enc(y_a)`` and
   ``Enc(s_a)``: ``s_a y_a`` is the count sketch of ``v_a`` into one ciphertext's slots (a public
   hash; the vector itself when it fits), ``s_a`` a power of two (in every slot) and ``y_a`` of
   norm in ``(1/2, 1]``, so inner products of any update stand far above CKKS's noise and fit its
   headroom with no scale to tune. Its count tail ``t_a`` (side counts, then its weight ``w_a``)
   goes apart. The server learns sizes only.
3. The server draws a secret permutation of the uploaders (pseudonyms), computes every pair's
   encrypted slot-wise product ``Enc(y_a * y_b + r_ab)`` flooded by a fresh zero-sum mask
   ``r_ab`` (:meth:`EncryptedVector.masked_product`: one ciphertext product per pair, no rotation,
   and one ciphertext per sketch, so the cost does not grow with the model) in pseudonym order and
   sends them with the pseudonymous ``Enc(s_a)`` and tails to the key holder.
4. The key holder decrypts them and sums each product's slots (``<y_a, y_b>``; the mask sums to
   zero and hides every single slot), forms the Gram matrix ``G_ab = s_a s_b <y_a, y_b>`` (the count
   sketch keeps inner products in expectation, with a relative error of about ``1/sqrt(slots)``
   of ``||v_a|| ||v_b||``) divided by ``w_a w_b``, runs the rule (:mod:`.gram_rules`: multi-Krum
   and/or a norm bound at ``norm_factor`` times the median norm) and returns one coefficient per
   pseudonym (0: dropped). It keeps what the selected sum must look like.
5. The server maps the coefficients back to clients and computes ``Enc(sum_a c_a v_a)``, the same
   combination of the sketches ``Enc(sum_a c_a s_a y_a)`` (:meth:`EncryptedVector.times_encrypted`)
   and ``Enc(sum over kept of t_a)`` (times ``n / kept`` for an unweighted sum: an estimate of the
   full sum), and sends them to the key holder.
6. The key holder decrypts them and **checks** that the sketch of the value sum equals the sketch
   sum (a kept client whose sketch is not its update's), that the sketch sum's squared norm
   equals ``c^T G c`` (a Gram request or a sum the server altered) and that the counts are the
   kept ones (:class:`~securefg.errors.ImplausibleSumError`), then floods and releases the values
   and counts. An upload whose magnitude is not one power of two in every slot, or whose ``y``
   has a squared norm outside ``[0, 1]``, is dropped in step 4; a client that lies in its sketch
   can make a round abort, not slip into the sum.

**Who learns what** (semi-honest server and key holder, not colluding): the *server* learns the
robust sum (the exchange's output, with the kept tails' sum) and the coefficient of each client,
i.e. which clients the rule dropped and, with a norm bound, each clipped client's norm relative to
the bound. The *key holder* learns the Gram matrix of the pseudonymous updates (norms, pairwise
distances and angles as the sketches keep them, not the updates), their count tails (sample
counts), the powers of two ``s_a`` (implied by the norms anyway) and the released sum,
but not which client is which pseudonym. *Clients* learn nothing new. Not protected: a server
colluding with the key holder decrypts every upload; a malicious key holder can return any
coefficients (it is trusted for the rule, as a ``ckks`` key holder is for the sum).

The result is ``sum_a c_a v_a`` with the kept tails summed, so the exchange's division by
the weight total yields the mean of the kept (and bounded) updates (``returns_sum = False``).
"""

from __future__ import annotations

import functools
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
from securefg.protocol.csprng import csprng_standard_normal
from securefg.protocol.guarantees import Voided
from securefg.protocol.mechanism import ExchangeCall, ExchangeKind, Mechanism, SumOutcome, register_mechanism
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.shuffle import secure_permutation
from securefg.protocol.robust.gram_rules import GRAM_RULES, gram_coefficients
from securefg.protocol.shared_result import share_sum

NAME = "ckks_robust"
#: The helper party a stack with this mechanism needs (the key holder, apart from the clients).
KEYHOLDER = "keyholder"
#: Relative tolerance of the key holder's check of the released sum against ``c^T G c``.
SUM_CHECK_RTOL = 1e-3
#: Largest difference, relative to the largest bucket, between the sketch sum and the value
#: sum's sketch (CKKS noise is about 1e-7 of it; a lying client's share is of its update's size),
#: plus ABS_NOISE per summed term.
SKETCH_CHECK_RTOL = 1e-5
#: CKKS's absolute error on a decrypted value at scale 2^40 after one product (measured about
#: 4e-8), with a margin.
ABS_NOISE = 1e-6
#: Absolute CKKS error of one decrypted inner product of unit-norm vectors (rotation noise,
#: N=8192; measured 2e-6), with a margin.
NOISE_FLOOR = 1e-5
#: Largest value a coordinate of an upload may have, below what the summed ciphertexts
#: decrypt correctly at the top level (scale^2: 2^(sum(data primes) - 2 * scale_bits - 2)), with
#: 2^4 to spare for up to 16 clients.
MAX_ABS_SHIFT = 6
#: Standard deviation of the zero-sum mask on each slot of a sketch product: a slot of a product
#: of unit-norm sketches is about 1/slots (2.4e-4), so the mask floods it by 2^-28; the slots still
#: sum to the inner product within 4e-8 (measured at N=8192, well below NOISE_FLOOR).
PRODUCT_MASK_STD = 2.0**16
#: Public seed of the count sketch's hash (every party computes the same buckets and signs).
SKETCH_SEED = 0x5EC0_12E5


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
    weighted: bool
    magnitudes: torch.Tensor
    tails: torch.Tensor | None = None
    """Each pseudonym's decrypted count tail (``masked_robust`` re-derives ``tail`` for the
    clients a secure sum ends up holding)."""

    def restricted(self, coefficients: torch.Tensor) -> Expectation:
        """What a sum over ``coefficients`` (a subset of the judged ones: some kept clients dropped
        out afterwards) must look like.

        Raises:
            ProtocolError: ``coefficients`` keeps an input the rule dropped or rescales one.
        """
        c = coefficients.to(torch.float64)
        if c.shape != self.coefficients.shape or bool(((c != 0) & (c != self.coefficients)).any()):
            raise ProtocolError("the requested robust sum keeps inputs the key holder's rule did not keep")
        tails = self.tails if self.tails is not None else torch.zeros(c.numel(), 0, dtype=torch.float64)
        return Expectation(c, self.gram, tails[c > 0].sum(0), self.weighted, self.magnitudes, self.tails)

    @property
    def squared_norm(self) -> float:
        m = sum_factor(self.coefficients, self.weighted)
        return float(self.coefficients @ self.gram @ self.coefficients) * m * m

    @property
    def tolerance(self) -> float:
        """CKKS error of ``c^T G c`` (each ``<u_a, u_b>`` is off by up to :data:`NOISE_FLOOR`)."""
        m = sum_factor(self.coefficients, self.weighted)
        return NOISE_FLOOR * float((self.coefficients * self.magnitudes).sum() * m) ** 2


# ====================================================================== client side
@functools.lru_cache(maxsize=8)
def _sketch_hash(length: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(SKETCH_SEED ^ (length * 1_000_003 + width))
    buckets = torch.randint(0, width, (length,), generator=g)
    signs = torch.randint(0, 2, (length,), generator=g, dtype=torch.int64).to(torch.float64) * 2 - 1
    return buckets, signs


def sketch_of(values: torch.Tensor, width: int) -> torch.Tensor:
    """The count sketch of ``values`` into ``width`` buckets (public hash and signs; Charikar et al.,
    ICALP 2002): linear, and it keeps inner products in expectation. A vector of at most ``width``
    values is its own sketch (exact inner products)."""
    v = values.to(torch.float64).reshape(-1)
    if v.numel() <= width:
        return v.clone()
    buckets, signs = _sketch_hash(v.numel(), width)
    return torch.zeros(width, dtype=torch.float64).index_add_(0, buckets, signs * v)


def split_magnitude(values: torch.Tensor) -> tuple[float, torch.Tensor]:
    """``(s, u)`` with ``values = s * u``, ``s`` a power of two and ``||u||`` in ``(1/2, 1]`` (``s = 1``
    for a zero vector)."""
    norm = float(values.norm())
    if norm == 0.0:
        return 1.0, values
    s = 2.0 ** math.ceil(math.log2(norm))
    return s, values / s


def encrypt_upload(ctx: Any, vector: torch.Tensor, *, tail: int, preset: CKKSPreset, pid: str,
                   with_values: bool = True) -> bytes:
    """Client ``pid``'s upload: ``Enc(values)`` (not with ``with_values=False``: ``masked_robust``
    sends them masked instead), ``Enc(sketch / s)``, ``Enc(s)`` in every slot and, if ``tail``,
    ``Enc(counts)``.

    Raises:
        OverflowRiskError: A value too large for the kept sum to decrypt correctly.
    """
    values, counts = vector[: vector.numel() - tail].to(torch.float64), vector[vector.numel() - tail :]
    bound = 2.0 ** (sum(preset.coeff_mod_bit_sizes[:-1]) - 2 * preset.scale_bits - MAX_ABS_SHIFT)
    top = float(values.abs().max()) if values.numel() else 0.0
    if not top <= bound:
        raise OverflowRiskError(f"{pid}: a value of magnitude {top:.3g} exceeds {bound:.3g}, what a ckks_robust sum of "
                                f"up to 16 such values decrypts correctly at CKKS preset {preset.name!r}")
    s, unit = split_magnitude(sketch_of(values, preset.slots))
    blobs = [ctx.encrypt(values).to_bytes()] if with_values else []
    blobs += [ctx.encrypt(unit).to_bytes(), ctx.encrypt(torch.full((preset.slots,), s, dtype=torch.float64)).to_bytes()]
    if tail:
        blobs.append(ctx.encrypt(counts.to(torch.float64)).to_bytes())
    return pack_blobs(blobs)


@dataclass(frozen=True)
class Upload:
    """One client's parsed upload (at the server)."""

    values: EncryptedVector | None
    sketch: EncryptedVector
    magnitude: EncryptedVector
    tail: EncryptedVector | None


def sketch_width(length: int, slots: int) -> int:
    """Values in a sketch of a ``length``-value vector."""
    return min(length, slots)


def parse_upload(ctx: Any, payload: bytes, *, length: int, tail: int, with_values: bool = True) -> Upload:
    """Server side: the parts of one upload, with their lengths checked.

    Raises:
        CodecError: Another number of parts or lengths than announced.
    """
    want = (1 if with_values else 0) + 2 + (1 if tail else 0)
    blobs = unpack_blobs(payload, max_count=4)
    if len(blobs) != want:
        raise CodecError(f"a robust upload holds {len(blobs)} part(s), expected {want}")
    values = ctx.load(blobs.pop(0), expected_length=length - tail) if with_values else None
    sketch = ctx.load(blobs[0], expected_length=sketch_width(length - tail, ctx.slots))
    magnitude = ctx.load(blobs[1], expected_length=ctx.slots)
    if magnitude.num_chunks != 1 or sketch.num_chunks != 1:
        raise CodecError("a robust upload's sketch and magnitude must be one full-slot ciphertext each")
    return Upload(values, sketch, magnitude, ctx.load(blobs[2], expected_length=tail) if tail else None)


# ====================================================================== server side
def zero_sum_mask(slots: int) -> torch.Tensor:
    """``slots`` Gaussians of standard deviation :data:`PRODUCT_MASK_STD` (OS CSPRNG), shifted to sum
    to zero: added to a slot-wise product, it leaves the sum and floods every slot."""
    r = torch.from_numpy(csprng_standard_normal(slots)) * PRODUCT_MASK_STD
    return r - r.mean()


def gram_request(uploads: Sequence[Upload]) -> bytes:
    """Every pair's encrypted slot-wise sketch product, flooded by a zero-sum mask (upper triangle,
    row by row, in pseudonym order: the key holder sums the slots), then each pseudonym's
    magnitude, then its tail."""
    n = len(uploads)
    slots = uploads[0].sketch.chunk_size if uploads else 0
    blobs = [uploads[i].sketch.masked_product(uploads[j].sketch, zero_sum_mask(slots)).to_bytes()
             for i in range(n) for j in range(i, n)]
    blobs += [u.magnitude.to_bytes() for u in uploads]
    blobs += [u.tail.to_bytes() for u in uploads if u.tail is not None]
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


def sum_factor(coefficients: torch.Tensor, weighted: bool) -> float:
    """``n / kept`` for an unweighted sum (the kept inputs' sum scaled to all ``n``, an estimate of
    the full sum, as ``subgroup_robust`` returns), 1 for a weighted one (the exchange divides by
    the kept weight total)."""
    kept = int((coefficients > 0).sum())
    return 1.0 if weighted else coefficients.numel() / kept


def selected_sum(uploads: Sequence[Upload], coefficients: torch.Tensor, *, weighted: bool,
                 with_values: bool = True) -> bytes:
    """``Enc(m sum_a c_a v_a)`` (unless ``with_values=False``), ``Enc(m sum_a c_a s_a y_a)`` (``m``:
    :func:`sum_factor`) and ``Enc(sum over kept of t_a)``, packed."""
    kept = [i for i in range(len(uploads)) if float(coefficients[i]) > 0]
    m = sum_factor(coefficients, weighted)
    blobs = ([EncryptedVector.linear_combination([(uploads[i].values, float(coefficients[i]) * m)  # type: ignore[misc]
                                                  for i in kept]).to_bytes()] if with_values else [])
    blobs.append(EncryptedVector.linear_combination([(uploads[i].sketch.times_encrypted(uploads[i].magnitude),
                                                      float(coefficients[i]) * m) for i in kept]).to_bytes())
    if uploads[0].tail is not None:
        blobs.append(EncryptedVector.linear_combination([(uploads[i].tail, 1.0) for i in kept]).to_bytes())  # type: ignore[misc]
    return pack_blobs(blobs)


# ====================================================================== key-holder side
def judge(secret: SecretContext, payload: bytes, *, n: int, tail: int, weighted: bool, rule: str, trim: float,
          norm_factor: float) -> tuple[bytes, Expectation]:
    """Decrypt the inner products, magnitudes and tails, run the rule; return the coefficients and
    what to check.

    Raises:
        CodecError: Not ``n (n + 1) / 2`` products, ``n`` magnitudes (and ``n`` tails).
        InvalidInputError: Inner products no real vectors have among the well-formed uploads
            (:func:`check_unit_gram`). An upload whose magnitude is not one power of two in every
            slot, or whose sketch's squared norm lies outside ``[0, 1]``, gets coefficient 0.
    """
    pairs = n * (n + 1) // 2
    want = pairs + n + (n if tail else 0)
    blobs = unpack_blobs(payload, max_count=pairs + 2 * n)
    if len(blobs) != want:
        raise CodecError(f"the robust request holds {len(blobs)} ciphertexts, expected {want}")
    unit = torch.zeros(n, n, dtype=torch.float64)
    k = 0
    for i in range(n):
        for j in range(i, n):
            unit[i, j] = unit[j, i] = float(secret.decrypt(secret.load(blobs[k], expected_length=secret.slots)).sum())
            k += 1
    mags = torch.tensor([_magnitude_or_zero(secret.decrypt(secret.load(b))) for b in blobs[pairs : pairs + n]],
                        dtype=torch.float64)
    diag = torch.diagonal(unit)
    valid = (mags > 0) & (diag >= -NOISE_FLOOR) & (diag <= 1 + NOISE_FLOOR)  # split as the protocol splits
    check_unit_gram(unit[valid][:, valid])
    gram = unit * mags.unsqueeze(0) * mags.unsqueeze(1)
    tails = (torch.stack([secret.decrypt(secret.load(b, expected_length=tail)) for b in blobs[pairs + n :]])
             if tail else torch.zeros(n, 0, dtype=torch.float64))
    w = tails[:, -1] if (tail and weighted) else torch.ones(n, dtype=torch.float64)
    live = (w > 0) & valid  # an upload not split as the protocol splits it is dropped, not trusted
    coeffs = torch.zeros(n, dtype=torch.float64)
    if bool(live.any()):
        idx = live.nonzero().flatten()
        wl = w[idx]
        unweighted = gram[idx][:, idx] / (wl.unsqueeze(0) * wl.unsqueeze(1))
        coeffs[idx] = gram_coefficients(unweighted, rule=rule, trim=trim, norm_factor=norm_factor)
    keep = coeffs > 0
    expected_tail = tails[keep].sum(0) if tail else torch.zeros(0, dtype=torch.float64)
    return encode_tensor(coeffs), Expectation(coeffs, gram, expected_tail, bool(tail and weighted), mags, tails)


def _magnitude_or_zero(slots: torch.Tensor) -> float:
    try:
        return read_magnitude(slots)
    except InvalidInputError:
        return 0.0


def read_magnitude(slots: torch.Tensor) -> float:
    """The power of two every slot of a decrypted magnitude holds.

    Raises:
        InvalidInputError: Slots that differ, or a value that is not a positive power of two.
    """
    s = float(slots.mean())
    if not (s > 0 and math.isfinite(s)) or float((slots - s).abs().max()) > 1e-6 * s + ABS_NOISE:
        raise InvalidInputError("a ckks_robust magnitude is not one positive value in every slot")
    exp = round(math.log2(s))
    if abs(s - 2.0**exp) > 1e-3 * s:
        raise InvalidInputError(f"a ckks_robust magnitude {s:.6g} is not a power of two")
    return 2.0**exp


def check_unit_gram(unit: torch.Tensor) -> None:
    """Refuse inner products no sketches of norm at most 1 have: NaN, a squared norm outside
    ``[0, 1]`` or an inner product above 1 in magnitude, beyond CKKS noise. :func:`judge` first
    drops the uploads whose own squared norm or magnitude is off (a client's doing); what is
    left can only come from a request the server tampered with.

    Raises:
        InvalidInputError: Naming the problem.
    """
    if unit.numel() == 0:
        return
    if not bool(torch.isfinite(unit).all()):
        raise InvalidInputError("the decrypted inner products hold NaN or Inf")
    diag = torch.diagonal(unit)
    if float(diag.min()) < -NOISE_FLOOR or float(diag.max()) > 1 + NOISE_FLOOR:
        raise InvalidInputError("an upload's sketch has a squared norm outside [0, 1]: it was not split as "
                                "ckks_robust splits it, or the server tampered with the request")
    if float(unit.abs().max()) > 1 + NOISE_FLOOR:
        raise InvalidInputError("an inner product of two sketches exceeds 1: the request was tampered with")


def release_checked_sum(secret: SecretContext, payload: bytes, expect: Expectation, noise: OutputNoise, *,
                        length: int, tail: int) -> bytes:
    """Decrypt the selected sum and its sketch, check them against ``expect``, flood the sum,
    encode ``values || tail``.

    Raises:
        ImplausibleSumError: The value sum's sketch is not the sketch sum (a kept client's sketch
            is not its update's), the sketch sum's squared norm is not ``c^T G c`` (the server
            altered the Gram request or the sums), or the counts are not the kept ones.
    """
    blobs = unpack_blobs(payload, max_count=3)
    if len(blobs) != (3 if tail else 2):
        raise CodecError(f"the robust sum holds {len(blobs)} part(s), expected {3 if tail else 2}")
    values = secret.decrypt(secret.load(blobs[0], expected_length=length - tail))
    sketch = secret.decrypt(secret.load(blobs[1], expected_length=sketch_width(length - tail, secret.slots)))
    mine = sketch_of(values, secret.slots)
    scale = max(float(sketch.abs().max()), float(mine.abs().max()))
    terms = float(expect.coefficients.sum()) * sum_factor(expect.coefficients, expect.weighted)
    if float((sketch - mine).abs().max()) > SKETCH_CHECK_RTOL * scale + ABS_NOISE * max(terms, 1.0):
        raise ImplausibleSumError("the sketch of the robust sum is not the sum of the kept sketches: a kept client "
                                  "sent a sketch that is not its update's (or the server altered a sum)")
    counts = secret.decrypt(secret.load(blobs[2], expected_length=tail)) if tail else torch.zeros(0, dtype=torch.float64)
    check_sketch_sum(sketch, counts, expect)
    return encode_tensor(torch.cat([noise(values), noise(counts) if tail else counts]))


def check_sketch_sum(sketch: torch.Tensor, counts: torch.Tensor, expect: Expectation) -> None:
    """Key holder side: a decrypted sketch sum and its counts must be those of the coefficients it
    judged: squared norm ``c^T G c`` (within CKKS error) and the kept inputs' counts.

    Raises:
        ImplausibleSumError: The server altered the Gram request, the sums or the request.
    """
    terms = float(expect.coefficients.sum()) * sum_factor(expect.coefficients, expect.weighted)
    got, want = float(sketch @ sketch), expect.squared_norm
    slot_noise = ABS_NOISE * max(terms, 1.0) * math.sqrt(sketch.numel())  # the sketch sum's own CKKS error, in norm
    if not abs(got - want) <= SUM_CHECK_RTOL * abs(want) + expect.tolerance + slot_noise * (2 * math.sqrt(got) + slot_noise):
        raise ImplausibleSumError(f"the robust sum's sketch has squared norm {got:.6g}, not the {want:.6g} of the "
                                  "judged inner products: the server altered the request or the sums")
    if counts.numel() and not torch.allclose(counts, expect.tail, rtol=SUM_CHECK_RTOL, atol=1e-3):
        raise ImplausibleSumError("the robust sum's counts are not those of the kept inputs")


def pseudonym_order(parsed: Mapping[str, Upload]) -> tuple[tuple[str, ...], tuple[Upload, ...]]:
    """A secret pseudonym order of the uploaders (pseudonym k -> client) and their uploads in it."""
    uploaders = sorted(parsed)
    order = tuple(uploaders[k] for k in secure_permutation(len(uploaders)))
    return order, tuple(parsed[p] for p in order)


@functools.lru_cache(maxsize=8)
def largest_bucket(length: int, width: int) -> int:
    """Most values the public count-sketch hash puts in one bucket (1 when the sketch is the vector)."""
    if length <= width:
        return 1
    buckets, _ = _sketch_hash(length, width)
    return int(torch.bincount(buckets, minlength=width).max())


# ====================================================================== the mechanism
@register_mechanism
class CKKSRobust(Mechanism):
    """A robust ``aggregate`` under CKKS: the key holder judges inner products, the server sums the kept.

    Args:
        preset (str): CKKS preset (needs two levels: product, mask). (default: ``"default"``)
        rule (str): ``"krum"`` (multi-Krum: drop ``ceil(trim * n)`` inputs), ``"norm"`` (keep
            every input, bound its norm) or ``"norm_filter"`` (drop an input above ``norm_factor``
            times the median norm). (default: ``"krum"``)
        trim (float): Share of inputs multi-Krum drops (at most ``(n - 3) // 2``: Krum's ``n >= 2f + 3``). (default: ``0.2``)
        norm_factor (float): Inputs are scaled to at most this times the kept inputs' median norm;
            ``0`` disables the bound. (default: ``0.0``)
        output_noise, flood_std, round_bits: As ``ckks``: what the key holder adds to the sum.

    Raises:
        ImplausibleSumError: The key holder's check of the selected sum fails.
        OverflowRiskError: A client's update holds a value too large for the sum to decrypt.
    """

    name = NAME
    exchanges = frozenset({ExchangeKind.AGGREGATE, ExchangeKind.SHARED_SUM})
    returns_sum = False
    defaults: ClassVar[Mapping[str, Any]] = {
        **CKKS_KEY_DEFAULTS, "output_noise": "flood", "flood_std": 2.0**-20, "round_bits": 20,
        "rule": "krum", "trim": 0.2, "norm_factor": 0.0,
    }
    protects = ("ciphertext: the server sees CKKS ciphertexts, the robust sum and which clients the rule kept; "
                "the key holder sees the inner products of the pseudonymous updates' count sketches")
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
        for key, lo, hi in (("trim", 0.0, 0.5), ("norm_factor", 0.0, math.inf)):
            v = p[key]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v < hi:
                problems.append(f"{key} must be a number in [{lo}, {hi}), got {v!r}")
        if p["rule"] in ("norm", "norm_filter") and isinstance(p["norm_factor"], (int, float)) and p["norm_factor"] <= 0:
            problems.append(f"rule {p['rule']!r} needs norm_factor > 0 (otherwise nothing is bounded)")
        return problems

    @classmethod
    def voided_guarantees(cls, params: Mapping[str, Any]) -> list[Voided]:
        """As ``ckks``: ``output_noise = "none"`` releases exact decryptions to the server."""
        return CKKS.voided_guarantees({k: v for k, v in params.items() if k in CKKS.defaults})

    def rule_params(self) -> dict[str, Any]:
        return {"rule": str(self.params["rule"]), "trim": float(self.params["trim"]),
                "norm_factor": float(self.params["norm_factor"])}

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        """The six steps above, each party's part acting as that party."""
        self.preset.require_levels(2, what="ckks_robust (ciphertext product, then a mask)")
        senders = sorted(p for p in inputs if p not in call.transport.offline)
        if not senders:
            raise InvalidInputError(f"no client uploaded anything for {call.tag!r}")
        holder = self.keys.ensure(call, encryptors=senders, decryptors=(), galois=True)
        length, tail = int(next(iter(inputs.values())).numel()), int(call.count_tail)

        # --- each client: encrypt and upload; the server parses
        server_ctx = self.keys.context_of(call, call.server)
        parsed: dict[str, Upload] = {}
        for pid in senders:
            payload = encrypt_upload(self.keys.context_of(call, pid), inputs[pid].reshape(-1), tail=tail,
                                     preset=self.preset, pid=pid)
            call.transport.send(Envelope(pid, (call.server,), call.round, call.tag, payload, stage=Stage.UPLOAD,
                                         form=Form.CIPHERTEXT))
            (env,) = call.transport.receive_from(call.server, [pid], tag=call.tag, round=call.round,
                                                 stage=Stage.UPLOAD).values()
            parsed[pid] = parse_upload(server_ctx, env.payload, length=length, tail=tail)
        order, uploads = pseudonym_order(parsed)

        # --- server: the Gram request in pseudonym order
        call.transport.send(Envelope(call.server, (holder,), call.round, call.tag, gram_request(uploads),
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
                                     selected_sum(uploads, coeffs, weighted=bool(tail and call.weighted)),
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

    def run_shared_sum(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> dict[str, SumOutcome]:
        """The robust aggregate, sent on to every client (``Form.AGGREGATE``): the server reads it,
        so a tag that was server-blind (``blind_sum``) gives that up under this mechanism."""
        return share_sum(call, inputs, self.run_aggregate(call, inputs), form=Form.AGGREGATE)


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
    "check_sketch_sum",
    "encrypt_upload",
    "gram_request",
    "judge",
    "largest_bucket",
    "parse_upload",
    "pseudonym_order",
    "read_coefficients",
    "record_release",
    "release_checked_sum",
    "selected_sum",
]
