"""FedStruct's model as an adversary holds it: θ from the plaintext ``fedstruct/model`` broadcast.

Every FedStruct client must read θ to predict (FedSGD: the server broadcasts θ each round, in the
clear under every stack), so any client, and the server that sent it, holds the global model.
The architecture is public (the method's options), so the adversary rebuilds the decoupled GCN
and scores a node from its features alone with the feature branch :math:`f_\\theta` (it lacks
the target's Ā rows and local edges, which is exactly what it wants to find).
"""

from __future__ import annotations

from typing import Any

import torch

from securefg.attacks.view import AdversaryView

MODEL_TAG = "fedstruct/model"
#: Broadcast entries that are not θ (the labelled count and, for Hop2Vec, the summed ∇S).
NOT_THETA = frozenset({"num_labeled", "nsf_grad"})


def held_theta(view: AdversaryView) -> dict[str, torch.Tensor] | None:
    """The freshest θ the adversary holds: the server's own model, else the last broadcast."""
    if "server" in view.members:
        opt = view.own_state("server", "server_opt")
        if opt is not None and hasattr(opt, "theta"):
            return {k: v.detach().double().cpu() for k, v in opt.theta().items()}
    recs = [r for r in view.records(MODEL_TAG) if view.readable(r)]
    for rec in sorted(recs, key=lambda r: r.round, reverse=True):
        t = view.decode(rec)
        if t is not None:
            return {k: v.double() for k, v in t.items() if k not in NOT_THETA}
    return None


def feature_posteriors(run: Any, theta: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``softmax(f_θ(x))`` per row of ``x``: the feature branch of the public architecture."""
    from securefg.methods.fedstruct.settings import parse_settings
    from securefg.models.fedstruct import FedStructDGCN

    cfg = run.config
    settings = parse_settings(dict(run.options), lr=float(cfg.get("lr") or 0.002),
                              weight_decay=float(cfg.get("weight_decay") or 5e-4))
    c = settings.config
    model = FedStructDGCN(run.num_features, c.structure_dim, run.num_classes, feature_hidden=c.feature_hidden,
                          structure_hidden=c.structure_hidden, dropout=c.dropout, input_dropout=c.input_dropout,
                          norm=c.norm).double()
    params = dict(model.named_parameters())
    missing = sorted(k for k in params if k.startswith("f.") and k not in theta)
    if missing:
        raise ValueError(f"the held FedStruct model lacks {missing}")
    with torch.no_grad():
        for k, p in params.items():
            if k in theta:
                p.copy_(theta[k].view_as(p))
    model.eval()
    with torch.no_grad():
        return torch.softmax(model.f(x.double()), -1)


__all__ = ["MODEL_TAG", "feature_posteriors", "held_theta"]
