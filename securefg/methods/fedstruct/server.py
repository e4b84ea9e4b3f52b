"""The server half common to every variant: hold θ and apply the aggregated gradient (Eqs. 6-8).

FedSGD: one full-batch gradient per round, ``θ ← Adam(θ, Σ_i ∇_θ ℒ_i)``, where every client's
loss is already divided by the global labelled count ``|Ṽ|``. Adam rather than the paper's plain
step follows the FedStruct code and the reference trainer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from securefg.methods.optim import adam
from securefg.models.fedstruct import FedStructConfig, FedStructDGCN

THETA = "theta/"


class ServerOptimizer:
    """θ and its optimiser; the server never sees a client's individual gradient."""

    def __init__(self, model: FedStructDGCN, config: FedStructConfig) -> None:
        self.model = model
        self.opt = adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)

    def theta(self, prefix: str = "") -> dict[str, Tensor]:
        """θ (or the part named ``prefix*``) for the broadcast."""
        return {k: p.detach().clone() for k, p in self.model.named_parameters() if k.startswith(prefix)}

    def step(self, total: dict[str, Tensor], *, extra: dict[str, Tensor] | None = None) -> None:
        """Apply summed gradients ``total["theta/<name>"]`` (plus server-computed ``extra``)."""
        self.opt.zero_grad(set_to_none=True)
        extra = extra or {}
        for name, p in self.model.named_parameters():
            g = total.get(THETA + name)
            if name in extra:
                g = extra[name] if g is None else g.to(p.dtype) + extra[name]
            if g is not None:
                p.grad = g.to(p.device, p.dtype).clone()
        self.opt.step()

    def state_dict(self) -> dict[str, object]:
        return {"model": self.model.state_dict(), "opt": self.opt.state_dict()}

    def load_state_dict(self, sd: dict[str, object]) -> None:
        self.model.load_state_dict(sd["model"])  # type: ignore[arg-type]
        self.opt.load_state_dict(sd["opt"])  # type: ignore[arg-type]


def structure_optimizer(table: Tensor, config: FedStructConfig) -> tuple[Tensor, torch.optim.Optimizer]:
    """A trainable Hop2Vec table and its Adam (λ_s, same weight decay as θ)."""
    s = table.clone().requires_grad_(True)
    return s, adam([s], lr=config.lr_structure, weight_decay=config.weight_decay)


def prefixed(grads: dict[str, Tensor]) -> dict[str, Tensor]:
    """Name gradients for the ``fedstruct/update`` aggregate."""
    return {THETA + k: g.detach() for k, g in grads.items()}
