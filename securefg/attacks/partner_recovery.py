r"""CeFGC+'s exact leak: a client recovers its partner's generator as :math:`2\,\tilde\theta - \theta_{own}`.

CeFGC+ replaces every package :math:`\theta_j` by :math:`\tilde\theta_j = (\theta_j +
\theta_{j^*})/2` with :math:`j^*` the most cosine-similar peer, and forwards every other client's
mix to each client (cefgc.md §5). If client :math:`i` was :math:`j`'s partner, then
:math:`\theta_j = 2\tilde\theta_j - \theta_i` and :math:`i` knows :math:`\theta_i`. With 3
clients at least one pair is mutual, so some client always recovers a peer exactly; HE does not
help because the leak is in the decrypted result (``securefg.methods.cefgc.pairing``).

The adversary is a curious client; its view holds its own package (``own_package``) and the
mixes it decrypted (``received_packages``), both in its own state.

**Metric** (``recovery``): :math:`\max(0, 1 - \lVert\hat\theta - \theta_j\rVert /
\lVert\theta_j - \theta_0\rVert)` on the score-network weights, for the best candidate
:math:`\hat\theta = 2\tilde\theta - \theta_{own}` and peer :math:`j`, where :math:`\theta_0` is
the agreed initialisation (CeFGC+ shares the init seed so averages make sense): 1 = an exact
copy of what the peer's training put into its generator, 0 = no better than the initialisation.
The ``chance`` reported is the same score for the mixes taken as they are (no subtraction).
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


@register_attack
class PartnerRecovery(Attack):
    """Recover a peer's diffusion package from a CeFGC+ pair average."""

    name = "partner_recovery"
    metric = "recovery"
    metric_doc = "1 - error of the best 2*mix - own copy of a peer's generator, relative to what its training moved"
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
        best, base, who, rel = 0.0, 0.0, "", float("inf")
        for pid in adv.view.clients:
            own = adv.view.own_state(pid, "own_package")
            received = adv.view.own_state(pid, "received_packages") or []
            truths = {c: truth.parties[c].state["own_package"] for c in adv.targets
                      if "own_package" in truth.parties[c].state}
            if own is None or not received or not truths:
                continue
            rel = min(rel, partner_recovery(own, received, truths)["best_relative_error"])
            for cand, mix in zip(recover_partners(own, received), received, strict=True):
                for cid, t in truths.items():
                    score = _recovery(cand, t, init)
                    if score > best:
                        best, who = score, cid
                    base = max(base, _recovery(mix, t, init))
        return AttackOutcome(best, base, {"recovered_client": who, "best_relative_error_whole_package": rel,
                                          "mix_as_is_recovery": base})


def _recovery(candidate: dict[str, torch.Tensor], truth: dict[str, torch.Tensor], init: dict[str, torch.Tensor]) -> float:
    keys = [k for k in sorted(init) if k in truth and float(truth[k.replace("params", "presence")].reshape(-1)[0]) > 0.5]
    if not keys:
        return 0.0
    c = torch.cat([candidate[k].double().flatten() for k in keys])
    t = torch.cat([truth[k].double().flatten() for k in keys])
    t0 = torch.cat([init[k] for k in keys])
    moved = float((t - t0).norm())
    return max(0.0, 1.0 - float((c - t).norm()) / moved) if moved > 0 else 0.0
