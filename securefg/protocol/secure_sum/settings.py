"""The secure sum's parameters, as read from a protocol stack, and what follows from them.

Both sides hold the same stack, so a client derives ``(k, t)``, the ring size and the
fixed-point scale from its own settings and the client count the server announces, and refuses
a server whose claims differ (a masked input in another ring fails to decode).

Ring size: ``bits = "auto"`` (the default) with a ``resolution`` sizes the ring per call to the
smallest that holds ``n`` summands of ``clip`` at that resolution (:meth:`Quantizer.fit`);
``"auto"`` without a resolution keeps the widest ring, 2^64, at the finest resolution it fits.
An integer ``bits`` pins the ring; with a ``resolution`` too it is refused
(:class:`~securefg.errors.RingTooSmallError`) when it cannot give that resolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from securefg.errors import ConfigError, InvalidInputError, OverflowRiskError
from securefg.protocol.secure_sum import pinned, range_check
from securefg.protocol.secure_sum.harary import choose_parameters, effective_degree, resolve_threshold
from securefg.protocol.secure_sum.prg import MAX_RING_BITS, Prg
from securefg.protocol.secure_sum.quantize import MIN_RING_BITS, Quantizer
from securefg.protocol.secure_sum.threshold_bound import min_threshold

AUTO = "auto"
"""``bits = "auto"``: the smallest ring for the clip, resolution and client count."""

DEFAULTS: Mapping[str, Any] = {
    "bits": AUTO,
    "resolution": None,
    "clip": 2.0**24,
    "on_clip": "error",
    "threshold": None,
    "degree": None,
    "dropout_rate": 0.1,
    "adversarial_rate": 0.1,
    "signatures": False,
    "prg": "aes128-ctr",
    "relay_sum": False,
    "pinned_keys": None,
    "norm_bound": None,
}


def validate(params: Mapping[str, Any]) -> list[str]:
    """One message per invalid parameter value (unknown keys are the base class's job)."""
    p = {**DEFAULTS, **params}
    problems = []
    bits = p["bits"]
    if bits != AUTO and (isinstance(bits, bool) or not isinstance(bits, int) or not MIN_RING_BITS <= bits <= MAX_RING_BITS):
        problems.append(f"'bits' must be \"{AUTO}\" or an integer in {MIN_RING_BITS}..{MAX_RING_BITS}, got {bits!r}")
    clip_ok = (not isinstance(p["clip"], bool) and isinstance(p["clip"], (int, float)) and math.isfinite(p["clip"])
               and p["clip"] > 0)
    if not clip_ok:  # an infinite clip bounds nothing and no ring holds it: refuse it here, not at the first sum
        problems.append(f"'clip' must be a positive number, and finite (the largest |value| the ring holds), "
                        f"got {p['clip']!r}")
    r = p["resolution"]
    r_ok = r is None or (not isinstance(r, bool) and isinstance(r, (int, float)) and 0 < r <= 1)
    if not r_ok:
        problems.append(f"'resolution' must be a number in (0, 1] (the coarsest fixed-point step), got {r!r}")
    if clip_ok and r_ok and r is not None and not problems:
        try:  # even two summands must fit (the smallest sum there is)
            Quantizer(bits=bits, clip=float(p["clip"]), summands=2, resolution=float(r)) if bits != AUTO else \
                Quantizer.fit(clip=float(p["clip"]), resolution=float(r), summands=2)
        except (OverflowRiskError, InvalidInputError) as exc:
            problems.append(str(exc))
    if p["on_clip"] not in ("error", "saturate"):
        problems.append(f"'on_clip' must be 'error' or 'saturate', got {p['on_clip']!r}")
    t = p["threshold"]
    if t is not None and (
        isinstance(t, bool)
        or not isinstance(t, (int, float))
        or (isinstance(t, int) and t < 1)
        or (isinstance(t, float) and not 0 < t <= 1)
    ):
        problems.append(f"'threshold' must be a count >= 1 or a fraction in (0, 1], got {t!r}")
    k = p["degree"]
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        problems.append(f"'degree' must be an integer >= 1, got {k!r}")
    for rate in ("dropout_rate", "adversarial_rate"):
        r = p[rate]
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r < 1:
            problems.append(f"{rate!r} must be in [0, 1), got {r!r}")
    for flag in ("signatures", "relay_sum"):
        if not isinstance(p[flag], bool):
            problems.append(f"{flag!r} must be true or false, got {p[flag]!r}")
    if not isinstance(p["prg"], str) or p["prg"] not in {g.value for g in Prg}:
        problems.append(f"'prg' must be one of {sorted(g.value for g in Prg)}, got {p['prg']!r}")
    return problems + pinned.validate(p) + range_check.validate(p)


@dataclass(frozen=True)
class Settings:
    """Validated secure-sum parameters (see :class:`~securefg.protocol.secure_sum.SecureSum`)."""

    bits: int | str = AUTO
    resolution: float | None = None
    clip: float = 2.0**24
    on_clip: str = "error"
    threshold: int | float | None = None
    degree: int | None = None
    dropout_rate: float = 0.1
    adversarial_rate: float = 0.1
    signatures: bool = False
    prg: Prg = Prg.AES128_CTR
    relay_sum: bool = False
    pinned_keys: str | None = None
    """Malicious-server mode: ``"run"`` or a directory file (:mod:`.pinned`)."""
    norm_bound: float | None = None
    """Per-client L2 bound, checked by each client and on the sum (:mod:`.range_check`)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Settings:
        problems = validate(params)
        if problems:
            raise ConfigError("invalid secure_sum parameters:\n" + "\n".join(f"- {p}" for p in problems))
        p = {**DEFAULTS, **params}
        return cls(
            bits=p["bits"] if p["bits"] == AUTO else int(p["bits"]),
            resolution=None if p["resolution"] is None else float(p["resolution"]),
            clip=float(p["clip"]),
            on_clip=str(p["on_clip"]),
            threshold=p["threshold"],
            degree=p["degree"],
            dropout_rate=float(p["dropout_rate"]),
            adversarial_rate=float(p["adversarial_rate"]),
            signatures=bool(p["signatures"]),
            prg=Prg(p["prg"]),
            relay_sum=bool(p["relay_sum"]),
            pinned_keys=p["pinned_keys"],
            norm_bound=None if p["norm_bound"] is None else float(p["norm_bound"]),
        )

    def graph(self, n: int) -> tuple[int, int]:
        """``(degree k, threshold t)`` for a round of ``n`` clients."""
        if n < 2:
            return 0, max(1, self.threshold if isinstance(self.threshold, int) else 1)
        chosen = choose_parameters(n, dropout_rate=self.dropout_rate, adversarial_rate=self.adversarial_rate)
        k = effective_degree(self.degree if self.degree is not None else chosen.degree, n)
        default_t = chosen.threshold if self.degree is None else min_threshold(k, self.adversarial_rate)
        return k, resolve_threshold(self.threshold, k, min(default_t, k))

    def quantizer(self, n: int) -> Quantizer:
        """The fixed-point codec (and ring) for sums of ``n`` vectors.

        Raises:
            RingTooSmallError: a pinned ring (or even 2^64) too small for ``n`` summands of the
                clip at the resolution asked for.
        """
        n = max(n, 1)
        if self.bits == AUTO and self.resolution is not None:
            return Quantizer.fit(clip=self.clip, resolution=self.resolution, summands=n, on_clip=self.on_clip)
        bits = MAX_RING_BITS if self.bits == AUTO else int(self.bits)
        return Quantizer(bits=bits, clip=self.clip, summands=n, on_clip=self.on_clip, resolution=self.resolution)

    def ring_bits(self, n: int) -> int:
        """Bits per element of the ring a sum of ``n`` vectors uses (and sends, bit-packed)."""
        return self.quantizer(n).bits

    def min_survivors(self, threshold: int) -> int:
        """Fewest masked inputs the aggregator may unmask: ``max(t, 2)``; one input is no sum."""
        return max(threshold, 2)
