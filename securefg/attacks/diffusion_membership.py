r"""Membership inference on shared graph diffusion models (CeFGC's relayed generators).

Every CeFGC client decrypts the other clients' generators (cefgc.md §5: "a generative model is
a release of the data distribution"). Was graph :math:`G` (with label :math:`y`) in another
client's training set? For each received model :math:`m` that generates class :math:`y` the
adversary computes two log-likelihood-ratio proxies against a *reference* model trained on data
it has (public auxiliary graphs, ``reference = "aux"``, or its own graphs, ``"own"``):

* **score matching**: :math:`D_m(G) = L_{ref}(G) - L_m(G)`, with :math:`L` the denoising
  score-matching loss (the training objective, :func:`~securefg.models.graph_score.dsm_loss`)
  averaged over noise levels and ``draws`` noise samples, the *same* samples for every model
  (common random numbers). Training graphs have a lower loss under the model that saw them
  (Carlini et al., "Extracting Training Data from Diffusion Models", 2023,
  https://arxiv.org/abs/2301.13188; Matsumoto et al. 2023, https://arxiv.org/abs/2302.03262); the
  reference removes how hard a graph is in itself (LiRA-style offline calibration, Carlini et
  al. 2022, https://arxiv.org/abs/2112.03570). On binary adjacencies the smallest noise level is
  solved by rounding whatever the training data (a model-independent denoiser), so the default
  uses every level, not only the smallest.
* **graph size**: :math:`S_m(G) = \log p_m(n_G) - \log p_{ref}(n_G)`, from the node-count
  histogram that ships with every model (smoothed). It is an exact list of the training sizes:
  with a few dozen graphs per model, sizes no member has rule a graph out. The reference's
  histogram is Laplace-smoothed (a population prior from few graphs), the target's barely.

Both are standardised over the candidate pool (the adversary sees all candidates) and summed
(``size_weight`` scales the second); the score is the maximum over received models.

**Metric** (``auc``): ROC-AUC over the challenge: target clients' generator-training graphs
(members) against as many held-out graphs never given to the adversary (non-members).
Details: ``tpr_at_1pct_fpr``, the AUC of each component alone,
``side_knowledge_baseline`` (the same challenge scored from side knowledge alone, no received
model: how typical each graph is under the reference model, its DSM fit plus its size
probability; the part of the AUC the protocol did not cause), and, with
``dp_noise_multipliers``, the same attack against the victims' generators retrained with DP-SGD
and a noisy size histogram (:mod:`securefg.models.graph_score.dp_training`): AUC, TPR and epsilon per
setting. That retraining is the auditor's counterfactual; the run's own DP option is ``dp_epsilon``.

Where the models come from: readable ``cefgc/model`` payloads in the view (plaintext relay:
the server reads every upload), else a curious client's own decrypted relay items
(``received_models`` in its state). Behind a sealed or encrypted relay the server holds no
model and the attack is blind (chance).
"""

from __future__ import annotations

import contextlib
import math
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
    PublicRun,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.metrics import roc_auc, roc_points, tpr_at_fpr
from securefg.errors import SecureFGError
from securefg.models.graph_score import GraphDiffusionModel, condition_index, to_dense_batch_adjacency
from securefg.models.graph_score.masks import symmetric_noise


def cefgc_architecture(run: PublicRun) -> Any:
    """The generator architecture every CeFGC client agreed on (public, cefgc.md §3 row 0b)."""
    from securefg.methods.base import method_class
    from securefg.methods.cefgc.package import Architecture
    from securefg.models.graph_score import DEFAULT_SIGMAS, EDPScoreConfig

    mcls = method_class(run.method)
    opts = {**getattr(mcls, "option_defaults", {}), **run.options}
    variant = str(opts.get("variant", "")).lower()
    conditional = bool(getattr(mcls, "conditional", False)) if not variant else variant in ("star", "advanced")
    return Architecture(config=EDPScoreConfig(), sigmas=DEFAULT_SIGMAS, max_node_num=int(opts.get("max_nodes", 40)),
                        num_classes=run.num_classes, conditional=conditional), opts


def unpack_package(tensors: dict[str, torch.Tensor], arch: Any) -> list[GraphDiffusionModel]:
    """Models of an exact (``m<k>/``) or dense (``s<k>/``) CeFGC package."""
    from securefg.methods.cefgc.package import unpack_dense, unpack_exact

    first = next(iter(tensors))
    return unpack_exact(tensors) if first.startswith("m") else unpack_dense(tensors, arch)


def can_generate(model: GraphDiffusionModel, label: int) -> bool:
    if model.num_classes is not None:
        return label < model.num_classes and int(model.node_count_hist[label].sum()) > 0
    return model.class_label == label


