r"""What FedSheafHN's hypernetwork feedback tells the server: update inversion and feature inference.

The server reads every client's feedback :math:`\Delta\tilde\omega_i = \tilde\omega_i^{(T_c)} -
\tilde\omega_i` individually on every stack (the structural leak, :mod:`securefg.methods.fedsheafhn`),
and it generated :math:`\tilde\omega_i` itself, so:

* **Update inversion** (``inversion_rel_error``): it reconstructs the client's fine-tuned GCN
  layers :math:`\tilde\omega_i + \Delta\tilde\omega_i` *exactly*; the error against the client's
  actual layers is float rounding on every stack.
* **Feature inference** (``feature_auc``): the first-layer update of an absent bag-of-words
  feature is pure weight decay (every entry has the sign of :math:`-W`, see
  :mod:`securefg.attacks.feature_support`), so the score
  :math:`s_{i,f} = \operatorname{mean}_j \mathbb{1}[\operatorname{sign}(\Delta_{j,f}) \neq
  -\operatorname{sign}(W_{j,f})]` says which words occur in the client's documents (ROC-AUC over
  clients per informative feature, averaged; 0.5 = chance).

What the mailbox stack changes is **attribution**: the server holds each update under a session
pseudonym, never a client id. ``linkage_accuracy`` is the share of pseudonyms the server names
correctly (plaintext: the pseudonym is the id, 1.0; mailbox: its best guess is a uniform
assignment, 1/N in expectation). ``attributed_feature_auc`` scores what the server can say about a
*named* client: the inferred vocabulary of the pseudonym it assigns to that client.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from securefg.attacks.base import (
    AdversaryContext,
    Attack,
    AttackOutcome,
    Support,
    blind_outcome,
    register_attack,
)
from securefg.attacks.metrics import mean_or_nan, roc_auc
from securefg.errors import InvalidInputError
from securefg.federation.federation import Federation
from securefg.protocol.relay.mailbox import NAMESPACE, pseudonym_of

INPUT_LAYER = "conv1.lin.weight"


def owners(fed: Federation) -> dict[str, str]:
    """Ground truth (the experimenter's, no party's): pseudonym -> client id for this run.

    Under plaintext the pseudonym is the id; under the mailbox it is the hash of the client's
    session key, read from the client's own state.
    """
    return _owners(fed.parties, fed.client_ids, fed.transport.session)


def _owners(parties: Mapping[str, Any], clients: list[str] | tuple[str, ...], session: bytes) -> dict[str, str]:
    out = {}
    for cid in clients:
        keys = parties[cid].state.get(f"mech/{NAMESPACE}", {})
        key = keys.get(session.hex())
        out[pseudonym_of(key.public_bytes) if key is not None else cid] = cid
    return out


def server_guess(pseudonyms: list[str], clients: list[str], generator: torch.Generator) -> dict[str, str]:
    """The server's attribution: a pseudonym that is a client id names itself; otherwise a
    uniformly random assignment (it has nothing that ranks one client above another)."""
    if set(pseudonyms) == set(clients):
        return {p: p for p in pseudonyms}
    perm = torch.randperm(len(clients), generator=generator).tolist()
    return {p: clients[perm[i]] for i, p in enumerate(sorted(pseudonyms))}


def feature_scores(delta: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``[F]`` share of hidden units whose update breaks the weight-decay pattern of an absent feature."""
    return ((delta != 0) & (torch.sign(delta) != -torch.sign(weight))).double().mean(0)


def _feature_auc(scores: Mapping[str, torch.Tensor], presence: Mapping[str, torch.Tensor]) -> float:
    stacked = torch.stack([presence[c] for c in presence])
    informative = (stacked.any(0) & ~stacked.all(0)).nonzero().flatten().tolist()
    aucs = []
    clients = list(presence)
    for f in informative:
        labels = torch.tensor([float(presence[c][f]) for c in clients])
        aucs.append(roc_auc(labels, torch.tensor([float(scores[c][f]) for c in clients])))
    return mean_or_nan(aucs)


def probe_feedback(fed: Federation, *, seed: int = 0) -> dict[str, Any]:
    """Run the three measurements on a finished FedSheafHN run (the server's last round).

    Raises:
        InvalidInputError: The run is not FedSheafHN or has no feedback yet.
    """
    return _probe(fed.server.state.get("sheafhn"), fed.parties, list(fed.client_ids), fed.transport.session, seed=seed)


