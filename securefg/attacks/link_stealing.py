r"""Link stealing from posteriors (He et al., "Stealing Links from Graph Neural Networks", USENIX
Security 2021, https://arxiv.org/abs/2005.02131, unsupervised Attack-0).

Nodes joined by an edge tend to get similar posteriors from a GNN. The adversary holds a model
from its view (the freshest global model: the last broadcast, or for the server the model it aggregated last;
or, when it reads a client's individual update, that client's local model) and, as side knowledge, the features of the target clients' nodes but not
their edges (``target_features = true``: e.g. the papers are public, the citations private). It
computes every target node's posterior with the model on the features alone (no edges: a GCN
then uses only self-loops) and scores a node pair by the correlation of the two posteriors.

**Metric** (``auc``): ROC-AUC over true edges between target nodes (cross-client and
intra-client, both in the details) against as many uniformly sampled non-edges. 0.5 = chance.
Details: ``prior_auc``, the same score on the raw features (what the side knowledge alone gives,
no model at all), and ``advantage = auc - prior_auc``, the part the run's model adds.

What the stacks change (measured in ``tests/attacks/test_calibration_fedavg.py``): a server that
reads individual updates (plaintext) attacks with each target client's *local* model; under a
secure sum it holds only the global model, which FedAvg broadcasts in the clear to every client
under every stack, so secure aggregation removes the local-model advantage and nothing more. Only
noise on the model (``fedavg_dp``) pushes the attack down to the side-knowledge level, at a
utility cost. FedStruct (FedSGD) uploads gradients, not models: the adversary uses the global θ
of the ``fedstruct/model`` broadcast (:mod:`securefg.attacks.fedstruct_model`), which every
client reads in the clear under every stack, so the stacks cannot differ there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    Challenge,
    GroundTruth,
    Knowledge,
    PublicRun,
    Support,
    register_attack,
)
from securefg.attacks.fedstruct_model import MODEL_TAG, feature_posteriors, held_theta
from securefg.attacks.metrics import roc_auc
from securefg.attacks.updates import UpdateSource, profile_for


def pair_similarity(h: torch.Tensor, pairs: torch.Tensor, kind: str) -> torch.Tensor:
    """Similarity of rows ``h[pairs[0]]`` and ``h[pairs[1]]``: ``correlation`` or ``cosine``."""
    a, b = h[pairs[0]].double(), h[pairs[1]].double()
    if kind == "correlation":
        a = a - a.mean(1, keepdim=True)
        b = b - b.mean(1, keepdim=True)
    elif kind != "cosine":
        raise ValueError(f"unknown similarity {kind!r}; choices: ['correlation', 'cosine']")
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp(min=1e-12)


def feature_similarity(knowledge: Knowledge, pairs: torch.Tensor) -> torch.Tensor | None:
    """Cosine of the two endpoints' public features (0 where one is unknown): link inference from
    the side knowledge alone, the baseline of every link attack. ``None`` without target features."""
    if not knowledge.target_features:
        return None
    n = 1 + max(int(pairs.max()) if pairs.numel() else 0,
                max(int(g.max()) for g, _ in knowledge.target_features.values()))
    d = next(iter(knowledge.target_features.values()))[1].shape[1]
    x = torch.zeros(n, d, dtype=torch.float64)
    for gid, feats in knowledge.target_features.values():
        x[gid] = feats.double()
    return pair_similarity(x, pairs, "cosine")


def _own_mix(ctx: AdversaryContext) -> dict[str, torch.Tensor] | None:
    """A client coalition's freshest model: the first member's own decrypted FED-PUB mix (its
    ``personal`` state), or a FedSheafHN client's model built on the weights the server generated
    for it. None for a server adversary, which reads models from its view instead."""
    if "server" in ctx.view.members:
        return None
    for pid in ctx.view.clients:
        mix = ctx.view.own_state(pid, "personal")
        if mix:
            return {k: torch.as_tensor(v) for k, v in mix.items()}
        if ctx.run.method == "fedsheafhn":  # its GCN layers are the ones the server generated from every embedding
            model = ctx.view.own_state(pid, "model")
            if isinstance(model, torch.nn.Module):
                return {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return None


def _gcn_posteriors(adv: AdversaryContext, state: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Posteriors of a GCN with ``state``'s weights on features alone (self-loops, no edges)."""
    from securefg.models.gcn import GCN

    hidden = int(state["conv1.lin.weight"].shape[0]) if "conv1.lin.weight" in state else 0
    if not hidden:
        raise ValueError("link_stealing expects the GCN backbone (conv1/conv2/clsif)")
    model = GCN(adv.run.num_features, adv.run.num_classes, hidden_channels=hidden).double()
    missing = model.load_state_dict({k: v.double() for k, v in state.items()}, strict=False)
    if missing.missing_keys:
        raise ValueError(f"the held model lacks {missing.missing_keys}")
    model.eval()
    with torch.no_grad():
        logits = model(x.double(), torch.empty(2, 0, dtype=torch.long))
    return torch.softmax(logits, -1)