def log_size_prob(model: GraphDiffusionModel | None, n: int, label: int, max_nodes: int, alpha: float = 0.1) -> float:
    """Smoothed :math:`\\log p(n)` from a model's histogram (uniform without a model)."""
    if model is None:
        return -math.log(max_nodes)
    row = model.node_count_hist[label if model.num_classes is not None else 0].double()
    row = row[1 : max_nodes + 1] if row.numel() > max_nodes else row[1:]
    return math.log((float(row[n - 1]) if n - 1 < row.numel() else 0.0) + alpha) - math.log(float(row.sum()) + alpha * row.numel())


@torch.no_grad()
def dsm_profile(model: GraphDiffusionModel, graph: Any, label: int, *, levels: list[int], draws: int, seed: int) -> float:
    """Mean DSM loss per node pair of one graph over ``levels`` x ``draws`` noise samples seeded by
    ``seed`` (per pair, so a graph's size does not scale the statistic)."""
    b = to_dense_batch_adjacency([graph], max_node_num=model.max_node_num)
    n = int(b.flags.sum())
    adj = b.adj[:, :n, :n].repeat(draws * len(levels), 1, 1)
    flags = b.flags[:, :n].repeat(draws * len(levels), 1)
    gen = torch.Generator().manual_seed(seed)
    z = symmetric_noise(flags, generator=gen)
    lv = torch.tensor(levels, dtype=torch.long).repeat_interleave(draws)
    sig = torch.tensor(model.sigmas, dtype=adj.dtype)[lv].view(-1, 1, 1)
    cls = None if model.num_classes is None else torch.full((lv.numel(),), label, dtype=torch.long)
    model.score_net.eval()
    score = model.score_net(adj + sig * z, flags, condition_index(lv, cls, len(model.sigmas)))
    return float((0.5 * ((sig * score + z) ** 2).sum((-1, -2))).mean()) / max(n * (n - 1), 1)


#: Reference models trained on public graphs, by content: the same public data and recipe give
#: the same reference, so a second attack (another adversary, the plaintext run) reuses it.
_REFERENCE_CACHE: dict[str, dict[int, GraphDiffusionModel]] = {}
_DP_CACHE: dict[str, tuple[list[GraphDiffusionModel], float]] = {}


def _content_key(graphs: list[Any], arch: Any, opts: Any) -> str:
    import hashlib

    h = hashlib.sha256(repr((arch, opts.get("diffusion_epochs"), opts.get("diffusion_batch"), opts.get("diffusion_lr"),
                             opts.get("dp"))).encode())
    for g in graphs:
        h.update(g.edge_index.numpy().tobytes())
        h.update(f"{int(g.num_nodes)}:{int(g.y.view(-1)[0])};".encode())
    return h.hexdigest()


def _z(m: torch.Tensor) -> torch.Tensor:
    vals = m[torch.isfinite(m)]
    if vals.numel() < 2:
        return torch.where(torch.isfinite(m), torch.zeros_like(m), m)
    return (m - vals.mean()) / vals.std().clamp(min=1e-12)


