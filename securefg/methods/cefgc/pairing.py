"""CeFGC+'s averaging of packages: the paper's pairs (Eq. 11-12), the leak they open, and groups.

The server turns the similarity matrix it learned into a *mix plan* and the relay forwards
every other client's mixed package to each client.

**Pairs** (``mix_peers = 1``, the paper): the package of client ``i`` is replaced by
``(theta_i + theta_j*) / 2`` with ``j* = argmax_{j != i} cos(theta_i, theta_j)``. The leak,
measurable with :func:`recover_partners` and :func:`partner_recovery`: if client ``i`` is the
partner of ``j`` (``j* (j) = i``), then ``theta_j = 2 * mix_j - theta_i``, and ``i`` knows
``theta_i``. For mutual nearest neighbours (always the case with 2 or 3 clients for at least
one pair) both partners recover each other exactly.

**Groups** (``mix_peers = m >= 2``, our default; :func:`similarity_groups`): the clients are
partitioned into groups of at least ``m + 1`` similar clients and *every* member's package is
replaced by its group's mean. Any member's view then holds one equation per group (all
members' mixes are equal), so client ``i`` learns only the sum of its ``>= m`` group peers and
other groups' means, never one peer's package. Overlapping groups (each client averaged with
its own nearest peers) would not do: the received mixes form a linear system a client can solve
when they are independent. With 2 clients no averaging can hide the peer (``mean * 2 - own``).

A class held by only some of a group (CeFGC, presence-weighted) is averaged over those only; a
class one member alone holds passes through unmixed (the dense package's presence weighting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from securefg.errors import InvalidInputError

#: The server pairs on cosines rounded to this grid: the key holder's flooding noise (~1e-6)
#: and CKKS error then flip a pairing only when a cosine sits at a grid boundary, instead of
#: at every near-tie (shared-init models can be within 1e-5 of each other).
PAIRING_GRID = 1e-3


def nearest_partners(order: Sequence[str], similarity: torch.Tensor, *, grid: float = PAIRING_GRID) -> dict[str, str]:
    """``j* = argmax_{j != i} sim[i, j]`` for every client, on ``grid``-rounded values (ties: lowest index)."""
    n = len(order)
    if similarity.shape != (n, n):
        raise InvalidInputError(f"similarity matrix of shape {tuple(similarity.shape)} for {n} clients")
    if n < 2:
        raise InvalidInputError("CeFGC+ pair averaging needs at least 2 clients")
    sim = torch.round(similarity.clone().double() / grid)
    sim.fill_diagonal_(float("-inf"))
    return {order[i]: order[int(torch.argmax(sim[i]))] for i in range(n)}


def mix_plan(partners: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Output ``i`` = ``(item_i + item_{partner(i)}) / 2``: the public coefficients the server uses."""
    return {i: {i: 0.5, j: 0.5} for i, j in partners.items()}


def similarity_groups(order: Sequence[str], similarity: torch.Tensor, *, size: int,
                      grid: float = PAIRING_GRID) -> list[list[str]]:
    """Partition the clients into ``max(1, n // size)`` groups of at least ``size`` (or all ``n``).

    Greedy and deterministic: the lowest-index client not yet placed takes its ``size - 1`` most
    similar unplaced peers (``grid``-rounded cosines, ties to the lowest index); the last group
    takes everyone left (``size`` to ``2 * size - 1`` clients).

    Raises:
        InvalidInputError: ``size < 2`` or a similarity matrix of the wrong shape.
    """
    n = len(order)
    if similarity.shape != (n, n):
        raise InvalidInputError(f"similarity matrix of shape {tuple(similarity.shape)} for {n} clients")
    if size < 2:
        raise InvalidInputError(f"a mixing group holds at least 2 clients, got size {size}")
    sim = torch.round(similarity.clone().double() / grid)
    left = list(range(n))
    groups: list[list[int]] = []
    for _ in range(max(1, n // size) - 1):
        seed = left.pop(0)
        peers = sorted(left, key=lambda j: (-float(sim[seed, j]), j))[: size - 1]
        left = [j for j in left if j not in peers]
        groups.append(sorted([seed, *peers]))
    groups.append(left)
    return [[order[i] for i in g] for g in groups]


def group_mix_plan(groups: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Output ``i`` = the mean of ``i``'s group (the same for every member)."""
    return {i: {j: 1.0 / len(g) for j in g} for g in groups for i in g}


def recover_partners(own: Mapping[str, torch.Tensor], received: Sequence[Mapping[str, torch.Tensor]], *,
                     group_sizes: Sequence[int] = (2,)) -> list[dict[str, torch.Tensor]]:
    """From one client's view: ``(g * mix - own) / (g - 1)`` for every received mix and size ``g``.

    For ``g = 2`` that is ``2 * mix - own``: for the pair whose mix included this client's own
    model, the result *is* the partner's package (exactly under plaintext mixing, up to CKKS
    error under HE). For a group of ``g`` it is the mean of the ``g - 1`` peers, the best guess
    of any one of them from their sum. Other candidates are garbage, which the client cannot
    always tell apart, but an auditor with ground truth can.
    """
    return [{k: (g * m[k].double() - own[k].double()) / (g - 1) for k in own} for m in received for g in group_sizes]


def _flat(pkg: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([pkg[k].double().flatten() for k in sorted(pkg)])


def partner_recovery(
    own: Mapping[str, torch.Tensor],
    received: Sequence[Mapping[str, torch.Tensor]],
    truths: Mapping[str, Mapping[str, torch.Tensor]],
    *,
    group_sizes: Sequence[int] = (2,),
) -> dict[str, Any]:
    """Audit: how well does ``2 * mix - own`` (or a group's version) reproduce another client's package?

    Args:
        own: The attacking client's own dense package (what it uploaded).
        received: The mixed packages it received (decrypted).
        truths: Ground truth, the other clients' own packages (the auditor's knowledge).
        group_sizes: Group sizes the attacker tries (:func:`recover_partners`). (default: ``(2,)``)

    Returns:
        dict: ``best_relative_error`` (smallest ``||cand - truth|| / ||truth||`` over every
        candidate and every other client), ``recovered`` (the client it matched) and
        ``per_candidate`` errors.
    """
    per = []
    best = (float("inf"), "")
    for cand in recover_partners(own, received, group_sizes=group_sizes):
        c = _flat(cand)
        errs = {pid: float((c - _flat(t)).norm() / _flat(t).norm().clamp(min=1e-30)) for pid, t in truths.items()}
        pid = min(errs, key=errs.__getitem__)
        per.append({"closest": pid, "relative_error": errs[pid]})
        if errs[pid] < best[0]:
            best = (errs[pid], pid)
    return {"best_relative_error": best[0], "recovered": best[1], "per_candidate": per}


__all__ = ["group_mix_plan", "mix_plan", "nearest_partners", "partner_recovery", "recover_partners", "similarity_groups"]