def sample_pairs(edges: torch.Tensor, nodes: torch.Tensor, n_pos: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``n_pos`` edges (one direction) among ``nodes`` and as many non-edges among them."""
    inside = torch.zeros(int(max(int(edges.max()) if edges.numel() else 0, int(nodes.max())) + 1), dtype=torch.bool)
    inside[nodes] = True
    e = edges[:, (edges[0] < edges[1]) & inside[edges[0]] & inside[edges[1]]]
    if e.size(1) > n_pos:
        e = e[:, torch.randperm(e.size(1), generator=generator)[:n_pos]]
    present = {(int(u), int(v)) for u, v in edges.t().tolist()}
    neg: list[tuple[int, int]] = []
    tries = 0
    while len(neg) < e.size(1) and tries < 50 * max(e.size(1), 1):
        i, j = torch.randint(nodes.numel(), (2,), generator=generator).tolist()
        u, v = sorted((int(nodes[i]), int(nodes[j])))
        tries += 1
        if u != v and (u, v) not in present:
            neg.append((u, v))
    negt = torch.tensor(neg, dtype=torch.long).t().reshape(2, -1)
    return e, negt


def target_pair_challenge(truth: GroundTruth, targets: Any, n_pairs: int, generator: torch.Generator) -> Challenge:
    """Edges and sampled non-edges among the target clients' nodes; ``info["_cross"]`` marks the
    pairs whose ends belong to different clients."""
    owner: dict[int, str] = {}
    nodes = []
    for cid in targets:
        gid = truth.task.clients[truth.index(cid)].global_id
        nodes.append(gid)
        owner.update({int(g): cid for g in gid})
    pos, neg = sample_pairs(truth.task.full_graph.edge_index, torch.cat(nodes), n_pairs, generator)
    pairs = torch.cat([pos, neg], 1)
    labels = torch.cat([torch.ones(pos.size(1)), torch.zeros(neg.size(1))])
    cross = torch.tensor([owner[int(u)] != owner[int(v)] for u, v in pairs.t().tolist()], dtype=torch.bool)
    return Challenge(pairs, labels, info={"_cross": cross})


def cross_intra_auc(labels: torch.Tensor, scores: torch.Tensor, cross: torch.Tensor) -> dict[str, float]:
    """AUC of cross-client edges and of intra-client edges, each against all non-edges
    (``roc_auc`` gives NaN when a side has no edge)."""
    neg = labels == 0
    return {
        "cross_client_auc": roc_auc(labels[cross | neg], scores[cross | neg]),
        "intra_client_auc": roc_auc(labels[~cross | neg], scores[~cross | neg]),
    }


@register_attack
class LinkStealing(Attack):
    """Infer edges between target nodes from the similarity of a held model's posteriors.

    Args:
        pairs (int): Edges sampled (and as many non-edges). (default: ``2000``)
        similarity (str): ``"correlation"`` or ``"cosine"``. (default: ``"correlation"``)
        local_models (bool): Use a target client's local model (global + its update) for its
            nodes when the adversary reads individual updates. (default: ``True``)
    """

    name = "link_stealing"
    metric = "auc"
    metric_doc = "ROC-AUC of posterior similarity: true edges between target nodes vs sampled non-edges"
    defaults: ClassVar[Mapping[str, Any]] = {"pairs": 2000, "similarity": "correlation", "local_models": True}
    #: FED-PUB: the initial model and the first round's uploads (every round's would not fit in memory).
    payload_tags = ("fedavg/model", "fedavg/update", "fedstruct/model", "fedpub/model", "fedpub/weights@0")

    def supports(self, ctx: AdversaryContext) -> Support:
        if ctx.run.task != "node":
            return Support(False, "link stealing needs a node-level task")
        if not ctx.knowledge.target_features:
            return Support(False, "needs side knowledge target_features = true (the target nodes' features)")
        if MODEL_TAG in ctx.view.tags():
            ok = held_theta(ctx.view) is not None
            return Support(ok, "" if ok else f"no readable {MODEL_TAG!r} broadcast in the adversary's view")
        if _own_mix(ctx) is not None:
            return Support(True)
        prof = profile_for(ctx.view.tags())
        src = UpdateSource(ctx.view, prof) if prof is not None else None
        if src is None or not src.rounds:
            return Support(False, "no readable model in the adversary's view")
        ref = src.reference(src.rounds[-1])
        if ref is not None and "conv1.lin.weight" not in ref:  # FedSage's GraphSage also travels as fedavg/model
            return Support(False, "needs the GCN backbone (conv1/conv2/clsif); this run's model is another "
                                  "(FedSage's GraphSage)")
        return Support(True)

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        return target_pair_challenge(truth, adv.targets, int(self.params["pairs"]), generator)

    def baseline(self, knowledge: Knowledge, run: PublicRun, items: Any) -> torch.Tensor | None:
        """The target features' own cosine similarity (no model at all)."""
        return feature_similarity(knowledge, items)

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        pairs: torch.Tensor = items
        post = self._posteriors(adv)
        return pair_similarity(post, pairs, self.params["similarity"])

    def _posteriors(self, adv: AdversaryContext) -> torch.Tensor:
        self._features = adv.knowledge.target_features
        if MODEL_TAG in adv.view.tags():
            return self._fedstruct_posteriors(adv)
        if _own_mix(adv) is not None:
            return self._mix_posteriors(adv)
        prof = profile_for(adv.view.tags())
        assert prof is not None
        src = UpdateSource(adv.view, prof)
        last = src.rounds[-1]
        ref = src.reference(last)
        assert ref is not None
        final = src.mean(last, adv.run.clients) if "server" in adv.view.members else None
        glob = {k: ref[k] + final[k] for k in ref} if final is not None else ref  # the freshest global model held
        n = 1 + max(int(g.max()) for g, _ in adv.knowledge.target_features.values())
        post = torch.zeros(n, adv.run.num_classes, dtype=torch.float64)
        self._used = set()
        for cid, (gid, x) in adv.knowledge.target_features.items():
            state = glob
            delta = src.individual(last, cid) if self.params["local_models"] else None
            if delta is not None:
                state = {k: ref[k] + delta[k] for k in ref}
                self._used.add("local")
            else:
                self._used.add("global")
            post[gid] = _gcn_posteriors(adv, state, x)
        return post

    def _mix_posteriors(self, adv: AdversaryContext) -> torch.Tensor:
        """FED-PUB, curious client: its own decrypted personalised mix on every target's features."""
        mix = _own_mix(adv)
        assert mix is not None
        n = 1 + max(int(g.max()) for g, _ in adv.knowledge.target_features.values())
        post = torch.zeros(n, adv.run.num_classes, dtype=torch.float64)
        for gid, x in adv.knowledge.target_features.values():
            post[gid] = _gcn_posteriors(adv, mix, x)
        self._used = {"own generated model" if adv.run.method == "fedsheafhn" else "own personalised mix"}
        return post

    def _fedstruct_posteriors(self, adv: AdversaryContext) -> torch.Tensor:
        """FedStruct (FedSGD): the global θ every client receives; its feature branch on the features."""
        theta = held_theta(adv.view)
        assert theta is not None
        n = 1 + max(int(g.max()) for g, _ in adv.knowledge.target_features.values())
        post = torch.zeros(n, adv.run.num_classes, dtype=torch.float64)
        for gid, x in adv.knowledge.target_features.values():
            post[gid] = feature_posteriors(adv.run, theta, x)
        self._used = {"global (feature branch)"}
        return post

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        cross = challenge.info["_cross"]
        y = challenge.labels
        base = super().evaluate(Challenge(challenge.items, y), scores)
        # the side-knowledge-only baseline: the same similarity on the raw features
        n = 1 + max(int(g.max()) for g, _ in self._features.values())
        d = next(iter(self._features.values()))[1].shape[1]
        x = torch.zeros(n, d, dtype=torch.float64)
        for gid, feats in self._features.values():
            x[gid] = feats.double()
        prior = pair_similarity(x, challenge.items, "cosine")
        prior_auc = roc_auc(y, prior)
        details = {
            **base.details,
            "prior_auc": prior_auc,
            "advantage": base.value - prior_auc,
            **cross_intra_auc(y, scores, cross),
            "model": sorted(self._used),
        }
        note = ""
        if base.value <= prior_auc:
            note = ("the held model adds nothing over the side knowledge: the target features' own similarity "
                    f"scores {prior_auc:.3f} (prior_auc), so this value measures the side knowledge, not the run")
        return AttackOutcome(base.value, self.chance, details, base.roc, note=note)