def _probe(server: Any, parties: Mapping[str, Any], clients: list[str], session: bytes, *, seed: int) -> dict[str, Any]:
    """:func:`probe_feedback` on the server's state (the adversary's) and the clients' (the truth)."""
    if server is None or not server.last_feedback:
        raise InvalidInputError("probe_feedback needs a FedSheafHN federation that ran at least one round")
    truth = _owners(parties, clients, session)
    if set(truth) != set(server.last_feedback):
        raise InvalidInputError("the server's feedback pseudonyms do not match the clients' (another session?)")
    guess = server_guess(list(server.last_feedback), clients, torch.Generator().manual_seed(seed))
    errors, scores, presence = [], {}, {}
    for nym, delta in server.last_feedback.items():
        cid = truth[nym]
        params = dict(parties[cid].state["model"].named_parameters())
        rebuilt = {k: server.last_generated[nym][k].double() + delta[k].double() for k in delta}
        num = sum(float((rebuilt[k] - params[k].detach().double().cpu()).norm()) ** 2 for k in rebuilt) ** 0.5
        den = sum(float(params[k].detach().double().norm()) ** 2 for k in rebuilt) ** 0.5
        errors.append(num / den if den > 0 else float("nan"))
        scores[nym] = feature_scores(delta[INPUT_LAYER], server.last_generated[nym][INPUT_LAYER])
        presence[cid] = (parties[cid].state["data"].x != 0).any(0).cpu()
    by_owner = {truth[n]: s for n, s in scores.items()}
    by_guess = {guess[n]: s for n, s in scores.items()}
    return {
        "pseudonymous": set(server.last_feedback) != set(clients),
        "inversion_rel_error": max(errors),
        "feature_auc": _feature_auc(by_owner, presence),
        "attributed_feature_auc": _feature_auc(by_guess, presence),
        "linkage_accuracy": sum(guess[n] == truth[n] for n in truth) / len(truth),
        "chance_linkage": 1.0 / len(truth),
    }


@register_attack
class SheafFeedback(Attack):
    """The curious server's reading of FedSheafHN's feedback (:func:`probe_feedback` as an audit attack).

    The primary metric is ``feature_auc`` (which words occur in a client's documents, from the
    first-layer update it sent; scored against the true sender of each pseudonym, i.e. the
    content leak whatever the attribution), named ``auc``; the details carry the update
    inversion error, the attributed AUC and the linkage accuracy. With DP on
    ``fedsheafhn/feedback`` the server's copy is the noised update, so the attack reads that.
    """

    name = "sheaf_feedback"
    metric = "auc"
    metric_doc = ("per-feature ROC-AUC across clients (mean): which words occur in a client's data, from the "
                  "FedSheafHN feedback the server reads (content, scored against each pseudonym's true sender)")

    def supports(self, ctx: AdversaryContext) -> Support:
        if ctx.run.method != "fedsheafhn":
            return Support(False, "only FedSheafHN sends hypernetwork feedback")
        if "server" not in ctx.view.members:
            return Support(False, "needs the server: only it reads the feedback")
        if ctx.view.own_state("server", "sheafhn") is None:
            return Support(False, "no FedSheafHN server state in the adversary's view")
        return Support(True)

    def run(self, ctx: Any) -> AttackOutcome:
        server = ctx.adversary.view.own_state("server", "sheafhn")
        if server is None or not server.last_feedback:
            return blind_outcome(self.chance, "the server holds no feedback (no round ran)")
        targets = [c for c in ctx.truth.clients if c in ctx.adversary.targets]
        probe = _probe(server, ctx.truth.parties, list(ctx.truth.clients), ctx.adversary.run.session, seed=ctx.seed)
        value = probe["feature_auc"]
        details = {k: v for k, v in probe.items() if k != "feature_auc"}
        details["targets"] = len(targets)
        return AttackOutcome(value=self.chance if math.isnan(value) else value, chance=self.chance, details=details,
                             note="content of each update scored against its true sender; "
                                  "attributed_feature_auc is what the server can say about a named client")


__all__ = ["SheafFeedback", "owners", "probe_feedback", "server_guess"]
