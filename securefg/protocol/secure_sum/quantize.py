r"""Fixed-point encoding of float vectors into the ring Z_{2^bits}, with headroom for n summands.

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

from securefg.errors import InvalidInputError, OverflowRiskError
from securefg.protocol.secure_sum.prg import ring_dtype

MIN_FRACTION_BITS = 0
"""Fewer fractional bits than this would make the resolution coarser than 1."""


@dataclass(frozen=True)
class Quantizer:
    """Fixed-point codec for sums of ``summands`` vectors.

    Args:
        bits (int): Ring Z_{2^bits}, 32 or 64.
        clip (float): Largest absolute value encoded.
        summands (int): How many vectors the sum adds (the round's client count).
        on_clip (str): ``"error"`` or ``"saturate"`` for values beyond ``clip``. (default: ``"error"``)

    Raises:
        OverflowRiskError: if no ``f >= 0`` gives headroom for ``summands`` values of ``clip``.
    """

    bits: int
    clip: float
    summands: int
    on_clip: str = "error"

    def __post_init__(self) -> None:
        ring_dtype(self.bits)
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise InvalidInputError(f"clip must be a positive finite number, got {self.clip}")
        if self.summands < 1:
            raise InvalidInputError(f"summands must be >= 1, got {self.summands}")
        if self.on_clip not in ("error", "saturate"):
            raise InvalidInputError(f"on_clip must be 'error' or 'saturate', got {self.on_clip!r}")
        if self.fraction_bits < MIN_FRACTION_BITS:
            raise OverflowRiskError(
                f"{self.summands} summands of magnitude <= {self.clip} do not fit a 2^{self.bits} "
                f"ring with integer resolution; lower 'clip' or use 'bits = 64' in the stack"
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
    def resolution(self) -> float:
        """The fixed-point step 2^-f."""
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
        q = np.rint(np.ldexp(x, self.fraction_bits))
        signed = np.dtype(f"<i{self.bits // 8}")
        out: np.ndarray = q.astype(signed).view(ring_dtype(self.bits))
        return out

    def dequantize(self, total: np.ndarray) -> np.ndarray:
        """Decode a ring sum of at most ``summands`` encoded vectors into float64."""
        signed = np.dtype(f"<i{self.bits // 8}")
        ints = np.ascontiguousarray(total, dtype=ring_dtype(self.bits)).view(signed)
        return np.ldexp(ints.astype(np.float64), -self.fraction_bits)
