"""FED-PUB's masked GCN: every weight matrix W is used as ``W * mu`` with a learnable mask ``mu``.

Baek et al. (ICML 2023), §4.2 and the reference ``MaskedGCN``: ``conv1: d->h``, ReLU, dropout,
``conv2: h->h``, ReLU, dropout, ``clsif: h->C``; each of the three weight matrices has a mask of
its own shape, initialised to ones; biases are not masked. The mask is the client's personal part
(it never leaves the client); the weights and biases are what FED-PUB aggregates.

In eval mode, mask entries with ``|mu| < prune_threshold`` count as zero (the paper's sparsified
masks; the reference code's ``l1 = 1e-3``), so evaluation and the functional embedding see the
sparse model.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from securefg.models.gcn_conv import GCNConv

#: Suffix of every mask parameter's state-dict name; everything else is shared with the server.
MASK_SUFFIX = "mask"


class MaskedLinear(nn.Module):
    """``y = x (W * mu)^T + b`` with a learnable mask ``mu`` of W's shape.

    Args:
        in_features (int): Input size.
        out_features (int): Output size.
        bias (bool): Add a learnable (unmasked) bias. (default: ``True``)
        prune_threshold (float): In eval mode, mask entries below this magnitude are zero.
            (default: ``1e-3``)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, prune_threshold: float = 1e-3) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.prune_threshold = prune_threshold
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.mask = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)  # GCNConv's glorot initialiser
        nn.init.ones_(self.mask)
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features)
            nn.init.uniform_(self.bias, -bound, bound)

    def effective_mask(self) -> torch.Tensor:
        """The mask as the forward pass uses it: pruned in eval mode."""
        if self.training:
            return self.mask
        return self.mask * (self.mask.abs() >= self.prune_threshold)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * self.effective_mask(), self.bias)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


def _masked_conv(in_channels: int, out_channels: int, prune_threshold: float) -> GCNConv:
    """PyG's GCNConv (symmetric normalisation, self-loops) whose linear map is masked."""
    conv = GCNConv(in_channels, out_channels, cached=False)
    conv.lin = MaskedLinear(in_channels, out_channels, bias=False, prune_threshold=prune_threshold)
    conv.reset_parameters()
    return conv


class MaskedGCN(nn.Module):
    """Two masked GCN layers and a masked linear classifier.

    Args:
        in_channels (int): Node feature size d.
        out_channels (int): Number of classes C.
        hidden_channels (int): Hidden size h. (default: ``128``)
        dropout (float): Dropout after each convolution. (default: ``0.5``)
        prune_threshold (float): Eval-mode mask pruning threshold. (default: ``1e-3``)

    Shapes:
        - input: node features ``(N, d)``, edge_index ``(2, E)``
        - output: logits ``(N, C)``; :meth:`embed` gives ``(N, h)``
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden_channels: int = 128,
        dropout: float = 0.5,
        prune_threshold: float = 1e-3,
    ) -> None:
        super().__init__()
        if min(in_channels, hidden_channels, out_channels) < 1:
            raise ValueError(f"MaskedGCN sizes must be positive, got ({in_channels}, {hidden_channels}, {out_channels})")
        self.conv1 = _masked_conv(in_channels, hidden_channels, prune_threshold)
        self.conv2 = _masked_conv(hidden_channels, hidden_channels, prune_threshold)
        self.clsif = MaskedLinear(hidden_channels, out_channels, prune_threshold=prune_threshold)
        self.dropout = dropout

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Output of ``conv2`` before its activation (FED-PUB's functional embedding)."""
        h = F.relu(self.conv1(x, edge_index))
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(h, edge_index)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.embed(x, edge_index))
        h = F.dropout(h, self.dropout, self.training)
        return self.clsif(h)

    def masks(self) -> list[nn.Parameter]:
        """The three mask parameters (the client's personal, never-shared part)."""
        return [p for n, p in self.named_parameters() if n.endswith(MASK_SUFFIX)]

    def shared_state(self) -> dict[str, torch.Tensor]:
        """Detached CPU copies of the weights and biases: what FED-PUB aggregates (no masks)."""
        return {k: v.detach().to("cpu").clone() for k, v in self.state_dict().items() if not k.endswith(MASK_SUFFIX)}

    def mask_density(self) -> float:
        """Fraction of mask entries that survive eval-mode pruning."""
        kept = total = 0
        for m in self.modules():
            if isinstance(m, MaskedLinear):
                kept += int((m.mask.detach().abs() >= m.prune_threshold).sum())
                total += m.mask.numel()
        return kept / max(total, 1)

    def __repr__(self) -> str:
        return f"MaskedGCN({self.conv1.in_channels}, {self.clsif.out_features}, hidden={self.conv1.out_channels})"
