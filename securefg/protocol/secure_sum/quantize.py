r"""Fixed-point encoding of float vectors into the ring Z_{2^bits}, with headroom for n summands.

**Ring size.** ``bits`` is any of 2..64. :meth:`Quantizer.fit` picks the *smallest* ring for a
clip, a requested resolution :math:`r` and ``n`` summands: with :math:`f = \lceil -\log_2 r \rceil`
(so the step :math:`2^{-f} \le r`), the least ``bits`` with
:math:`n \cdot \lceil c \cdot 2^f \rceil \le 2^{bits-1} - 1`, i.e. about
:math:`\log_2(n \cdot 2c / r)` bits. A ring too small for the clip, ``n`` and the resolution
asked for is refused with :class:`~securefg.errors.RingTooSmallError`.

A value :math:`x` with :math:`|x| \le c` (the clip) is encoded as
:math:`q(x) = \mathrm{round}(x \cdot 2^f) \bmod 2^{bits}`, two's complement. The number of
fractional bits :math:`f` is the largest integer with
:math:`n \cdot \lceil c \cdot 2^f \rceil \le 2^{bits-1} - 1`, so the sum of ``n`` encoded
values can never wrap around: the signed ring sum *is* the integer sum.

**Error bound.** The scale is a power of two, so :math:`x \cdot 2^f` is exact in float64 and
rounding to an integer costs at most :math:`2^{-(f+1)}` per summand; the ring sum is exact; the
final int -> float64 conversion costs at most a relative :math:`2^{-53}`. Hence, for inputs
inside the clip,

.. math::
    \Big|\mathrm{dequantize}\big(\textstyle\sum_i q(x_i)\big) - \sum_i x_i\Big|
    \le n \cdot 2^{-(f+1)} + 2^{-53} \cdot n \cdot c

per element (:meth:`Quantizer.error_bound`). Inputs beyond the clip raise
(``on_clip = "error"``, the default) or are saturated to :math:`\pm c` (``"saturate"``), in which
case the bound holds for the clipped inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from securefg.errors import InvalidInputError, RingTooSmallError
from securefg.protocol.secure_sum.prg import MAX_RING_BITS, ring_dtype, ring_mask

MIN_FRACTION_BITS = 0
"""Fewer fractional bits than this would make the resolution coarser than 1."""
MIN_RING_BITS = 2
"""A sign bit and at least one value bit."""


def fraction_bits_for(resolution: float) -> int:
    """The fewest fractional bits ``f`` whose step ``2^-f`` is at most ``resolution``."""
    if not (math.isfinite(resolution) and 0 < resolution <= 1):
        raise InvalidInputError(f"resolution must be in (0, 1], got {resolution!r}")
    return max(MIN_FRACTION_BITS, math.ceil(-math.log2(resolution)))


@dataclass(frozen=True)
class Quantizer:
    """Fixed-point codec for sums of ``summands`` vectors.

    Args:
        bits (int): Ring Z_{2^bits}, 2..64 (see :meth:`fit` for the smallest that suffices).
        clip (float): Largest absolute value encoded.
        summands (int): How many vectors the sum adds (the round's client count).
        on_clip (str): ``"error"`` or ``"saturate"`` for values beyond ``clip``. (default: ``"error"``)
        resolution (float, optional): Coarsest fixed-point step acceptable; the ring must give
            at least this precision. (default: :obj:`None`, whatever the ring gives)

    Raises:
        RingTooSmallError: (an :class:`~securefg.errors.OverflowRiskError`) if no ``f >= 0``
            gives headroom for ``summands`` values of ``clip``, or the ring cannot give
            ``resolution`` with that headroom.
    """

    bits: int
    clip: float
    summands: int
    on_clip: str = "error"
    resolution: float | None = None

    @classmethod
    def fit(cls, *, clip: float, resolution: float, summands: int, on_clip: str = "error") -> Quantizer:
        """The quantizer on the smallest ring that holds ``summands`` values of ``clip`` at ``resolution``.

        Raises:
            RingTooSmallError: if even Z_{2^64} is too small.
        """
        if not (math.isfinite(clip) and clip > 0):
            raise InvalidInputError(f"clip must be a positive finite number, got {clip}")
        f = fraction_bits_for(resolution)
        need = max(summands, 1) * math.ceil(math.ldexp(clip, f))
        bits = max(MIN_RING_BITS, need.bit_length() + 1)  # need <= 2^(bits-1) - 1
        if bits > MAX_RING_BITS:
            raise RingTooSmallError(
                f"{summands} summands of magnitude <= {clip:g} at resolution 2^-{f} need a 2^{bits} ring, "
                f"more than 2^{MAX_RING_BITS}; coarsen 'resolution' or lower 'clip' in the stack"
            )
        return cls(bits=bits, clip=clip, summands=summands, on_clip=on_clip, resolution=resolution)

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not MIN_RING_BITS <= self.bits <= MAX_RING_BITS:
            raise InvalidInputError(f"ring bits must be an integer in {MIN_RING_BITS}..{MAX_RING_BITS}, got {self.bits!r}")
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise InvalidInputError(f"clip must be a positive finite number, got {self.clip}")
        if self.summands < 1:
            raise InvalidInputError(f"summands must be >= 1, got {self.summands}")
        if self.on_clip not in ("error", "saturate"):
            raise InvalidInputError(f"on_clip must be 'error' or 'saturate', got {self.on_clip!r}")
        if self.fraction_bits < MIN_FRACTION_BITS:
            raise RingTooSmallError(
                f"{self.summands} summands of magnitude <= {self.clip} do not fit a 2^{self.bits} "
                f"ring with integer resolution; lower 'clip' or use 'bits = 64' in the stack"
            )
        if self.resolution is not None and self.fraction_bits < fraction_bits_for(self.resolution):
            raise RingTooSmallError(
                f"a 2^{self.bits} ring holds {self.summands} summands of magnitude <= {self.clip:g} only at "
                f"resolution 2^-{self.fraction_bits}, coarser than the {self.resolution:g} asked for; "
                f"use bits >= {Quantizer.fit(clip=self.clip, resolution=self.resolution, summands=self.summands).bits} "
                "or 'bits = \"auto\"', coarsen 'resolution' or lower 'clip' in the stack"
            )

    @property
    def fraction_bits(self) -> int:
        """The largest f with ``summands * ceil(clip * 2^f) <= 2^(bits-1) - 1``."""
        limit = 2 ** (self.bits - 1) - 1
        f = math.floor(math.log2(limit / (self.summands * self.clip))) + 1
        while f > -1100 and self.summands * math.ceil(math.ldexp(self.clip, f)) > limit:
            f -= 1
        return f

    @property
    def step(self) -> float:
        """The fixed-point step 2^-f (at most ``resolution`` when one was asked for)."""
        return math.ldexp(1.0, -self.fraction_bits)

    def error_bound(self, summands: int | None = None) -> float:
        """Worst-case absolute error per element of a dequantized sum of ``summands`` values."""
        n = self.summands if summands is None else summands
        return n * math.ldexp(1.0, -(self.fraction_bits + 1)) + 2.0**-53 * n * self.clip

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Encode float values into ring elements (a new unsigned array).

        Raises:
            InvalidInputError: for NaN/Inf, or values beyond the clip with ``on_clip="error"``.
        """
        x = np.asarray(x, dtype=np.float64)
        if not np.isfinite(x).all():
            raise InvalidInputError("secure-sum inputs must be finite (found NaN or Inf)")
        peak = float(np.abs(x).max()) if x.size else 0.0
        if peak > self.clip:
            if self.on_clip == "error":
                raise InvalidInputError(
                    f"an input value of magnitude {peak:.6g} exceeds the secure-sum clip {self.clip:.6g}; "
                    "raise 'clip' in the protocol stack (remember the exchange multiplies by the "
                    "weight and appends it) or set on_clip = 'saturate'"
                )
            x = np.clip(x, -self.clip, self.clip)
        q = np.rint(np.ldexp(x, self.fraction_bits)).astype(np.int64).view(np.uint64)
        q &= np.uint64(ring_mask(self.bits))
        out: np.ndarray = q.astype(ring_dtype(self.bits))
        return out

    def dequantize(self, total: np.ndarray) -> np.ndarray:
        """Decode a ring sum of at most ``summands`` encoded vectors into float64.

        ``total`` may hold whole words (unreduced): only its low ``bits`` bits are read, as a
        two's-complement integer.
        """
        words = np.asarray(total)
        if words.dtype.kind != "u" or words.dtype.itemsize * 8 < self.bits:
            words = words.astype(np.uint64)
        # sign-extend the low `bits` bits within the word itself (no widening copy to 64 bits)
        width = words.dtype.itemsize * 8
        signed = np.dtype(f"<i{words.dtype.itemsize}")
        ints = np.left_shift(words, words.dtype.type(width - self.bits)).view(signed) >> signed.type(width - self.bits)
        out = ints.astype(np.float64)
        return np.ldexp(out, -self.fraction_bits, out=out)
