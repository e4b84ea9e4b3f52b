"""Attack metrics as pure functions over scores and hidden labels (sklearn underneath).

Shaped like PyG's ``explain/metric/basic.py``: no state, no I/O, one number (or one curve) out.
Every attack in :mod:`securefg.attacks` reports one of these as its primary metric; the
convention everywhere is *higher = the attack did better*, so a threat model's budget is always
an upper bound (``max_auc = 0.6``).

* :func:`roc_auc`: area under the ROC curve of membership/edge/label scores; 0.5 is chance.
* :func:`tpr_at_fpr`: true-positive rate at a low false-positive rate (Carlini et al., "Membership
  Inference Attacks From First Principles", S&P 2022, https://arxiv.org/abs/2112.03570), the
  number that says whether an attack is *confidently* right about some members.
* :func:`roc_points`: a downsampled ROC curve for plots.
* :func:`stratified_auc`: the mean AUC within groups (per class, per feature), the per-individual
  question that a shared aggregate cannot answer.
* :func:`cosine_similarity`: reconstruction quality of a vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.metrics import roc_auc_score, roc_curve

ArrayLike = Sequence[float] | Sequence[int] | np.ndarray | torch.Tensor


def _np(x: ArrayLike) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy().reshape(-1)
    return np.asarray(x, dtype=np.float64).reshape(-1)


def _check(labels: ArrayLike, scores: ArrayLike) -> tuple[np.ndarray, np.ndarray] | None:
    y, s = _np(labels), _np(scores)
    if y.shape != s.shape:
        raise ValueError(f"labels and scores differ in length: {y.size} vs {s.size}")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or Inf; an attack must return finite scores")
    if y.size == 0 or len(np.unique(y)) < 2:
        return None
    return y, s


def roc_auc(labels: ArrayLike, scores: ArrayLike) -> float:
    """ROC-AUC of ``scores`` for binary ``labels`` (1 = member / edge / positive).

    Returns ``nan`` when only one class is present (the AUC is undefined, not 0.5).
    """
    checked = _check(labels, scores)
    if checked is None:
        return float("nan")
    return float(roc_auc_score(*checked))


def tpr_at_fpr(labels: ArrayLike, scores: ArrayLike, fpr: float = 0.01) -> float:
    """Largest true-positive rate whose false-positive rate is at most ``fpr``.

    With fewer than ``1 / fpr`` negatives the smallest achievable non-zero FPR exceeds ``fpr``, so
    only thresholds above every negative count (the strict reading of "at 1% FPR").
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    checked = _check(labels, scores)
    if checked is None:
        return float("nan")
    f, t, _ = roc_curve(*checked)
    ok = f <= fpr + 1e-12
    return float(t[ok].max()) if ok.any() else 0.0


def roc_points(labels: ArrayLike, scores: ArrayLike, *, max_points: int = 200) -> tuple[list[float], list[float]]:
    """ROC curve ``(fpr, tpr)``, thinned to at most ``max_points`` points, for plotting."""
    checked = _check(labels, scores)
    if checked is None:
        return [], []
    f, t, _ = roc_curve(*checked)
    if f.size > max_points:
        idx = np.unique(np.linspace(0, f.size - 1, max_points).round().astype(int))
        f, t = f[idx], t[idx]
    return [float(v) for v in f], [float(v) for v in t]


def stratified_auc(labels: ArrayLike, scores: ArrayLike, groups: Sequence[object]) -> float:
    """Mean ROC-AUC within groups that hold both labels (``nan`` if none does).

    Asks the per-individual question ("*which* client holds this feature / over-represents this
    class?") and ignores what scores reveal about groups as a whole: an aggregate that gives every
    client the same score per group lands at exactly 0.5.
    """
    y, s = _np(labels), _np(scores)
    if y.shape != s.shape or len(groups) != y.size:
        raise ValueError("labels, scores and groups must have the same length")
    by: dict[object, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    aucs = [roc_auc(y[idx], s[idx]) for idx in by.values()]
    aucs = [a for a in aucs if not math.isnan(a)]
    return float(np.mean(aucs)) if aucs else float("nan")


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine of the angle between two flattened tensors (``0.0`` if either is zero)."""
    x, y = a.detach().double().flatten(), b.detach().double().flatten()
    if x.numel() != y.numel():
        raise ValueError(f"cannot compare {x.numel()} values with {y.numel()}")
    denom = float(x.norm() * y.norm())
    return float(x @ y) / denom if denom > 0 else 0.0


def mean_or_nan(values: Sequence[float]) -> float:
    """Mean of the finite values, ``nan`` if there are none."""
    vals = [v for v in values if not math.isnan(v)]
    return float(sum(vals) / len(vals)) if vals else float("nan")


__all__ = ["cosine_similarity", "mean_or_nan", "roc_auc", "roc_points", "stratified_auc", "tpr_at_fpr"]
