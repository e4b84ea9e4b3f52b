r"""Link inference from FedStruct's node structure features (NSFs) and their gradients.

FedStruct-B shares structure information about *every* node, not only the receiver's:

* **Hop2Vec** (the default): S is learned, and each round every client receives the summed
  gradient :math:`\nabla_S\mathcal{L} = \sum_i \sum_{v \in \tilde V_i} \bar{a}_v\, r_v^\top`
  (pushed through ``g``) from the ``fedstruct/nsf_grad`` shared sum (notes B5). Row ``u`` is
  column ``u`` of Ā weighted by the labelled nodes' residuals, and adjacent nodes have similar
  columns of Ā. Every client needs the sum to update its copy of S, so every client reads it;
  the server reads it under ``plaintext`` and ``secure_sum``, but under ``blind_sum`` (the
  default) it relays only a sum blinded under the clients' group key: it is blind.
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

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Challenge,
    GroundTruth,
    Knowledge,
    PublicRun,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.link_stealing import (
    cross_intra_auc,
    feature_similarity,
    pair_similarity,
    target_pair_challenge,
)
from securefg.federation.codec import decode_tensor
from securefg.federation.envelope import Form

GRAD_KEY = "nsf_grad"
GRAD_TAG = "fedstruct/nsf_grad"
RESULT_STAGE = "shared_sum/result"


def summed_gradients(adv: AdversaryContext) -> Iterator[tuple[int, torch.Tensor]]:
    """``(round, ∇S)`` for every summed NSF gradient the adversary can read: a result it sent or
    received in a readable form (plaintext, or ``secure_sum``'s aggregate), or a ``blind_sum``
    result a member client opens with the group key it holds (under ``blind_robust``, the kept
    clients' sum and the kept list travel together). A server under either holds only blinded
    sums and gets nothing here."""
    from securefg.protocol.mechanism import ExchangeKind
    from securefg.protocol.robust.blind_robust import BlindRobust, unpack_result
    from securefg.protocol.secure_sum.blinded_result import BlindedResult, unblind

    view, seen = adv.view, set()
    directory = next((view.own_state(p, "directory") for p in view.members
                      if view.own_state(p, "directory") is not None), None)
    for rec in view.records(GRAD_TAG):
        if rec.round in seen or rec.stage != RESULT_STAGE or rec.payload is None:
            continue
        flat: torch.Tensor | None = None
        if view.readable(rec):
            flat = decode_tensor(rec.payload)
        elif rec.form is Form.MASKED and rec.receiver in view.clients and adv.run.stack is not None:
            key = (view.own_state(rec.receiver, "mech/blind_sum") or {}).get("group_key", {}).get(adv.run.session.hex())
            mech = adv.run.stack.resolve(GRAD_TAG, ExchangeKind.SHARED_SUM).mechanism
            if key is not None and isinstance(mech, BlindRobust):  # the kept clients' sum (blind_robust)
                blinded, kept, _members = unpack_result(rec.payload)
                flat = unblind(BlindedResult.decode(blinded), key=key, settings=mech.inner.settings,
                               session=adv.run.session, round=rec.round, tag=GRAD_TAG, clients=tuple(kept))
            elif key is not None and hasattr(mech, "settings"):
                flat = unblind(BlindedResult.decode(rec.payload), key=key, settings=mech.settings,
                               session=adv.run.session, round=rec.round, tag=GRAD_TAG, clients=adv.run.clients)
        if flat is None or directory is None:
            continue
        seen.add(rec.round)
        yield rec.round, flat.double().reshape(directory.num_nodes, -1)


def gradient_similarity(grads: Iterable[tuple[int, torch.Tensor]], pairs: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Cosine of node rows over every round's norm-one ∇S, stacked; ``(scores, rounds used)``.

    Accumulated per pair (dot products and squared norms), so memory stays ``O(n + pairs)``
    however many rounds there are.
    """
    dot = torch.zeros(pairs.size(1), dtype=torch.float64)
    sq: torch.Tensor | None = None
    used = 0
    for _, g in grads:
        norm = float(g.norm())
        if norm == 0:
            continue
        used += 1
        g = g / norm
        dot += (g[pairs[0]] * g[pairs[1]]).sum(1)
        rows = (g * g).sum(1)
        sq = rows if sq is None else sq + rows
    if sq is None:
        return torch.zeros(pairs.size(1), dtype=torch.float64), 0
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
    payload_tags = (f"{GRAD_TAG}#{RESULT_STAGE}",)

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
            return blind_outcome(self.chance, "no NSF rows of other clients' nodes and no readable summed NSF "
                                 "gradient in the adversary's view (blind_sum hides it from the server; hardened "
                                 "variant; variant A's clients)")
        return super().run(ctx)

    def _source(self, adv: AdversaryContext) -> str:
        if any(bool(g.ne(0).any()) for _, g in summed_gradients(adv)):
            return "summed NSF gradients"
        for pid in adv.view.clients:
            table = adv.view.own_state(pid, self.params["structure_key"])
            gv = adv.view.own_state(pid, "graph_view")
            if isinstance(table, torch.Tensor) and gv is not None and table.size(0) > gv.num_nodes:
                return "shared NSF rows"
        return "none"

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        return target_pair_challenge(truth, adv.targets, int(self.params["pairs"]), generator)

    def baseline(self, knowledge: Knowledge, run: PublicRun, items: Any) -> torch.Tensor | None:
        """Link inference from the public features alone: the endpoints' feature cosine."""
        return feature_similarity(knowledge, items)

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        self._used = self._source(adv)
        self._rounds = 0
        if self._used == "summed NSF gradients":
            scores, self._rounds = gradient_similarity(summed_gradients(adv), items)
            return scores
        pid = next(p for p in adv.view.clients if adv.view.own_state(p, self.params["structure_key"]) is not None)
        table = adv.view.own_state(pid, self.params["structure_key"]).detach().double()
        return pair_similarity(table, items, "cosine")

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        cross, y = challenge.info["_cross"], challenge.labels
        base = super().evaluate(Challenge(challenge.items, y), scores)
        details = {**base.details, "source": self._used, "rounds_used": self._rounds, **cross_intra_auc(y, scores, cross)}
        return AttackOutcome(base.value, self.chance, details, base.roc)
