"""Hop2Vec: FedStruct's learned node structure features (Sec. 5, Alg. 5)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from securefg.errors import InvalidInputError


class Hop2Vec(nn.Module):
    r"""Trainable NSF table :math:`S \in \mathbb{R}^{n \times d_s}`, random at start.

    Unlike Node2Vec it needs no global graph and no separate pre-training: S is learned jointly
    with the model through :math:`\bar{A}`, so its gradient (Eq. 24,
    :math:`\nabla_S \mathcal{L}_i = \sum_{v \in \tilde{V}_i} \bar{a}_v (\hat{y}_v - y_v)^\top` when
    ``g`` is dropped) is what clients exchange each round. We keep the ``g`` MLP (notes B6: Table 4
    lists ``d_s = 256`` with ``θ_s`` layers), so the gradient flows through ``g`` first.

    Args:
        num_nodes (int): Number of nodes ``n``.
        embedding_dim (int): NSF width ``d_s``.
        init_std (float, optional): Std of the Gaussian initialisation. (default: :obj:`1.0`)
        generator (torch.Generator, optional): Seeds the initialisation. (default: :obj:`None`)
    """

    def __init__(
        self,
        num_nodes: int,
        embedding_dim: int,
        *,
        init_std: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if num_nodes < 1 or embedding_dim < 1 or init_std <= 0:
            raise InvalidInputError(
                f"Hop2Vec needs num_nodes, embedding_dim >= 1 and init_std > 0, got "
                f"{num_nodes}, {embedding_dim}, {init_std}"
            )
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(num_nodes, embedding_dim))
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        r"""Re-draw S from :math:`\mathcal{N}(0, \text{init\_std}^2)`."""
        with torch.no_grad():
            init = torch.randn(self.weight.shape, generator=generator) * self.init_std
            self.weight.copy_(init)

    def forward(self, index: Tensor | None = None) -> Tensor:
        """Return S, or its rows ``index`` (a differentiable view for the gradient to flow)."""
        return self.weight if index is None else self.weight[index]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.weight.size(0)}, {self.weight.size(1)})"
