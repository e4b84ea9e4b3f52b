r"""Link inference from FedStruct's node structure features (NSFs) and their gradients.

FedStruct-B shares structure information about *every* node, not only the receiver's:

* **Hop2Vec** (the default): S is learned, and each round the server broadcasts the summed
  gradient :math:`\nabla_S\mathcal{L} = \sum_i \sum_{v \in \tilde V_i} \bar{a}_v\, r_v^\top`
  (pushed through ``g``) in the clear inside ``fedstruct/model`` (notes B5). Row ``u`` is
  column ``u`` of Ā weighted by the labelled nodes' residuals, and adjacent nodes have similar
  columns of Ā. A secure ``aggregate`` hides each client's term but the *sum* is what every
  client needs to update its copy of S, so the server and every client read it.
* **Degree / Node2Vec**: each owner's NSF rows reach every other client through the sealed
  relay (``fedstruct/nsf``; sealed against the server, readable by each recipient, by design).
  Node2Vec rows of adjacent nodes are close by construction.

The adversary scores a candidate edge ``(u, w)`` among nodes it does not own by cosine
similarity: of the per-round, norm-one gradient matrices stacked side by side (Hop2Vec), or of
the NSF rows it holds (the others). The hardened variant (App. L.1) broadcasts no ∇S and shares
no rows, and in FedStruct-A clients get neither: the adversary is then blind (chance). The
FedStruct-A server holds the graph by assumption, so the attack does not apply to it.

**Metric** (``auc``): ROC-AUC over true edges among the target clients' nodes (cross- and
intra-client; both in the details) against as many sampled non-edges. 0.5 = chance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Challenge,
    GroundTruth,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.fedstruct_model import MODEL_TAG
from securefg.attacks.link_stealing import cross_intra_auc, pair_similarity, target_pair_challenge

GRAD_KEY = "nsf_grad"


def gradient_similarity(view: Any, pairs: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Cosine of node rows over every round's norm-one ∇S, stacked; ``(scores, rounds used)``.

    Accumulated per pair (dot products and squared norms), so memory stays ``O(n + pairs)``
    however many rounds there are.
    """
    seen: set[int] = set()
    dot = torch.zeros(pairs.size(1), dtype=torch.float64)
    sq: torch.Tensor | None = None
    for rec in view.records(MODEL_TAG):
        if rec.round in seen or not view.readable(rec):
            continue
        t = view.decode(rec)
        if t is None or GRAD_KEY not in t:
            continue
        seen.add(rec.round)
        g = t[GRAD_KEY].double()
        norm = float(g.norm())
        if norm == 0:  # round 0 broadcasts the zero gradient
            continue
        g = g / norm
        dot += (g[pairs[0]] * g[pairs[1]]).sum(1)
        rows = (g * g).sum(1)
        sq = rows if sq is None else sq + rows
    if sq is None:
        return torch.zeros(pairs.size(1), dtype=torch.float64), 0
    used = len(seen)
    denom = (sq[pairs[0]] * sq[pairs[1]]).sqrt().clamp(min=1e-300)
    return dot / denom, used


@register_attack
class NSFLinkInference(Attack):
    """Infer edges among other clients' nodes from FedStruct's NSFs or their summed gradients.

    Args:
        pairs (int): Edges sampled (and as many non-edges). (default: ``2000``)
        structure_key (str): A client's own-state key of its NSF table. (default: ``"structure"``)
    """

    name = "nsf_link"
    metric = "auc"
    metric_doc = "ROC-AUC of NSF (gradient) similarity: true edges among target nodes vs sampled non-edges"
    defaults: ClassVar[Mapping[str, Any]] = {"pairs": 2000, "structure_key": "structure"}
    payload_tags = (MODEL_TAG,)

    def supports(self, ctx: AdversaryContext) -> Support:
        if not ctx.run.method.startswith("fedstruct"):
            return Support(False, "needs FedStruct (node structure features)")
        if not ctx.targets:
            return Support(False, "every client is in the adversary: no target")
        if "server" in ctx.view.members and ctx.run.options.get("variant") == "A":
            return Support(False, "FedStruct-A: the server holds the global graph by assumption (notes A0)")
        return Support(True)

    def run(self, ctx: AuditContext) -> AttackOutcome:
        adv = ctx.adversary
        source = self._source(adv)
        if source == "none":
            return blind_outcome(self.chance, "no NSF rows of other clients' nodes and no summed NSF gradient "
                                 "in the adversary's view (hardened variant, or variant A's clients)")
        return super().run(ctx)

    def _source(self, adv: AdversaryContext) -> str:
        for rec in adv.view.records(MODEL_TAG):
            t = adv.view.decode(rec)
            if t is not None and GRAD_KEY in t and bool(t[GRAD_KEY].ne(0).any()):
                return "broadcast NSF gradients"
        for pid in adv.view.clients:
            table = adv.view.own_state(pid, self.params["structure_key"])
            gv = adv.view.own_state(pid, "graph_view")
            if isinstance(table, torch.Tensor) and gv is not None and table.size(0) > gv.num_nodes:
                return "shared NSF rows"
        return "none"

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        return target_pair_challenge(truth, adv.targets, int(self.params["pairs"]), generator)

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        self._used = self._source(adv)
        self._rounds = 0
        if self._used == "broadcast NSF gradients":
            scores, self._rounds = gradient_similarity(adv.view, items)
            return scores
        pid = next(p for p in adv.view.clients if adv.view.own_state(p, self.params["structure_key"]) is not None)
        table = adv.view.own_state(pid, self.params["structure_key"]).detach().double()
        return pair_similarity(table, items, "cosine")

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        cross, y = challenge.info["_cross"], challenge.labels
        base = super().evaluate(Challenge(challenge.items, y), scores)
        details = {**base.details, "source": self._used, "rounds_used": self._rounds, **cross_intra_auc(y, scores, cross)}
        return AttackOutcome(base.value, self.chance, details, base.roc)
