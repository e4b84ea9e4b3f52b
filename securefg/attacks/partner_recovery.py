r"""CeFGC+'s exact leak: a client recovers its partner's generator as :math:`2\,\tilde\theta - \theta_{own}`.

CeFGC+ replaces every package :math:`\theta_j` by :math:`\tilde\theta_j = (\theta_j +
\theta_{j^*})/2` with :math:`j^*` the most cosine-similar peer, and forwards every other client's
mix to each client (cefgc.md §5). If client :math:`i` was :math:`j`'s partner, then
:math:`\theta_j = 2\tilde\theta_j - \theta_i` and :math:`i` knows :math:`\theta_i`. With 3
clients at least one pair is mutual, so some client always recovers a peer exactly; HE does not
help because the leak is in the decrypted result (``securefg.methods.cefgc.pairing``).

The adversary is a curious client; its view holds its own package (``own_package``) and the
mixes it decrypted (``received_packages``), both in its own state.

**Metric** (``recovery``): :math:`\max(0, 1 - e)` with :math:`e` the smallest relative L2 error
:math:`\lVert 2\tilde\theta - \theta_{own} - \theta_j\rVert / \lVert\theta_j\rVert` over the
received mixes and the other clients' true packages: 1 = exact copy of a peer's generator. The
``chance`` reported is the same score for the mixes taken as they are (no subtraction), i.e.
what a client learns about a peer without exploiting its own share.
"""

from __future__ import annotations

import torch

from securefg.attacks.base import AdversaryContext, Attack, AttackOutcome, AuditContext, Support, register_attack


def _flat(pkg: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([pkg[k].double().flatten() for k in sorted(pkg)])


@register_attack
class PartnerRecovery(Attack):
    """Recover a peer's diffusion package from a CeFGC+ pair average."""

    name = "partner_recovery"
    metric = "recovery"
    metric_doc = "1 - relative L2 error of the best 2*mix - own reconstruction of a peer's package"
    chance = 0.0

    def supports(self, ctx: AdversaryContext) -> Support:
        for pid in ctx.view.clients:
            if ctx.view.own_state(pid, "received_packages") and ctx.view.own_state(pid, "own_package") is not None:
                return Support(True)
        return Support(False, "no pair-averaged packages in an adversarial client's state (not CeFGC+)")

    def run(self, ctx: AuditContext) -> AttackOutcome:
        from securefg.methods.cefgc.pairing import partner_recovery

        adv, truth = ctx.adversary, ctx.truth
        best, base, who = float("inf"), float("inf"), ""
        for pid in adv.view.clients:
            own = adv.view.own_state(pid, "own_package")
            received = adv.view.own_state(pid, "received_packages") or []
            if own is None or not received:
                continue
            truths = {c: truth.parties[c].state["own_package"] for c in adv.targets
                      if "own_package" in truth.parties[c].state}
            if not truths:
                continue
            rep = partner_recovery(own, received, truths)
            if rep["best_relative_error"] < best:
                best, who = rep["best_relative_error"], rep["recovered"]
            for m in received:
                mf = _flat(m)
                base = min(base, min(float((mf - _flat(t)).norm() / _flat(t).norm().clamp(min=1e-30)) for t in truths.values()))
        value = max(0.0, 1.0 - best) if best < float("inf") else 0.0
        chance = max(0.0, 1.0 - base) if base < float("inf") else 0.0
        return AttackOutcome(value, chance, {"best_relative_error": best, "recovered_client": who,
                                             "mix_as_is_relative_error": base})
