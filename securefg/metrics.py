"""Evaluation metrics: accuracy and ROC-AUC (macro one-vs-rest for multi-class)."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from securefg.errors import InvalidInputError


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of correct argmax predictions (``nan`` for an empty set)."""
    if y.numel() == 0:
        return float("nan")
    return float((logits.argmax(-1) == y).float().mean())


def roc_auc(logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> float:
    """ROC-AUC of softmax scores; macro one-vs-rest over the classes present when C > 2.

    The scores of a multi-class set are the softmax over the *present* classes' logits, in
    float64: the same as renormalising the full softmax, but it cannot underflow to all zeros
    when the model puts all its mass on absent classes (a client head trained on another
    dataset's labels in the across-dataset settings).

    Returns ``nan`` when fewer than two classes are present (AUC is undefined).

    Raises:
        InvalidInputError: Logits that are not ``[n, num_classes]`` or not finite (a diverged model).
    """
    if logits.dim() != 2 or logits.size(0) != y.numel() or logits.size(1) != num_classes:
        raise InvalidInputError(f"logits of shape {tuple(logits.shape)} for {y.numel()} labels of {num_classes} classes")
    if not bool(torch.isfinite(logits).all()):
        raise InvalidInputError("logits contain NaN or inf: the model diverged, its ROC-AUC is undefined")
    y_np = y.cpu().numpy()
    present = np.unique(y_np)
    if len(present) < 2:
        return float("nan")
    if num_classes == 2:
        return float(roc_auc_score(y_np, torch.softmax(logits.double(), -1)[:, 1].cpu().numpy()))
    sub = torch.softmax(logits.double()[:, torch.as_tensor(present, device=logits.device)], -1).cpu().numpy()
    if len(present) == 2:
        return float(roc_auc_score(y_np == present[1], sub[:, 1]))
    return float(roc_auc_score(y_np, sub, multi_class="ovr", labels=present, average="macro"))
