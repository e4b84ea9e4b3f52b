r"""Feature reconstruction of peers' nodes from FedSage+'s cross-owner feature gradients.

Peer :math:`j` answers owner :math:`i`'s generated vectors :math:`\tilde{x}` with
:math:`g_j = \frac{2}{d}(\tilde{x} - x_{u^*_j})`, :math:`u^*_j` its node nearest to
:math:`\tilde{x}`. Owner :math:`i` knows :math:`\tilde{x}` (it generated it), so

* from an **individual** gradient (plaintext ``peer_sum``) it recovers
  :math:`x_{u^*_j} = \tilde{x} - \frac{d}{2} g_j` exactly, for every generated vector;
* from the **sum** over its :math:`M-1` peers (masked ``peer_sum``) it recovers only
  :math:`\frac{1}{M-1}\sum_j x_{u^*_j}`, which it takes as its estimate of every peer's row.

**Metric** (``recovery``): over every (generated vector, peer) pair of the adversary's own
steps, the share whose estimate equals the peer's true matched row :math:`x_{u^*_j}` (relative
L2 error below :obj:`tolerance`); the auditor recomputes :math:`u^*_j` from the peers' data.
0 = chance (an adversary that learned nothing names no row). Details: the estimate's cosine to
the true row, and for binary features the ROC-AUC of the estimate's entries for the true row's
non-zeros (``entry_auc``: what a sum still says about which features occur).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.metrics import roc_auc

TAG = "fedsage/feature_grad"


def estimates(adv: AdversaryContext, pid: str) -> tuple[list[tuple[torch.Tensor, dict[str, torch.Tensor]]], str]:
    """Per own step: (the generated vectors, {peer or "*": the estimated matched rows}), and the source."""
    sent = {r: x.double() for r, x in adv.view.own_state(pid, "sent_generated", []) or []}
    d = adv.run.num_features
    individual: dict[int, dict[str, torch.Tensor]] = {}
    for rec in adv.view.records(TAG, received=True):
        if rec.receiver != pid or rec.round not in sent:
            continue
        t = adv.view.decode(rec)
        if t is None or set(t) != {"x"}:
            continue
        individual.setdefault(rec.round, {})[rec.sender] = sent[rec.round] - d / 2 * t["x"].double().view(-1, d)
    if individual:
        return [(sent[r], est) for r, est in sorted(individual.items())], "individual"
    out = []
    for r, peers, g in adv.view.own_state(pid, "feature_grad_sum", []) or []:
        if r in sent:
            out.append((sent[r], {"*": sent[r] - d / 2 * g.double().view(-1, d) / peers}))
    return out, "sum"


@register_attack
class GeneratorReconstruction(Attack):
    """A curious owner rebuilds its peers' node features from the gradients on its generated vectors.

    Args:
        tolerance (float): Relative L2 error below which a row counts as recovered. (default: ``0.01``)
    """

    name = "generator_reconstruction"
    metric = "recovery"
    metric_doc = "share of (generated vector, peer) pairs whose matched peer row the owner recovers exactly"
    chance = 0.0
    defaults: ClassVar[Mapping[str, Any]] = {"tolerance": 0.01}
    payload_tags = (TAG,)
    #: FedSage+ keeps its owners' generator views only when asked (they grow as M² per step)
    own_state_options: ClassVar[Mapping[str, Mapping[str, Any]]] = {"fedsage_plus": {"keep_generator_views": True}}

    def supports(self, ctx: AdversaryContext) -> Support:
        if ctx.run.method != "fedsage_plus":
            return Support(False, "only FedSage+ sends cross-owner feature gradients")
        if len(ctx.view.clients) != 1:
            return Support(False, "needs exactly one adversarial owner (the target of its gradient sums)")
        if ctx.view.own_state(ctx.view.clients[0], "sent_generated") is None:
            return Support(False, "the owner kept no generated vectors (no federated NeighGen phase, or a run "
                                  "without keep_generator_views, which `securefg audit` sets)")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        adv, truth = ctx.adversary, ctx.truth
        pid = adv.view.clients[0]
        steps, source = estimates(adv, pid)
        if not steps:
            return blind_outcome(self.chance, f"no {TAG!r} result in the owner's view", source=source)
        peers = [c for c in truth.clients if c != pid]
        tables = {p: truth.task.clients[truth.index(p)].x.double() for p in peers}
        binary = all(bool(((t == 0) | (t == 1)).all()) for t in tables.values())
        hits, cos, scores, labels = [], [], [], []
        for generated, est in steps:
            for p in peers:
                true = tables[p][torch.cdist(generated, tables[p]).argmin(1)]  # the auditor's u*_p
                guess = est.get(p, est.get("*"))
                if guess is None:
                    continue
                err = (guess - true).norm(dim=1) / true.norm(dim=1).clamp(min=1e-12)
                hits.append(err < self.params["tolerance"])
                cos.append(F.cosine_similarity(guess, true, dim=1))
                if binary:
                    scores.append(guess.flatten())
                    labels.append(true.flatten())
        hit = torch.cat(hits).double()
        details: dict[str, Any] = {"source": source, "pairs": int(hit.numel()), "mean_cosine": float(torch.cat(cos).mean())}
        if binary:
            details["entry_auc"] = roc_auc(torch.cat(labels), torch.cat(scores))
        return AttackOutcome(value=float(hit.mean()), chance=self.chance, details=details,
                             note=("each peer's gradient on its own returns the matched rows" if source == "individual"
                                   else "only the sum over peers reaches the owner: their mean row, not a row"))
