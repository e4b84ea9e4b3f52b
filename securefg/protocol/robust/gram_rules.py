r"""Robust rules that need only the inputs' Gram matrix (inner products), not the inputs.

The key holder of :mod:`~securefg.protocol.robust.ckks_robust` decrypts
:math:`G_{ab} = \langle x_a, x_b\rangle` for every pair of pseudonymous updates, never an update
itself. Pairwise squared distances follow as :math:`D_{ab} = G_{aa} + G_{bb} - 2G_{ab}` and norms
as :math:`\sqrt{G_{aa}}`, which is all that multi-Krum (Blanchard et al., "Machine Learning with
Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS 2017,
https://arxiv.org/abs/1703.02757; El Mhamdi et al., ICML 2018) and a norm bound (Sun et al.,
2019, https://arxiv.org/abs/1911.07963) need. Each rule returns one coefficient per input in
``[0, 1]``: 0 drops it, a value below 1 scales it down to the norm bound. ``norm_filter`` drops
an input whose norm exceeds ``norm_factor`` times the median norm instead of scaling it: its
coefficients are 0 or 1, so a masked sum can apply it (a dropped client is never asked for its
masked input) where a scaled one would need each client to scale its own input.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from securefg.errors import InvalidInputError

GRAM_RULES = ("krum", "norm", "norm_filter")
#: Rules whose coefficients are 0 or 1 (a masked sum can carry them: keep or drop a client).
SELECTING_RULES = ("krum", "norm_filter")


def trim_problems(trim: Any) -> list[str]:
    """A config problem unless ``trim`` is a number in ``[0, 0.5)`` (a share a robust rule drops)."""
    if not isinstance(trim, (int, float)) or isinstance(trim, bool) or not 0 <= trim < 0.5:
        return [f"trim must be a number in [0, 0.5), got {trim!r}"]
    return []


def selecting_rule_problems(rule: Any, norm_factor: Any) -> list[str]:
    """Config problems of a keep-or-drop rule (``masked_robust``, ``blind_robust``,
    ``plaintext_krum``): one of :data:`SELECTING_RULES`; ``norm_factor`` is the norm filter's
    threshold (> 0) and must stay 0 under multi-Krum, which keeps or drops only."""
    if rule not in SELECTING_RULES:
        return [(f"rule must be one of {list(SELECTING_RULES)} (a norm bound that scales needs ckks_robust), "
                 f"got {rule!r}")]
    if not isinstance(norm_factor, (int, float)) or isinstance(norm_factor, bool) or not 0 <= norm_factor < math.inf:
        return [f"norm_factor must be a number >= 0, got {norm_factor!r}"]
    if rule == "norm_filter" and norm_factor <= 0:
        return ["rule 'norm_filter' needs norm_factor > 0 (the threshold, times the median norm)"]
    if rule == "krum" and norm_factor > 0:
        return ["norm_factor applies to rule 'norm_filter'; multi-Krum here keeps or drops only"]
    return []


def tolerated(n: int, trim: float) -> int:
    """How many inputs multi-Krum drops: ``ceil(trim * n)``, at most ``(n - 3) // 2``, Krum's own
    condition ``n >= 2f + 3`` (Blanchard et al.): with 3 or 4 clients it drops none, since no
    majority of neighbours could then vouch for an input (it would drop an honest one every round)."""
    return max(0, min(math.ceil(trim * n - 1e-9), (n - 3) // 2))


def squared_distances(gram: torch.Tensor) -> torch.Tensor:
    """``D[a, b] = G[a, a] + G[b, b] - 2 G[a, b]``, clamped at 0 (CKKS noise can dip below)."""
    d = torch.diagonal(gram)
    return (d.unsqueeze(0) + d.unsqueeze(1) - 2 * gram).clamp_min(0.0)


def krum_scores(gram: torch.Tensor, f: int) -> torch.Tensor:
    """Each input's sum of squared distances to its ``max(1, n - f - 2)`` nearest other inputs.

    An input far from every other (a boosted or sign-flipped update) scores high even when the
    honest inputs differ from each other (non-IID clients): only its nearest neighbours count.
    """
    n = gram.shape[0]
    if n < 2:
        return torch.zeros(n, dtype=gram.dtype)
    dist = squared_distances(gram)
    dist.fill_diagonal_(float("inf"))
    k = max(1, n - f - 2)
    return dist.sort(dim=1).values[:, :k].sum(1)


def norm_coefficients(gram: torch.Tensor, keep: torch.Tensor, factor: float) -> torch.Tensor:
    """``min(1, tau / ||x_a||)`` with ``tau = factor *`` the median norm of the kept inputs
    (``factor <= 0``: all ones). No single input can raise the median."""
    n = gram.shape[0]
    ones = torch.ones(n, dtype=gram.dtype)
    if factor <= 0 or not bool(keep.any()):
        return ones
    norms = torch.diagonal(gram).clamp_min(0.0).sqrt()
    tau = factor * float(norms[keep].median())
    return torch.where(norms > tau, tau / norms.clamp_min(1e-300), ones)


def norm_filter(gram: torch.Tensor, factor: float) -> torch.Tensor:
    """Keep the inputs whose norm is at most ``factor`` times the median norm (all of them when
    fewer than three: a median of two is one of them). One input cannot raise the median, so a
    boosted update (sign flip x10, model replacement) is dropped while honest inputs of the
    usual spread are kept."""
    n = gram.shape[0]
    if n < 3 or factor <= 0:
        return torch.ones(n, dtype=torch.bool)
    norms = torch.diagonal(gram).clamp_min(0.0).sqrt()
    return norms <= factor * float(norms.median())


def gram_coefficients(gram: torch.Tensor, *, rule: str, trim: float, norm_factor: float) -> torch.Tensor:
    """One coefficient per input: multi-Krum's selection (``"krum"``: keep the ``n - f`` lowest
    scores, ``f = tolerated(n, trim)``), all (``"norm"``) or those within ``norm_factor`` times
    the median norm (``"norm_filter"``), times the norm bound's factors (not for
    ``"norm_filter"``, whose factor is its threshold).

    Raises:
        InvalidInputError: A Gram matrix that is not square, symmetric within CKKS noise, finite,
            or has a negative diagonal beyond noise.
    """
    check_gram(gram)
    n = gram.shape[0]
    if rule == "krum":
        f = tolerated(n, trim)
        keep = torch.zeros(n, dtype=torch.bool)
        keep[krum_scores(gram, f).argsort()[: n - f]] = True
    elif rule == "norm":
        keep = torch.ones(n, dtype=torch.bool)
    elif rule == "norm_filter":
        return norm_filter(gram, norm_factor).to(gram.dtype)
    else:
        raise InvalidInputError(f"unknown Gram rule {rule!r} (choices: {list(GRAM_RULES)})")
    return keep.to(gram.dtype) * norm_coefficients(gram, keep, norm_factor)


def check_gram(gram: torch.Tensor) -> None:
    """Refuse what no set of real vectors has as its Gram matrix (a tampered or overflowed one).

    Raises:
        InvalidInputError: Naming the problem.
    """
    if gram.dim() != 2 or gram.shape[0] != gram.shape[1] or gram.shape[0] == 0:
        raise InvalidInputError(f"a Gram matrix must be square and non-empty, got shape {tuple(gram.shape)}")
    if not bool(torch.isfinite(gram).all()):
        raise InvalidInputError("the Gram matrix holds NaN or Inf")
    scale = float(torch.diagonal(gram).abs().max()) + 1e-12
    if float(torch.diagonal(gram).min()) < -1e-3 * scale:
        raise InvalidInputError("the Gram matrix has a negative squared norm: an input overflowed CKKS or was tampered")
    if float((gram - gram.T).abs().max()) > 1e-3 * scale:
        raise InvalidInputError("the Gram matrix is not symmetric")


__all__ = [
    "GRAM_RULES",
    "SELECTING_RULES",
    "check_gram",
    "gram_coefficients",
    "krum_scores",
    "norm_coefficients",
    "norm_filter",
    "selecting_rule_problems",
    "squared_distances",
    "tolerated",
    "trim_problems",
]
