r"""CeFGC+'s exact leak: a client recovers its partner's generator as :math:`2\,\tilde\theta - \theta_{own}`.

CeFGC+ replaces every package :math:`\theta_j` by :math:`\tilde\theta_j = (\theta_j +
\theta_{j^*})/2` with :math:`j^*` the most cosine-similar peer, and forwards every other client's
mix to each client (cefgc.md §5). If client :math:`i` was :math:`j`'s partner, then
:math:`\theta_j = 2\tilde\theta_j - \theta_i` and :math:`i` knows :math:`\theta_i`. With 3
clients at least one pair is mutual, so some client always recovers a peer exactly; HE does not
help because the leak is in the decrypted result (``securefg.methods.cefgc.pairing``).

Under the default groups (``mix_peers = 2``, :mod:`securefg.methods.cefgc.pairing`) every member
of a group of :math:`g \ge 3` receives the group mean; the best the attacker can do is
:math:`(g\,\tilde\theta - \theta_{own}) / (g - 1)`, the mean of its group peers. The attack
tries every :math:`g` from 2 to the number of clients on every mix it received.

The adversary is a curious client; its view holds its own package (``own_package``) and the
mixes it decrypted (``received_packages``), both in its own state.

**Metric** (``recovery``): how much of one peer's *individual* package the best candidate
:math:`\hat\theta` gives, :math:`\max(0, 1 - \lVert\hat\theta - \theta_j\rVert /
\lVert\theta_j - \bar\theta\rVert)` on the score-network weights of the slots the peer trained,
where :math:`\bar\theta` is the mean of the target peers' packages (the initialisation when
there is one target): 1 = an exact copy of peer
:math:`j`, 0 = nothing beyond the peers' mean (which averaging releases by design; with 3
clients the default group mean gives exactly that). Details:

* ``side_knowledge_baseline``: the same score for the best guess from the adversary's side
  knowledge alone, its own package (all clients start from the agreed initialisation and learn
  alike graphs, so its own weights are a guess of a peer's): the part of any leak the protocol
  did not cause. Field for the audit's generic advantage (value - baseline).
* ``recovery_vs_init``: the earlier scale, :math:`1 - \lVert\hat\theta - \theta_j\rVert /
  \lVert\theta_j - \theta_0\rVert` with :math:`\theta_0` the agreed initialisation (what
  training moved), and ``side_knowledge_baseline_vs_init``: the own package on that scale.
* ``best_relative_error_whole_package``: the smallest :math:`\lVert\hat\theta - \theta_j\rVert /
  \lVert\theta_j\rVert` over the whole package (CKKS noise is ~1e-6).

The ``chance`` reported is the recovery score of the mixes taken as they are (no subtraction).
"""

from __future__ import annotations

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    AuditContext,
    Support,
    register_attack,
)

Package = dict[str, torch.Tensor]


@register_attack
class PartnerRecovery(Attack):
    """Recover a peer's diffusion package from a CeFGC+ pair (or group) average."""

    name = "partner_recovery"
    metric = "recovery"
    metric_doc = "1 - error of the best (g*mix - own)/(g-1) copy of a peer's generator, relative to its distance from the peers' mean"
    chance = 0.0

    def supports(self, ctx: AdversaryContext) -> Support:
        for pid in ctx.view.clients:
            if ctx.view.own_state(pid, "received_packages") and ctx.view.own_state(pid, "own_package") is not None:
                return Support(True)
        return Support(False, "no pair-averaged packages in an adversarial client's state (not CeFGC+)")

    def run(self, ctx: AuditContext) -> AttackOutcome:
        from securefg.attacks.diffusion_membership import cefgc_architecture
        from securefg.methods.cefgc.pairing import partner_recovery, recover_partners

        adv, truth = ctx.adversary, ctx.truth
        arch, _ = cefgc_architecture(adv.run)
        init_seed = 1_000_003 * (int(adv.run.config.get("seed", 0)) + 1)
        init = {f"s{s}/params": arch.new_model(class_label=s, init_seed=init_seed).flat_parameters().double()
                for s in range(arch.slots)}
        sizes = tuple(range(2, max(len(adv.run.clients), 2) + 1))
        truths = {c: truth.parties[c].state["own_package"] for c in adv.targets if "own_package" in truth.parties[c].state}
        # one target: its "mean" is itself, so the initialisation is the reference instead
        peers_mean = ({k: sum(t[k].double() for t in truths.values()) / len(truths) for k in init}
                      if len(truths) >= 2 else init)
        best = {"value": 0.0, "vs_init": 0.0, "as_is": 0.0, "baseline": 0.0, "baseline_vs_init": 0.0}
        who, rel = "", float("inf")
        for pid in adv.view.clients:
            own = adv.view.own_state(pid, "own_package")
            received = adv.view.own_state(pid, "received_packages") or []
            if own is None or not received or not truths:
                continue
            rel = min(rel, partner_recovery(own, received, truths, group_sizes=sizes)["best_relative_error"])
            for cid, t in truths.items():
                best["baseline"] = max(best["baseline"], _recovery(own, t, peers_mean))
                best["baseline_vs_init"] = max(best["baseline_vs_init"], _recovery(own, t, init))
                for mix in received:
                    best["as_is"] = max(best["as_is"], _recovery(mix, t, peers_mean))
                for cand in recover_partners(own, received, group_sizes=sizes):
                    score = _recovery(cand, t, peers_mean)
                    if score > best["value"]:
                        best["value"], who = score, cid
                    best["vs_init"] = max(best["vs_init"], _recovery(cand, t, init))
        return AttackOutcome(best["value"], best["as_is"], {
            "recovered_client": who, "best_relative_error_whole_package": rel, "mix_as_is_recovery": best["as_is"],
            "side_knowledge_baseline": best["baseline"], "recovery_vs_init": best["vs_init"],
            "side_knowledge_baseline_vs_init": best["baseline_vs_init"], "group_sizes_tried": list(sizes)})


def _recovery(candidate: Package, truth: Package, reference: Package) -> float:
    """``1 - ||candidate - truth|| / ||truth - reference||`` on the slots ``truth`` trained (0 at worst)."""
    keys = [k for k in sorted(reference) if k in truth and float(truth[k.replace("params", "presence")].reshape(-1)[0]) > 0.5]
    if not keys:
        return 0.0
    c = torch.cat([candidate[k].double().flatten() for k in keys])
    t = torch.cat([truth[k].double().flatten() for k in keys])
    r = torch.cat([reference[k].double().flatten() for k in keys])
    spread = float((t - r).norm())
    return max(0.0, 1.0 - float((c - t).norm()) / spread) if spread > 0 else 0.0
