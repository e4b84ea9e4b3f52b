r"""Robust rules over subgroup means: coordinate median, trimmed mean, norm-bounded mean.

Pure functions over a ``[G, L]`` matrix of subgroup means (Yin et al., "Byzantine-Robust
Distributed Learning", ICML 2018, https://arxiv.org/abs/1803.01498, for the coordinate rules;
Sun et al., "Can You Really Backdoor Federated Learning?", 2019, https://arxiv.org/abs/1911.07963,
for norm bounding). With one malicious client among ``G >= 3`` subgroups, at most one row is
poisoned, so the median and the trimmed mean (one row cut per end) ignore it coordinate-wise.
"""

from __future__ import annotations

import math

import torch

RULES = ("median", "trimmed", "norm", "closest")


def coordinate_median(means: torch.Tensor) -> torch.Tensor:
    """Per coordinate, the median of the rows (the mean of the middle two for an even count)."""
    s = means.sort(0).values
    g = s.shape[0]
    return s[g // 2] if g % 2 else (s[g // 2 - 1] + s[g // 2]) / 2


def trimmed_mean(means: torch.Tensor, trim: float) -> torch.Tensor:
    """Per coordinate, the mean after cutting ``ceil(trim * G)`` rows at each end (at least one
    once ``trim > 0``, at most ``(G - 1) // 2``)."""
    g = means.shape[0]
    cut = min(math.ceil(trim * g - 1e-9), (g - 1) // 2)
    s = means.sort(0).values
    return s[cut : g - cut].mean(0)


def row_norms_bounded(means: torch.Tensor, factor: float) -> torch.Tensor:
    r"""Rows scaled down to norm at most ``factor`` times the median row norm (``factor <= 0``: as is).

    The median norm is a bound no single poisoned row can raise: a boosted subgroup mean
    :math:`m_g` becomes :math:`m_g \cdot \min(1, \tau / \|m_g\|)`.
    """
    if factor <= 0 or means.shape[0] == 0:
        return means
    norms = means.norm(dim=1)
    tau = factor * float(norms.median())
    scale = torch.where(norms > tau, tau / norms.clamp_min(1e-300), torch.ones_like(norms))
    return means * scale.unsqueeze(1)


def norm_bounded_mean(means: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The ``weights``-weighted mean of the rows (call after :func:`row_norms_bounded`)."""
    w = weights.to(means.dtype)
    return (means * w.unsqueeze(1)).sum(0) / w.sum()


def closest_mean(means: torch.Tensor, weights: torch.Tensor, trim: float) -> torch.Tensor:
    """The weighted mean of the rows left after dropping the ``ceil(trim * G)`` rows (at most
    ``(G - 1) // 2``) farthest in L2 from the coordinate median: a poisoned row pulling in a
    consistent direction is removed whole, not one order statistic per coordinate."""
    g = means.shape[0]
    cut = min(math.ceil(trim * g - 1e-9), (g - 1) // 2)
    far = (means - coordinate_median(means)).norm(dim=1)
    keep = far.argsort()[: g - cut]
    return norm_bounded_mean(means[keep], weights[keep])


def robust_mean(means: torch.Tensor, weights: torch.Tensor, *, rule: str, trim: float = 0.2,
                norm_factor: float = 1.0) -> torch.Tensor:
    """Norm-bound the rows, then apply ``rule`` (``"median"``, ``"trimmed"``, ``"norm"`` or ``"closest"``)."""
    bounded = row_norms_bounded(means, norm_factor)
    if rule == "median":
        return coordinate_median(bounded)
    if rule == "trimmed":
        return trimmed_mean(bounded, trim)
    if rule == "norm":
        return norm_bounded_mean(bounded, weights)
    if rule == "closest":
        return closest_mean(bounded, weights, trim)
    raise ValueError(f"unknown robust rule {rule!r} (choices: {RULES})")


__all__ = ["RULES", "closest_mean", "coordinate_median", "norm_bounded_mean", "robust_mean", "row_norms_bounded", "trimmed_mean"]
