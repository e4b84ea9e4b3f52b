"""Shamir t-of-k secret sharing of 32-byte secrets over the prime field GF(2^256 + 297).

A secret is any 32-byte string (a self-mask seed or an X25519 private key), read as a
big-endian integer < 2^256 < p, so every secret is a field element without reduction or
folding. ``p = 2^256 + 297`` is the smallest prime above 2^256 (checked in the tests).
Share ``j`` is ``(x_j, f(x_j))`` for a random polynomial ``f`` of degree ``t - 1`` with
``f(0) = secret``; the x-coordinates are public (1 + the holder's index in the round's client
list). Any ``t`` shares give the secret by Lagrange interpolation at 0; fewer reveal nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from securefg.errors import CodecError, InvalidInputError

PRIME = 2**256 + 297
SECRET_BYTES = 32
SHARE_BYTES = 33
"""A share value is < p < 2^257, so 33 big-endian bytes."""


def _random_element(rand: Callable[[int], bytes]) -> int:
    # Rejection sampling from 264-bit strings keeps coefficients exactly uniform mod p.
    while True:
        v = int.from_bytes(rand(33), "big")
        limit = (2**264 // PRIME) * PRIME
        if v < limit:
            return v % PRIME


def split(
    secret: bytes,
    xs: Sequence[int],
    threshold: int,
    *,
    rand: Callable[[int], bytes] = os.urandom,
) -> dict[int, int]:
    """Share ``secret`` among the points ``xs`` so that any ``threshold`` of them recover it.

    Args:
        secret (bytes): The 32-byte secret.
        xs (Sequence[int]): Distinct non-zero x-coordinates, one per holder.
        threshold (int): Shares needed to reconstruct (the polynomial has degree t - 1).
        rand (Callable[[int], bytes]): CSPRNG for the coefficients. (default: ``os.urandom``)

    Returns:
        dict[int, int]: ``{x: f(x)}``.

    Raises:
        InvalidInputError: for a secret of the wrong size, repeated or zero points, or a
            threshold outside ``1..len(xs)``.
    """
    if len(secret) != SECRET_BYTES:
        raise InvalidInputError(f"Shamir secrets are {SECRET_BYTES} bytes, got {len(secret)}")
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise InvalidInputError("Shamir points must be distinct and in 1..p-1")
    if not 1 <= threshold <= len(xs):
        raise InvalidInputError(f"threshold {threshold} must be in 1..{len(xs)} (the number of holders)")
    coeffs = [int.from_bytes(secret, "big")] + [_random_element(rand) for _ in range(threshold - 1)]
    out = {}
    for x in xs:
        acc = 0
        for c in reversed(coeffs):  # Horner
            acc = (acc * x + c) % PRIME
        out[x] = acc
    return out


def reconstruct(shares: Mapping[int, int], threshold: int) -> bytes:
    """Recover the 32-byte secret from at least ``threshold`` shares ``{x: y}``.

    Uses the first ``threshold`` shares (by x) for Lagrange interpolation at 0.

    Raises:
        InvalidInputError: with fewer than ``threshold`` shares.
        CodecError: if the interpolated value is not a 32-byte secret (inconsistent shares).
    """
    if len(shares) < threshold:
        raise InvalidInputError(f"need {threshold} shares to reconstruct, got {len(shares)}")
    points = sorted(shares.items())[:threshold]
    secret = 0
    for i, (xi, yi) in enumerate(points):
        num, den = 1, 1
        for j, (xj, _) in enumerate(points):
            if i != j:
                num = num * (-xj) % PRIME
                den = den * (xi - xj) % PRIME
        secret = (secret + yi * num * pow(den, -1, PRIME)) % PRIME
    if secret >= 2 ** (8 * SECRET_BYTES):
        raise CodecError("shares are inconsistent: the interpolated secret is not 32 bytes")
    return secret.to_bytes(SECRET_BYTES, "big")


def encode_share(y: int) -> bytes:
    """A share value as 33 big-endian bytes."""
    return y.to_bytes(SHARE_BYTES, "big")


def decode_share(data: bytes) -> int:
    """Inverse of :func:`encode_share`, rejecting wrong sizes and values >= p."""
    if len(data) != SHARE_BYTES:
        raise CodecError(f"a share is {SHARE_BYTES} bytes, got {len(data)}")
    y = int.from_bytes(data, "big")
    if y >= PRIME:
        raise CodecError("share value is not a field element (>= p)")
    return y
