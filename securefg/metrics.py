"""Evaluation metrics: accuracy and ROC-AUC (macro one-vs-rest for multi-class)."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import roc_auc_score


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of correct argmax predictions (``nan`` for an empty set)."""
    if y.numel() == 0:
        return float("nan")
    return float((logits.argmax(-1) == y).float().mean())


def roc_auc(logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> float:
    """ROC-AUC of softmax scores; macro one-vs-rest over the classes present when C > 2.

    Returns ``nan`` when fewer than two classes are present (AUC is undefined).
    """
    y_np = y.cpu().numpy()
    present = np.unique(y_np)
    if len(present) < 2:
        return float("nan")
    probs = torch.softmax(logits.float(), -1).cpu().numpy()
    if num_classes == 2:
        return float(roc_auc_score(y_np, probs[:, 1]))
    # Restrict to present classes and renormalise so sklearn's ovr accepts the scores.
    sub = probs[:, present]
    sub = sub / np.clip(sub.sum(1, keepdims=True), 1e-12, None)
    if len(present) == 2:
        return float(roc_auc_score(y_np == present[1], sub[:, 1]))
    return float(roc_auc_score(y_np, sub, multi_class="ovr", labels=present, average="macro"))
