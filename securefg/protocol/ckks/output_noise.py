"""Noise flooding or rounding of values a key holder decrypts *for another party*.

Why: CKKS decryption returns the message plus the ciphertext's error. A party that holds the
ciphertext *and* learns the exact decryption can solve for the secret key (Li and Micciancio,
"On the Security of Homomorphic Encryption on Approximate Numbers", EUROCRYPT 2021,
https://eprint.iacr.org/2020/1533). In securefg the server holds the aggregated ciphertext and
receives its decryption from the key holder, so the key holder floods the output with Gaussian
noise much larger than the CKKS error before releasing it (OpenFHE's ``NOISE_FLOODING_DECRYPT``
idea, applied to the decoded values).

The default ``flood_std = 2**-20`` (~9.5e-7, absolute, in the units the receiver sees) is a
*heuristic* margin, not a proof of IND-CPA^D security: measured at N=8192, scale 2^40 the
decryption error of a 10-client sum is ~1e-8 (flood/error ~ 2^6-2^7) and of a cosine ~3e-11
(~2^15). Raise it for more margin; ``"none"`` is only safe when the decryptor's output never
reaches a party that holds the ciphertext.

Gaussian samples come from the OS CSPRNG (Box-Muller over ``os.urandom``), not from a seeded
PRNG: whoever can predict flooding noise can subtract it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch

from securefg.errors import ConfigError
from securefg.protocol.csprng import csprng_standard_normal

MODES = ("flood", "round", "none")


def csprng_normal(n: int, std: float, *, randbytes: Callable[[int], bytes] = os.urandom) -> torch.Tensor:
    """``n`` samples of N(0, std^2) drawn from a CSPRNG (Box-Muller over 53-bit uniforms).

    Args:
        n (int): Number of samples.
        std (float): Standard deviation.
        randbytes (Callable[[int], bytes]): Source of random bytes. (default: :func:`os.urandom`)
    """
    return torch.from_numpy(csprng_standard_normal(n, randbytes=randbytes) * std)


class OutputNoise:
    """What a key holder does to decrypted values before releasing them.

    Args:
        mode (str): ``"flood"`` (add CSPRNG Gaussian noise), ``"round"`` (round to a grid of
            ``2**-round_bits``) or ``"none"``. (default: ``"flood"``)
        flood_std (float): Noise standard deviation for ``"flood"``. (default: ``2**-20``)
        round_bits (int): Fractional bits kept by ``"round"``. (default: ``20``)
    """

    def __init__(self, mode: str = "flood", *, flood_std: float = 2.0**-20, round_bits: int = 20) -> None:
        problems = self.problems(mode, flood_std, round_bits)
        if problems:
            raise ConfigError("; ".join(problems))
        self.mode = mode
        self.flood_std = float(flood_std)
        self.round_bits = int(round_bits)

    @staticmethod
    def problems(mode: object, flood_std: object, round_bits: object) -> list[str]:
        """One message per invalid option (empty when valid)."""
        out = []
        if mode not in MODES:
            out.append(f"Could not resolve output_noise {mode!r} among choices {list(MODES)}")
        if not isinstance(flood_std, (int, float)) or not flood_std > 0 or not math.isfinite(flood_std):
            out.append(f"flood_std must be a positive number, got {flood_std!r}")
        if not isinstance(round_bits, int) or not 0 <= round_bits <= 52:
            out.append(f"round_bits must be an integer in [0, 52], got {round_bits!r}")
        return out

    def __call__(self, values: torch.Tensor, *, randbytes: Callable[[int], bytes] = os.urandom) -> torch.Tensor:
        """The released version of ``values``."""
        if self.mode == "flood":
            return values + csprng_normal(values.numel(), self.flood_std, randbytes=randbytes).reshape(values.shape)
        if self.mode == "round":
            step = 2.0**-self.round_bits
            return torch.round(values / step) * step
        return values.clone()

    def __repr__(self) -> str:
        if self.mode == "flood":
            return f"OutputNoise('flood', flood_std={self.flood_std:g})"
        if self.mode == "round":
            return f"OutputNoise('round', round_bits={self.round_bits})"
        return "OutputNoise('none')"
