"""CKKS parameter presets, checked for 128-bit security before any key is made.

The bound is the HomomorphicEncryption.org standard table (Albrecht et al., 2018,
https://homomorphicencryption.org/standard/) for classical 128-bit security with a ternary
secret: the total coefficient-modulus size ``log2 Q`` (including the special prime used for key
switching) may not exceed ``MAX_LOG_Q_128[N]``. SEAL enforces the same table; we check first so
that a stack file fails at load time with a :class:`~securefg.errors.ConfigError` naming the
problem instead of an opaque ``ValueError`` from the native library.

Measured costs at N=8192 (``cefgc.md`` §6.2): 4096 slots per ciphertext, 20.9x expansion vs
float32, ~1e-8 absolute error on sums. N=4096 with a 20-bit scale is *unusable* (dot-product
error 36.9), so scales below 2^30 are rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from securefg.errors import ConfigError

#: Max total coefficient-modulus bits for 128-bit classical security (HE standard, ternary secret).
MAX_LOG_Q_128: Mapping[int, int] = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
#: SEAL accepts primes of at most 60 bits.
MAX_PRIME_BITS = 60
#: Below this scale CKKS cannot reach the ~1e-6 relative precision the exchanges promise.
MIN_SCALE_BITS = 30


@dataclass(frozen=True)
class CKKSPreset:
    """One CKKS parameter set.

    Args:
        name (str): Preset name (``"custom"`` for user-given parameters).
        poly_modulus_degree (int): Ring dimension N; a ciphertext packs N/2 real slots.
        coeff_mod_bit_sizes (tuple[int, ...]): Bit sizes of the modulus chain
            ``[q0, q1, ..., q_L, special]``.
        scale_bits (int): log2 of the encoding scale.
    """

    name: str
    poly_modulus_degree: int
    coeff_mod_bit_sizes: tuple[int, ...]
    scale_bits: int

    @property
    def slots(self) -> int:
        """Real values packed per ciphertext (N/2)."""
        return self.poly_modulus_degree // 2

    @property
    def scale(self) -> float:
        """The encoding scale 2**scale_bits."""
        return float(2**self.scale_bits)

    @property
    def levels(self) -> int:
        """Multiplications (ciphertext or plaintext) a fresh ciphertext can absorb."""
        return len(self.coeff_mod_bit_sizes) - 2

    @property
    def headroom_bits(self) -> int:
        """Integer bits left at the last level: decrypted values must stay below 2**(this-1)."""
        return self.coeff_mod_bit_sizes[0] - self.scale_bits

    @property
    def fingerprint(self) -> str:
        """A short string that identifies the parameters (used to key cached contexts)."""
        chain = "-".join(map(str, self.coeff_mod_bit_sizes))
        return f"N{self.poly_modulus_degree}/q{chain}/s{self.scale_bits}"

    def problems(self) -> list[str]:
        """Every reason these parameters are insecure or unusable (empty when fine)."""
        n, chain, s = self.poly_modulus_degree, self.coeff_mod_bit_sizes, self.scale_bits
        out: list[str] = []
        if n not in MAX_LOG_Q_128:
            out.append(
                f"poly_modulus_degree={n} is not one of {sorted(MAX_LOG_Q_128)} "
                "(powers of two with a 128-bit security bound)"
            )
            return out
        if len(chain) < 3:
            out.append(
                f"coeff_mod_bit_sizes={list(chain)} needs at least 3 primes "
                "(q0, one rescaling prime, the special prime); e.g. [60, 40, 40, 60]"
            )
        if any(not 20 <= b <= MAX_PRIME_BITS for b in chain):
            out.append(f"coeff_mod_bit_sizes={list(chain)}: every prime must have 20..60 bits")
        total = sum(chain)
        if total > MAX_LOG_Q_128[n]:
            out.append(
                f"coeff_mod_bit_sizes={list(chain)} total {total} bits, above the {MAX_LOG_Q_128[n]}-bit "
                f"maximum for 128-bit security at poly_modulus_degree={n} (HE standard); use fewer or "
                "smaller primes, or a larger poly_modulus_degree"
            )
        if s < MIN_SCALE_BITS:
            out.append(
                f"scale_bits={s} is below {MIN_SCALE_BITS}: CKKS error would exceed the ~1e-6 "
                "relative tolerance (measured: 2^20 gives 8e-3 error on sums)"
            )
        if len(chain) >= 3:
            if chain[0] <= s:
                out.append(f"first prime ({chain[0]} bits) must exceed scale_bits={s} to leave integer headroom")
            middle = chain[1:-1]
            if any(b != s for b in middle):
                out.append(
                    f"rescaling primes {list(middle)} must all equal scale_bits={s} "
                    "(otherwise each rescale distorts the scale)"
                )
            if chain[-1] < max(chain[:-1]):
                out.append(f"special prime ({chain[-1]} bits) must be at least as large as every other prime")
        return out

    def require_levels(self, needed: int, *, what: str) -> None:
        """Raise :class:`ConfigError` unless ``needed`` multiplicative levels are available."""
        if self.levels < needed:
            raise ConfigError(
                f"{what} needs {needed} multiplicative level(s) but CKKS preset {self.name!r} "
                f"({self.fingerprint}) has {self.levels}; use preset 'deep' or add "
                f"{self.scale_bits}-bit primes to coeff_mod_bit_sizes"
            )


PRESETS: Mapping[str, CKKSPreset] = {
    # Recommended in cefgc.md §6.2: 2 levels (a product then a mask, or two scalar products).
    "default": CKKSPreset("default", 8192, (60, 40, 40, 60), 40),
    # Deeper circuits: 4 levels, 8192 slots, ~35x expansion; 280 of 438 allowed bits.
    "deep": CKKSPreset("deep", 16384, (60, 40, 40, 40, 40, 60), 40),
}

_CUSTOM_KEYS = ("poly_modulus_degree", "coeff_mod_bit_sizes", "scale_bits")


def preset_problems(params: Mapping[str, Any]) -> list[str]:
    """Problems with the CKKS-parameter part of a mechanism's ``params`` (empty when valid)."""
    try:
        resolve_preset(params)
    except ConfigError as exc:
        return [str(exc)]
    return []


