"""The secure sum's parameters, as read from a protocol stack, and what follows from them.

Both sides hold the same stack, so a client derives ``(k, t)`` and the fixed-point scale from
its own settings and the client count the server announces, and refuses a server whose claims
differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from securefg.errors import ConfigError
from securefg.protocol.secure_sum.harary import choose_parameters, effective_degree, resolve_threshold
from securefg.protocol.secure_sum.prg import Prg
from securefg.protocol.secure_sum.quantize import Quantizer

DEFAULTS: Mapping[str, Any] = {
    "bits": 64,
    "clip": 2.0**24,
    "on_clip": "error",
    "threshold": None,
    "degree": None,
    "dropout_rate": 0.1,
    "adversarial_rate": 0.1,
    "signatures": False,
    "prg": "aes-ctr",
}


def validate(params: Mapping[str, Any]) -> list[str]:
    """One message per invalid parameter value (unknown keys are the base class's job)."""
    p = {**DEFAULTS, **params}
    problems = []
    if p["bits"] not in (32, 64):
        problems.append(f"'bits' must be 32 or 64, got {p['bits']!r}")
    if isinstance(p["clip"], bool) or not isinstance(p["clip"], (int, float)) or not p["clip"] > 0:
        problems.append(f"'clip' must be a positive number, got {p['clip']!r}")
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
    if not isinstance(p["signatures"], bool):
        problems.append(f"'signatures' must be true or false, got {p['signatures']!r}")
    if p["prg"] not in {g.value for g in Prg}:
        problems.append(f"'prg' must be one of {sorted(g.value for g in Prg)}, got {p['prg']!r}")
    return problems


@dataclass(frozen=True)
class Settings:
    """Validated secure-sum parameters (see :class:`~securefg.protocol.secure_sum.SecureSum`)."""

    bits: int = 64
    clip: float = 2.0**24
    on_clip: str = "error"
    threshold: int | float | None = None
    degree: int | None = None
    dropout_rate: float = 0.1
    adversarial_rate: float = 0.1
    signatures: bool = False
    prg: Prg = Prg.AES_CTR

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Settings:
        problems = validate(params)
        if problems:
            raise ConfigError("invalid secure_sum parameters:\n" + "\n".join(f"- {p}" for p in problems))
        p = {**DEFAULTS, **params}
        return cls(
            bits=int(p["bits"]),
            clip=float(p["clip"]),
            on_clip=str(p["on_clip"]),
            threshold=p["threshold"],
            degree=p["degree"],
            dropout_rate=float(p["dropout_rate"]),
            adversarial_rate=float(p["adversarial_rate"]),
            signatures=bool(p["signatures"]),
            prg=Prg(p["prg"]),
        )

    def graph(self, n: int) -> tuple[int, int]:
        """``(degree k, threshold t)`` for a round of ``n`` clients."""
        if n < 2:
            return 0, max(1, self.threshold if isinstance(self.threshold, int) else 1)
        chosen = choose_parameters(n, dropout_rate=self.dropout_rate, adversarial_rate=self.adversarial_rate)
        k = effective_degree(self.degree if self.degree is not None else chosen.degree, n)
        default_t = chosen.threshold if self.degree is None else k // 2 + 1
        return k, resolve_threshold(self.threshold, k, min(default_t, k))

    def quantizer(self, n: int) -> Quantizer:
        """The fixed-point codec for sums of ``n`` vectors."""
        return Quantizer(bits=self.bits, clip=self.clip, summands=max(n, 1), on_clip=self.on_clip)

    def min_survivors(self, threshold: int) -> int:
        """Fewest masked inputs the aggregator may unmask: ``max(t, 2)``; one input is no sum."""
        return max(threshold, 2)
