"""Cryptographic shuffling: uniformly random permutations from the OS CSPRNG.

``secrets.SystemRandom().shuffle`` is a Fisher-Yates shuffle whose swaps use ``randbelow`` over
``os.urandom``, so every permutation is equally likely and unpredictable (a seeded Mersenne
Twister has far fewer reachable permutations than n! once n > 2080, and is predictable).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def secure_permutation(n: int, *, rng: secrets.SystemRandom | None = None) -> list[int]:
    """A uniformly random permutation of ``range(n)``.

    Args:
        n (int): Size.
        rng (secrets.SystemRandom, optional): CSPRNG (tests may pass a subclass).
            (default: a fresh :class:`secrets.SystemRandom`)
    """
    perm = list(range(n))
    (rng or secrets.SystemRandom()).shuffle(perm)
    return perm


def secure_shuffle(items: Sequence[T], *, rng: secrets.SystemRandom | None = None) -> list[T]:
    """A shuffled copy of ``items`` (the input is left unchanged)."""
    return [items[i] for i in secure_permutation(len(items), rng=rng)]
