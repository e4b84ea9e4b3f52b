r"""Label-distribution inference from the output layer of one client's update (iDLG-style).

For a softmax classifier with cross-entropy, the gradient of the output layer at node (graph)
:math:`v` is :math:`(p_v - y_v) h_v^\top` for the weight and :math:`p_v - y_v` for the bias. Summed
over a client's training set, a class :math:`c` the client holds *more* of than the model predicts
has a negative bias gradient and, since :math:`h_v \ge 0` after ReLU, a weight row whose entries
are mostly negative (Zhao et al., iDLG, 2020, https://arxiv.org/abs/2001.02610; Wainakh et al.,
"User-Level Label Leakage from Gradients", PETS 2022, https://arxiv.org/abs/2105.09369). An
update :math:`\Delta = -\text{step}(g)` flips the sign; with Adam (our clients' optimizer) a
one-step update is :math:`-\eta\, g / (|g| + \epsilon)`, i.e. exactly the sign, so the attack
uses signs only:

.. math::
    s_{k,c} = \operatorname{mean}_j \operatorname{sign}(\Delta W^{(k)}_{c,j})
              + \operatorname{sign}(\Delta b^{(k)}_c)

**Metric** (``auc``): for each class, the ROC-AUC of :math:`s_{k,c}` across target clients,
where a client is positive when the class's share of its training labels exceeds the class's
mean share over all clients ("which clients hold more of class c than the others do?"); the
mean over classes (:func:`~securefg.attacks.metrics.stratified_auc`). 0.5 = chance. With only
the round's mean update (secure aggregation) every client gets the same scores and the AUC is
0.5 exactly. Details: the pooled AUC over all pairs, ``majority_accuracy`` (does the top score
name the client's most frequent class) and which estimate (individual / mean) was used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import AdversaryContext, AttackOutcome, Challenge, GroundTruth, register_attack
from securefg.attacks.update_probe import UpdateProbe
from securefg.attacks.updates import UpdateProfile, output_layer


def training_labels(truth: GroundTruth, cid: str) -> torch.Tensor:
    """A client's training labels (node task: ``y[train_mask]``; graph task: its train graphs)."""
    k = truth.index(cid)
    task = truth.task
    if getattr(task, "kind", "") == "node":
        d = task.clients[k]
        return d.y[d.train_mask].long()
    return torch.tensor([int(g.y.view(-1)[0]) for g in task.train[k]], dtype=torch.long)


def label_shares(truth: GroundTruth, num_classes: int) -> dict[str, torch.Tensor]:
    out = {}
    for cid in truth.clients:
        y = training_labels(truth, cid)
        out[cid] = torch.bincount(y, minlength=num_classes).double() / max(int(y.numel()), 1)
    return out


@register_attack
class LabelInference(UpdateProbe):
    """Which classes a client over-represents, from the sign of its output-layer update.

    Args:
        rounds (list[int]): Rounds whose updates are used (``[]`` = every round). (default: ``[0]``,
            the first, one-step update)
    """

    name = "label_inference"
    metric_doc = "per-class ROC-AUC across clients (mean): which clients hold more of the class than average"
    defaults: ClassVar[Mapping[str, Any]] = {"rounds": [0]}
    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        shares = label_shares(truth, adv.run.num_classes)
        mean = torch.stack(list(shares.values())).mean(0)
        items, labels = [], []
        for cid in adv.targets:
            for c in range(adv.run.num_classes):
                items.append((cid, c))
                labels.append(float(shares[cid][c] > mean[c] + 1e-12))
        majority = {cid: int(shares[cid].argmax()) for cid in adv.targets}
        return Challenge(items, torch.tensor(labels), info={"_majority": majority})

    def score_update(self, delta: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor],
                     adv: AdversaryContext, profile: UpdateProfile) -> torch.Tensor | None:
        names = output_layer({k: v for k, v in delta.items() if k.startswith(profile.head)})
        if names is None:
            return None
        return torch.sign(delta[names[0]]).mean(1) + torch.sign(delta[names[1]])

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        hits = []
        for cid, true_c in challenge.info["_majority"].items():
            mine = [(float(s), c) for (k, c), s in zip(challenge.items, scores.tolist(), strict=True) if k == cid]
            best = max(mine)[1] if mine and len({s for s, _ in mine}) > 1 else -1
            hits.append(float(best == true_c))
        return self.stratified_outcome(challenge, scores, majority_accuracy=sum(hits) / max(len(hits), 1),
                                       majority_chance=1.0 / max(len({c for _, c in challenge.items}), 1))