@register_attack
class DiffusionMembership(Attack):
    """Was this graph in another client's generator training set? (score matching + size).

    Args:
        tag (str): Relay tag of the packages. (default: ``"cefgc/model"``)
        reference (str): ``"aux"`` (train on the public auxiliary graphs), ``"own"`` (the
            adversary's own generators) or ``"none"``. (default: ``"aux"``)
        levels (list[int]): Noise-level indices ([] = all). (default: ``[]``)
        draws (int): Noise samples per level. (default: ``8``)
        size_weight (float): Weight of the size statistic (0 = score matching only). (default: ``1.0``)
        max_candidates (int): Members + non-members at most. (default: ``200``)
        dp_noise_multipliers (list[float]): Counterfactual DP-SGD settings. (default: ``[]``)
        dp_histogram_sigma (float): Noise on the size histogram in that counterfactual. (default: ``4.0``)
        dp_max_grad_norm (float): DP-SGD clip. (default: ``1.0``)
    """

    name = "diffusion_membership"
    metric = "auc"
    metric_doc = "ROC-AUC: other clients' generator-training graphs vs held-out graphs"
    defaults: ClassVar[Mapping[str, Any]] = {"tag": "cefgc/model", "reference": "aux", "levels": [], "draws": 8, "size_weight": 1.0,
                "max_candidates": 200, "dp_noise_multipliers": [], "dp_histogram_sigma": 4.0, "dp_max_grad_norm": 1.0}
    payload_tags = ("cefgc/model",)

    def supports(self, ctx: AdversaryContext) -> Support:
        if ctx.run.task != "graph" or not ctx.run.method.startswith("cefgc"):
            return Support(False, "needs CeFGC's relayed diffusion models")
        if self.params["reference"] not in ("aux", "own", "none"):
            return Support(False, f"reference must be 'aux', 'own' or 'none', got {self.params['reference']!r}")
        if self.params["reference"] == "aux" and not ctx.knowledge.aux_graphs:
            return Support(False, "reference = 'aux' needs side knowledge aux_graphs > 0")
        if self.params["reference"] == "own" and not ctx.view.clients:
            return Support(False, "reference = 'own' needs an adversarial client")
        return Support(True)

    # ------------------------------------------------------------------------ challenger
    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        arch, _ = cefgc_architecture(adv.run)
        cap = arch.max_node_num
        members = [g for cid in adv.targets for g in truth.task.train[truth.index(cid)] if int(g.num_nodes) <= cap]
        non = [g for g in truth.heldout_graphs if int(g.num_nodes) <= cap]
        m = min(len(members), len(non), int(self.params["max_candidates"]) // 2)
        pick = lambda xs: [xs[i] for i in torch.randperm(len(xs), generator=generator)[:m].tolist()]
        items = pick(members) + pick(non)
        return Challenge(items, torch.cat([torch.ones(m), torch.zeros(m)]))

    def run(self, ctx: AuditContext) -> AttackOutcome:
        if not self._models(ctx.adversary):
            return blind_outcome(self.chance, "the adversary holds no readable generator (sealed or encrypted relay)")
        out = super().run(ctx)
        if not self.params["dp_noise_multipliers"]:
            return out
        gen = torch.Generator().manual_seed(ctx.seed * 31 + 7)
        challenge = self.challenge(ctx.truth, ctx.adversary, torch.Generator().manual_seed(ctx.seed * 7919 + sum(map(ord, self.name))))
        rows = []
        for sigma in self.params["dp_noise_multipliers"]:
            models, eps = self._dp_victims(ctx, float(sigma), gen)
            scores, parts = self._scores(ctx.adversary, challenge.items, models)
            y = challenge.labels
            rows.append({"noise_multiplier": float(sigma), "histogram_sigma": float(self.params["dp_histogram_sigma"]),
                         "epsilon": eps, "auc": roc_auc(y, scores), "tpr_at_1pct_fpr": tpr_at_fpr(y, scores),
                         "dsm_only_auc": roc_auc(y, parts[0]), "size_only_auc": roc_auc(y, parts[1])})
        return AttackOutcome(out.value, out.chance, {**out.details, "dp": rows}, out.roc, out.note)

    # ------------------------------------------------------------------------- adversary
    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        scores, parts = self._scores(adv, items, self._models(adv))
        self._parts = parts
        self._baseline = self._side_knowledge_scores
        return scores

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        y = challenge.labels
        d, s = self._parts
        return AttackOutcome(
            value=roc_auc(y, scores), chance=self.chance,
            details={"tpr_at_1pct_fpr": tpr_at_fpr(y, scores), "dsm_only_auc": roc_auc(y, d),
                     "side_knowledge_baseline": roc_auc(y, self._baseline),
                     "size_only_auc": roc_auc(y, s), "members": int(y.sum()), "non_members": int((1 - y).sum()),
                     "models": self._n_models, "reference": self.params["reference"]},
            roc=roc_points(y, scores),
        )

    def _models(self, adv: AdversaryContext) -> list[GraphDiffusionModel]:
        arch, _ = cefgc_architecture(adv.run)
        models: list[GraphDiffusionModel] = []
        for rec in adv.view.records(self.params["tag"], received=True):
            if rec.sender in adv.parties:
                continue
            t = adv.view.decode(rec)
            if t:
                with contextlib.suppress(SecureFGError):  # a payload that is not a valid package is no model
                    models.extend(unpack_package(t, arch))
        if not models:
            for pid in adv.view.clients:
                models.extend(adv.view.own_state(pid, "received_models", []) or [])
        self._n_models = len(models)
        return models

    def _references(self, adv: AdversaryContext) -> dict[int, GraphDiffusionModel]:
        arch, opts = cefgc_architecture(adv.run)
        if self.params["reference"] == "none":
            return {}
        if self.params["reference"] == "own":
            own = adv.view.own_state(adv.view.clients[0], "generators", {}) or {}
            return self._by_class(list(own.values()), adv.run.num_classes)
        graphs = [g for g in adv.knowledge.aux_graphs if int(g.num_nodes) <= arch.max_node_num]
        key = _content_key(graphs, arch, opts)
        if key in _REFERENCE_CACHE:
            return _REFERENCE_CACHE[key]
        gen = torch.Generator().manual_seed(4242)
        refs: list[GraphDiffusionModel] = []
        groups = {0: graphs} if arch.conditional else {}
        if not arch.conditional:
            for g in graphs:
                groups.setdefault(int(g.y.view(-1)[0]), []).append(g)
        for slot, members in sorted(groups.items()):
            if not members:
                continue
            m = arch.new_model(class_label=slot, init_seed=1234 + slot)
            labels = [int(g.y.view(-1)[0]) for g in members] if arch.conditional else None
            m.fit(members, labels, epochs=int(opts["diffusion_epochs"]), batch_size=int(opts["diffusion_batch"]),
                  lr=float(opts["diffusion_lr"]), generator=gen)
            refs.append(m)
        _REFERENCE_CACHE[key] = self._by_class(refs, adv.run.num_classes)
        return _REFERENCE_CACHE[key]

    @staticmethod
    def _by_class(models: list[GraphDiffusionModel], num_classes: int) -> dict[int, GraphDiffusionModel]:
        out = {}
        for c in range(num_classes):
            for m in models:
                if can_generate(m, c):
                    out[c] = m
                    break
        return out

    def _scores(self, adv: AdversaryContext, graphs: list[Any], models: list[GraphDiffusionModel]) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        arch, _ = cefgc_architecture(adv.run)
        refs = self._references(adv)
        levels = list(self.params["levels"]) or list(range(len(arch.sigmas)))
        draws = int(self.params["draws"])
        inf = float("-inf")
        dsm = torch.full((len(graphs), max(len(models), 1)), inf, dtype=torch.float64)
        size = torch.full_like(dsm, inf)
        ref_fit = torch.zeros(len(graphs), 2, dtype=torch.float64)  # the reference's own likelihood of each graph
        for gi, g in enumerate(graphs):
            y, n = int(g.y.view(-1)[0]), int(g.num_nodes)
            ref = refs.get(y)
            seed = 1_000_003 * gi + 17
            l_ref = dsm_profile(ref, g, y, levels=levels, draws=draws, seed=seed) if ref is not None else 0.0
            s_ref = log_size_prob(ref, n, y, arch.max_node_num, alpha=1.0)  # Laplace: a population prior
            ref_fit[gi] = torch.tensor([-l_ref, s_ref], dtype=torch.float64)
            for mi, m in enumerate(models):
                if not can_generate(m, y):
                    continue
                dsm[gi, mi] = l_ref - dsm_profile(m, g, y, levels=levels, draws=draws, seed=seed)
                size[gi, mi] = log_size_prob(m, n, y, arch.max_node_num) - s_ref
        ok = torch.isfinite(dsm)
        # side knowledge alone (no received model): "typical under my reference" as the member score
        self._side_knowledge_scores = _z(ref_fit[:, 0]) + float(self.params["size_weight"]) * _z(ref_fit[:, 1])
        zd, zs = _z(dsm), _z(size)
        comb = torch.where(ok, zd + float(self.params["size_weight"]) * torch.where(ok, zs, 0.0), float("-inf"))

        def best(t: torch.Tensor) -> torch.Tensor:
            return torch.where(ok, t, float("-inf")).max(1).values.clamp(min=-1e9)

        return best(comb), (best(zd), best(zs))

    def _dp_victims(self, ctx: AuditContext, sigma: float, gen: torch.Generator) -> tuple[list[GraphDiffusionModel], float]:
        from securefg.models.graph_score.dp_training import train_dp_generator

        adv = ctx.adversary
        arch, opts = cefgc_architecture(adv.run)
        init_seed = 1_000_003 * (int(adv.run.config.get("seed", 0)) + 1)
        victims = [g for cid in adv.targets for g in ctx.truth.task.train[ctx.truth.index(cid)]]
        key = _content_key(victims, arch, {**opts, "dp": (sigma, tuple(adv.targets), self.params["dp_histogram_sigma"],
                                                          self.params["dp_max_grad_norm"], init_seed)})
        if key in _DP_CACHE:  # the same victims, recipe and noise (e.g. the other stack's run): same counterfactual
            return _DP_CACHE[key]
        models, eps = [], 0.0
        for cid in adv.targets:
            graphs = [g for g in ctx.truth.task.train[ctx.truth.index(cid)] if int(g.num_nodes) <= arch.max_node_num]
            groups = {0: graphs} if arch.conditional else {}
            if not arch.conditional:
                for g in graphs:
                    groups.setdefault(int(g.y.view(-1)[0]), []).append(g)
            for slot, members in sorted(groups.items()):
                m = arch.new_model(class_label=slot, init_seed=init_seed)
                labels = [int(g.y.view(-1)[0]) for g in members] if arch.conditional else None
                fit = train_dp_generator(m, members, labels, epochs=int(opts["diffusion_epochs"]),
                                         lr=float(opts["diffusion_lr"]), batch_size=int(opts["diffusion_batch"]),
                                         noise_multiplier=sigma, max_grad_norm=float(self.params["dp_max_grad_norm"]),
                                         histogram_sigma=float(self.params["dp_histogram_sigma"]), generator=gen)
                eps = max(eps, fit.epsilon)
                models.append(m)
        _DP_CACHE[key] = (models, eps)
        return models, eps