def resolve_preset(params: Mapping[str, Any]) -> CKKSPreset:
    """The preset named by ``params["preset"]``, or custom parameters if all three are given.

    Args:
        params (Mapping): Mechanism parameters: ``preset`` and optionally ``poly_modulus_degree``,
            ``coeff_mod_bit_sizes`` and ``scale_bits`` (all three, to define custom parameters).

    Raises:
        ConfigError: for an unknown preset, partial custom parameters, or parameters that are
            below 128-bit security or unusable.
    """
    given = {k: params.get(k) for k in _CUSTOM_KEYS if params.get(k) is not None}
    if given:
        missing = [k for k in _CUSTOM_KEYS if k not in given]
        if missing:
            raise ConfigError(
                f"custom CKKS parameters need all of {list(_CUSTOM_KEYS)}; missing {missing}"
            )
        chain = given["coeff_mod_bit_sizes"]
        if not isinstance(chain, Sequence) or not all(isinstance(b, int) for b in chain):
            raise ConfigError(f"coeff_mod_bit_sizes must be a list of integers, got {chain!r}")
        n, s = given["poly_modulus_degree"], given["scale_bits"]
        if not isinstance(n, int) or not isinstance(s, int):
            raise ConfigError("poly_modulus_degree and scale_bits must be integers")
        preset = CKKSPreset("custom", n, tuple(chain), s)
    else:
        name = params.get("preset", "default")
        if not isinstance(name, str) or name not in PRESETS:  # an array or table is unhashable
            raise ConfigError(f"Could not resolve CKKS preset {name!r} among choices {sorted(PRESETS)}")
        preset = PRESETS[name]
    problems = preset.problems()
    if problems:
        raise ConfigError(
            f"insecure or unusable CKKS parameters {preset.fingerprint}:\n"
            + "\n".join(f"- {p}" for p in problems)
        )
    return preset
