"""Public, per-round partition of the clients into subgroups of at least ``k``.

The grouping is drawn from a seed every party can compute (the run seed, tag and round), so the
server cannot steer which clients share a subgroup, and every client can check its own
subgroup before it uploads. Sizes differ by at most one; each is ``>= k``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import torch

from securefg.errors import SubgroupTooSmallError


def grouping_seed(public_seed: str, tag: str, round: int) -> int:
    """A 63-bit seed from ``(public_seed, tag, round)``, length-prefixed so the encoding is unambiguous."""
    h = hashlib.sha256()
    for part in (public_seed.encode(), tag.encode(), str(round).encode()):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return int.from_bytes(h.digest()[:8], "big") >> 1


def partition(clients: Iterable[str], *, k: int, seed: int) -> tuple[tuple[str, ...], ...]:
    """Split ``clients`` into ``len // k`` subgroups of ``>= k`` members, shuffled by ``seed``.

    Args:
        clients (Iterable[str]): Party ids (order does not matter: they are sorted first).
        k (int): Smallest subgroup size.
        seed (int): Public seed of the shuffle (:func:`grouping_seed`).

    Raises:
        SubgroupTooSmallError: ``k < 2`` or fewer than ``k`` clients.
    """
    ids = sorted(set(clients))
    if k < 2:
        raise SubgroupTooSmallError(f"subgroups need k >= 2 (k = 1 would show the server single updates), got k={k}")
    count = len(ids) // k
    if count == 0:
        raise SubgroupTooSmallError(
            f"{len(ids)} clients cannot form a subgroup of k={k}; lower robust_k or add clients")
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed)).tolist()
    groups = tuple(tuple(sorted(ids[j] for j in perm[g::count])) for g in range(count))
    check_sizes(groups, k=k)
    return groups


def check_sizes(groups: Sequence[Sequence[str]], *, k: int) -> None:
    """Refuse any subgroup (planned, or its survivors) with fewer than ``k`` members.

    Raises:
        SubgroupTooSmallError: Naming the subgroup and its size.
    """
    for i, g in enumerate(groups):
        if len(g) < k:
            raise SubgroupTooSmallError(
                f"subgroup {i} has {len(g)} member(s) {sorted(g)}, fewer than k={k}: its sum would expose "
                "too few clients; lower robust_k, add clients, or let fewer clients drop out")


__all__ = ["check_sizes", "grouping_seed", "partition"]
