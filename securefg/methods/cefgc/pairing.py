"""CeFGC+'s pair averaging (Eq. 11-12) and the exact leak it opens (cefgc.md §5).

The server turns the similarity matrix it learned into a *mix plan*: the package of client
``i`` is replaced by ``(theta_i + theta_j*) / 2`` with ``j* = argmax_{j != i} cos(theta_i,
theta_j)``, and the relay forwards every other client's mixed package to each client.

The leak, measurable with :func:`recover_partners` and :func:`partner_recovery`: if client
``i`` is the partner of ``j`` (``j* (j) = i``), then ``theta_j = 2 * mix_j - theta_i``, and
``i`` knows ``theta_i``. For mutual nearest neighbours (always the case with 2 or 3 clients
for at least one pair) both partners recover each other exactly. A class held by only one of
a pair (CeFGC, presence-weighted) passes through unmixed: no averaging protects it at all.
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


def recover_partners(own: Mapping[str, torch.Tensor], received: Sequence[Mapping[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
    """From one client's view: ``2 * mix - own`` for every received mixed package.

    For the package whose mix included this client's own model, the result *is* the partner's
    package (exactly under plaintext mixing, up to CKKS error under HE); for the others it is
    garbage, which the client cannot always tell apart, but an auditor with ground truth can.
    """
    return [{k: 2.0 * m[k].double() - own[k].double() for k in own} for m in received]


def _flat(pkg: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([pkg[k].double().flatten() for k in sorted(pkg)])


def partner_recovery(
    own: Mapping[str, torch.Tensor],
    received: Sequence[Mapping[str, torch.Tensor]],
    truths: Mapping[str, Mapping[str, torch.Tensor]],
) -> dict[str, Any]:
    """Audit: how well does ``2 * mix - own`` reproduce another client's true package?

    Args:
        own: The attacking client's own dense package (what it uploaded).
        received: The mixed packages it received (decrypted).
        truths: Ground truth, the other clients' own packages (the auditor's knowledge).

    Returns:
        dict: ``best_relative_error`` (smallest ``||cand - truth|| / ||truth||`` over every
        candidate and every other client), ``recovered`` (the client it matched) and
        ``per_candidate`` errors.
    """
    per = []
    best = (float("inf"), "")
    for cand in recover_partners(own, received):
        c = _flat(cand)
        errs = {pid: float((c - _flat(t)).norm() / _flat(t).norm().clamp(min=1e-30)) for pid, t in truths.items()}
        pid = min(errs, key=errs.__getitem__)
        per.append({"closest": pid, "relative_error": errs[pid]})
        if errs[pid] < best[0]:
            best = (errs[pid], pid)
    return {"best_relative_error": best[0], "recovered": best[1], "per_candidate": per}


__all__ = ["mix_plan", "nearest_partners", "partner_recovery", "recover_partners"]
