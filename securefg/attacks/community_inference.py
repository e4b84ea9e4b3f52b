r"""FED-PUB: which clients hold similar label distributions, from the weights the server chose.

FED-PUB's server needs the similarity of the clients' functional embeddings to weight each
client's mix, so it learns that matrix by design: in the clear from the embeddings (plaintext),
as decrypted cosines (CKKS stack: encryption hides the embeddings, not the result), or from noised
embeddings (DP stack). Under homophily the similar clients are those whose subgraphs share label
distributions (the paper's communities), so the matrix tells the server which clients hold data
alike, e.g. which hospitals see the same kinds of patients.

The adversary is the server; it scores each pair of target clients by the weight it gave each of
them in the other's mix in the last round, ``alpha_ij + alpha_ji`` (its own state: it chose them).

**Metric** (``auc``): ROC-AUC over pairs of target clients, positive when the Jensen-Shannon
divergence of their training-label distributions is below the median over all pairs. 0.5 = chance.
"""

from __future__ import annotations

from itertools import combinations

import torch
from scipy.spatial.distance import jensenshannon

from securefg.attacks.base import AdversaryContext, Attack, Challenge, GroundTruth, Support, register_attack
from securefg.attacks.label_inference import label_shares


@register_attack
class CommunityInference(Attack):
    """Pairs of clients with similar label distributions, from FED-PUB's similarity weights."""

    name = "community_inference"
    metric = "auc"
    metric_doc = "ROC-AUC over client pairs: similar label distributions (JS divergence below the median) vs not"

    def supports(self, ctx: AdversaryContext) -> Support:
        if "server" not in ctx.view.members:
            return Support(False, "needs the server: only it chooses FED-PUB's similarity weights")
        if not ctx.view.own_state("server", "alpha"):
            return Support(False, "no similarity weights in the server's state (not FED-PUB)")
        if len(ctx.targets) < 3:
            return Support(False, "needs at least 3 target clients (pairs on both sides of the median)")
        return Support(True)

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        shares = label_shares(truth, adv.run.num_classes)
        pairs = list(combinations(sorted(adv.targets), 2))
        div = torch.tensor([float(jensenshannon(shares[a].numpy(), shares[b].numpy())) for a, b in pairs])
        labels = (div < div.median()).double()
        return Challenge(pairs, labels, info={"pairs": len(pairs), "median_js_distance": float(div.median())})

    def attack(self, adv: AdversaryContext, items: list[tuple[str, str]]) -> torch.Tensor:
        alpha = adv.view.own_state("server", "alpha")
        return torch.tensor([alpha[a][b] + alpha[b][a] for a, b in items], dtype=torch.float64)
