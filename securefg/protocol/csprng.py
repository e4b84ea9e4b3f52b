"""Gaussian samples from the operating system's CSPRNG, for noise that must not be predictable.

DP noise and CKKS noise flooding both need normals an observer cannot reproduce from a seed;
one implementation serves both.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

_TWO_PI = 2.0 * math.pi
_UNIT = 2.0**-53


def csprng_standard_normal(count: int, *, randbytes: Callable[[int], bytes] = os.urandom) -> np.ndarray:
    """``count`` standard normals: Box-Muller over 53-bit uniforms read from ``randbytes``.

    Args:
        count (int): Number of samples (``<= 0`` gives an empty array).
        randbytes (Callable[[int], bytes]): Source of random bytes. (default: :func:`os.urandom`)
    """
    if count <= 0:
        return np.zeros(0, dtype=np.float64)
    pairs = (count + 1) // 2
    bits = np.frombuffer(randbytes(16 * pairs), dtype="<u8") >> np.uint64(11)
    u = (bits.astype(np.float64) + 1.0) * _UNIT  # in (0, 1]: the log below is finite
    radius = np.sqrt(-2.0 * np.log(u[:pairs]))
    angle = _TWO_PI * u[pairs:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]
