"""Gaussian samples from a CSPRNG, for noise that must not be predictable.

DP noise and CKKS noise flooding both need normals an observer cannot reproduce from a seed;
one implementation serves both. Large draws read a ChaCha20 keystream under a fresh key from the
operating system (:func:`keystream`), the construction Linux's ``getrandom`` itself uses, at
about three times ``os.urandom``'s rate: FedSage+'s locally noised generated batches draw
millions of normals per step.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

_TWO_PI = 2.0 * math.pi
_UNIT = 2.0**-53
#: Below this many bytes one ``os.urandom`` call is cheaper than a cipher's setup.
_KEYSTREAM_FROM = 1 << 16


def keystream(count: int) -> bytes:
    """``count`` random bytes: ``os.urandom`` for small requests, else ChaCha20's keystream
    under a fresh 256-bit key from ``os.urandom`` (one key per call, so the zero nonce is never
    reused)."""
    if count < _KEYSTREAM_FROM:
        return os.urandom(count)
    encryptor = Cipher(algorithms.ChaCha20(os.urandom(32), bytes(16)), mode=None).encryptor()
    return encryptor.update(bytes(count))


def csprng_standard_normal(count: int, *, randbytes: Callable[[int], bytes] = keystream) -> np.ndarray:
    """``count`` standard normals: Box-Muller over 53-bit uniforms read from ``randbytes``.

    Args:
        count (int): Number of samples (``<= 0`` gives an empty array).
        randbytes (Callable[[int], bytes]): Source of random bytes. (default: :func:`keystream`)
    """
    if count <= 0:
        return np.zeros(0, dtype=np.float64)
    pairs = (count + 1) // 2
    u = (np.frombuffer(randbytes(16 * pairs), dtype="<u8") >> np.uint64(11)).astype(np.float64)
    u += 1.0  # in place from here on: no further array of the draw's size is allocated
    u *= _UNIT  # in (0, 1]: the log below is finite
    radius, angle = u[:pairs], u[pairs:]
    np.log(radius, out=radius)
    radius *= -2.0
    np.sqrt(radius, out=radius)
    angle *= _TWO_PI
    out = np.empty(2 * pairs, dtype=np.float64)
    np.multiply(radius, np.cos(angle), out=out[:pairs])
    np.sin(angle, out=angle)
    np.multiply(radius, angle, out=out[pairs:])
    return out[:count]
