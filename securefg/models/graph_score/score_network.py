"""The permutation-equivariant score network of EDP-GNN (structure only, no BatchNorm)."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from securefg.errors import InvalidInputError
from securefg.models.graph_score.config import EDPScoreConfig
from securefg.models.graph_score.edp_layer import EDPLayer
from securefg.models.graph_score.masks import pair_mask
from securefg.models.graph_score.mlp import ConditionalMLP


class EDPScoreNetwork(nn.Module):
    r"""EDP-GNN score network (Niu et al., AISTATS 2020, https://arxiv.org/abs/2003.00638).

    It estimates :math:`s_\theta(\tilde{\mathbf{A}}, c) \approx
    \nabla_{\tilde{\mathbf{A}}} \log q_\sigma(\tilde{\mathbf{A}})`.

    The noisy adjacency enters as two channels :math:`[\tilde{\mathbf{A}}, 1 - \tilde{\mathbf{A}}]`
    with a constant node feature; a stack of :class:`EDPLayer` refines node features and
    adjacency channels; a final conditioned MLP reads the concatenation of all channels at each
    pair and returns one score per entry. Every operation is per node or per node pair with
    shared weights, so permuting the nodes permutes the output the same way.

    Args:
        config (EDPScoreConfig, optional): Sizes. (default: :obj:`EDPScoreConfig()`)

    Shapes:
        - **input:** adj :math:`(B, N, N)` symmetric, flags :math:`(B, N)` in {0, 1},
          condition :math:`(B,)` int64 in ``[0, num_conditions)``
        - **output:** :math:`(B, N, N)` symmetric, zero on the diagonal and on padding
    """

    def __init__(self, config: EDPScoreConfig | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else EDPScoreConfig()
        cfg = self.config
        widths = [cfg.input_features] + [cfg.node_features] * cfg.num_layers
        self.layers = nn.ModuleList(
            EDPLayer(
                widths[i],
                widths[i + 1],
                cfg.channels[i],
                cfg.channels[i + 1],
                gin_hidden=cfg.gin_hidden,
                num_conditions=cfg.num_conditions,
                common_neighbors=cfg.common_neighbors,
            )
            for i in range(cfg.num_layers)
        )
        total_channels = sum(cfg.channels)
        self.readout = ConditionalMLP(
            total_channels,
            2 * total_channels,
            1,
            num_layers=3,
            num_conditions=cfg.num_conditions,
        )

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every parameter from ``generator`` (a shared seed gives equal nets)."""
        for layer in self.layers:
            cast(EDPLayer, layer).reset_parameters(generator)
        self.readout.reset_parameters(generator)

    def forward(self, adj: torch.Tensor, flags: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Return the masked, symmetric score for every entry of ``adj``."""
        self._check_inputs(adj, flags, cond)
        mask = pair_mask(flags)
        channels = torch.stack([adj, 1.0 - adj], dim=1) * mask.unsqueeze(1)
        x = flags.unsqueeze(-1).expand(-1, -1, self.config.input_features)
        stacked = [channels]
        for layer in self.layers:
            x, channels = layer(x, channels, flags, cond)
            stacked.append(channels)
        pairs = torch.cat(stacked, dim=1).permute(0, 2, 3, 1)  # B x N x N x sum(C)
        return self.readout(pairs, cond).squeeze(-1) * mask

    def _check_inputs(self, adj: torch.Tensor, flags: torch.Tensor, cond: torch.Tensor) -> None:
        if adj.dim() != 3 or adj.shape[1] != adj.shape[2]:
            raise InvalidInputError(f"adj must have shape (B, N, N), got {tuple(adj.shape)}")
        if flags.shape != adj.shape[:2]:
            raise InvalidInputError(f"flags must have shape {tuple(adj.shape[:2])}, got {tuple(flags.shape)}")
        if cond.shape != adj.shape[:1] or cond.dtype != torch.long:
            raise InvalidInputError(
                f"cond must be int64 of shape ({adj.shape[0]},), got {cond.dtype} {tuple(cond.shape)}"
            )
        if cond.numel() and (int(cond.min()) < 0 or int(cond.max()) >= self.config.num_conditions):
            raise InvalidInputError(
                f"cond values must lie in [0, {self.config.num_conditions}), "
                f"got [{int(cond.min())}, {int(cond.max())}]"
            )

    def __repr__(self) -> str:
        cfg = self.config
        return (
            f"{self.__class__.__name__}(layers={cfg.num_layers}, node_features={cfg.node_features}, "
            f"channels={list(cfg.channels)}, num_conditions={cfg.num_conditions})"
        )
