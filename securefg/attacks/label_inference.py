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

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    Challenge,
    GroundTruth,
    Support,
    register_attack,
)
from securefg.attacks.metrics import stratified_auc
from securefg.attacks.updates import UpdateSource, output_layer, profile_for, round_payloads


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
class LabelInference(Attack):
    """Which classes a client over-represents, from the sign of its output-layer update.

    Args:
        rounds (list[int]): Rounds whose updates are used (``[]`` = every round). (default: ``[0]``,
            the first, one-step update)
    """

    name = "label_inference"
    metric = "auc"
    metric_doc = "per-class ROC-AUC across clients (mean): which clients hold more of the class than average"
    defaults: ClassVar[Mapping[str, Any]] = {"rounds": [0]}
    payload_tags = ("fedavg/model", "fedavg/update", "cefgc/init", "cefgc/weights", "fedstruct/model", "fedstruct/update")

    @classmethod
    def payloads(cls, params: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """Only the probed rounds' broadcasts and uploads (FedStruct's carry ∇S: megabytes each)."""
        return round_payloads(list(params["rounds"]))

    def supports(self, ctx: AdversaryContext) -> Support:
        prof = profile_for(ctx.view.tags())
        if prof is None:
            return Support(False, "no model-averaging update in the adversary's view")
        if not ctx.targets:
            return Support(False, "every client is in the adversary: no target")
        if ctx.view.missing_payloads(prof.model_tag, list(self.params["rounds"]) or None):
            return Support(False, f"payloads of {prof.model_tag!r} were not kept")
        return Support(True)

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

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        prof = profile_for(adv.view.tags())
        assert prof is not None
        src = UpdateSource(adv.view, prof)
        rounds = list(self.params["rounds"]) or src.rounds
        rounds = [r for r in rounds if src.reference(r) is not None]
        scores: dict[tuple[str, int], float] = {}
        self._kinds: set[str] = set()
        for cid in {c for c, _ in items}:
            acc: torch.Tensor | None = None
            used = 0
            for r in rounds:
                delta, kind = src.estimate(r, cid, adv.run.clients)
                self._kinds.add(kind)
                if delta is None:
                    continue
                names = output_layer({k: v for k, v in delta.items() if k.startswith(prof.head)})
                if names is None:
                    continue
                w, b = delta[names[0]], delta[names[1]]
                s = torch.sign(w).mean(1) + torch.sign(b)
                acc = s if acc is None else acc + s
                used += 1
            for c in range(adv.run.num_classes):
                scores[(cid, c)] = float(acc[c] / used) if acc is not None and used else 0.0
        return torch.tensor([scores[i] for i in items], dtype=torch.float64)

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        majority = challenge.info["_majority"]
        hits = []
        for cid, true_c in majority.items():
            mine = [(float(s), c) for (k, c), s in zip(challenge.items, scores.tolist(), strict=True) if k == cid]
            best = max(mine)[1] if mine and len({s for s, _ in mine}) > 1 else -1
            hits.append(float(best == true_c))
        base = super().evaluate(Challenge(challenge.items, challenge.labels), scores)
        kinds = sorted(getattr(self, "_kinds", set()))
        note = ""
        if kinds == ["mean"]:
            note = "only the round's mean update was available: every client gets the same scores"
        elif kinds == ["none"]:
            note = "no update of any target could be reconstructed from the view"
        value = stratified_auc(challenge.labels, scores, [c for _, c in challenge.items])
        return AttackOutcome(
            value=self.chance if math.isnan(value) else value,
            chance=self.chance,
            details={**base.details, "pooled_auc": base.value, "majority_accuracy": sum(hits) / max(len(hits), 1),
                     "majority_chance": 1.0 / max(len({c for _, c in challenge.items}), 1), "estimate": kinds},
            roc=base.roc, note=note,
        )
