"""GraphSage (PyG's ``GraphSAGE``) whose first layer reads a large, sparse feature matrix as sparse.

Why: Coauthor-CS (FedSage's table) has 18,333 nodes x 6,805 bag-of-words features, 0.9% of
them non-zero. PyG's first ``SAGEConv`` averages the raw 6,805-wide rows over the neighbours and
then multiplies two dense (N, 6805) matrices by the weights: about 32 GFLOP per forward; one
LocSage run had not finished after 10 minutes on 2 CPU cores (docs/performance.md). The layer is
linear before its activation, so ``W_l·mean_j(x_j) + b + W_r·x_i`` equals ``mean_j(W_l·x_j) + b + W_r·x_i``:
projecting first with a sparse matmul reads only the non-zeros, and the mean then runs over
64-wide rows. The parameters and their names are PyG's (``convs.0.lin_l.weight`` ...), so a
model's state is the same as ``GraphSAGE``'s; the output agrees to float rounding.

Only inputs that gain from it take the sparse path (:data:`SPARSE_FEATURES_FROM` entries or
more, at most :data:`SPARSE_DENSITY` non-zero, not requiring grad); every other input runs PyG's
own layer, bit for bit.

Sampled mini-batches (GraphSage's training in the FedSage paper) read a few thousand rows per
step: :meth:`GraphSage.batch_features` hands the first layer those rows of the cached sparse view
as a CSR tensor, which it projects as a weighted bag of weight columns (one ``embedding_bag``: about
60 non-zeros per Coauthor-CS row) instead of two dense (rows x 6,805) products per step.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import SAGEConv
from torch_geometric.nn.models import GraphSAGE

from securefg.models.tensor_cache import TensorCache, derived

#: Feature matrices with fewer entries keep PyG's dense layer (Cora's 3.9 M entries and PubMed's
#: 9.9 M do). Coauthor-CS (125 M; an owner's share at M = 10, about 12.5 M) and Physics take the
#: sparse path; Computers (10.5 M) too where its features are sparse enough (SPARSE_DENSITY).
SPARSE_FEATURES_FROM = 10_000_000
#: Above this fraction of non-zeros the dense product is as fast (and FedSage+'s mended graphs,
#: with their dense generated rows, stay dense).
SPARSE_DENSITY = 0.1

SparseView = tuple[Tensor, Tensor]
"""``(x, x transposed)``, both CSR: the forward product reads the first, the weight gradient the second."""

#: Each feature tensor's sparse view, or None when dense (:func:`securefg.models.tensor_cache.derived`).
_SPARSE_VIEWS: TensorCache = {}


def sparse_view(x: Tensor) -> SparseView | None:
    """``x`` (and its transpose) as CSR matrices when the sparse first layer gains from it, else ``None``.

    Made once per feature tensor (and again if it is modified in place)."""
    if x.dim() != 2 or x.numel() < SPARSE_FEATURES_FROM or x.requires_grad or x.is_sparse:
        return None

    def make() -> SparseView | None:
        dense = int(torch.count_nonzero(x)) > SPARSE_DENSITY * x.numel()
        return None if dense else (x.to_sparse_csr(), x.t().contiguous().to_sparse_csr())

    return derived(_SPARSE_VIEWS, x, None, make)


class _SparseProjection(torch.autograd.Function):
    """``x @ W.T`` for a constant sparse ``x``; the weight gradient reads the stored transpose
    (7x faster on Coauthor-CS than differentiating through ``torch.sparse.mm``)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, x_t: Tensor, weight: Tensor) -> Tensor:
        ctx.save_for_backward(x_t)
        return torch.sparse.mm(x, weight.t())

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, Tensor]:
        (x_t,) = ctx.saved_tensors
        return None, None, torch.sparse.mm(x_t, grad).t()


def _project(view: SparseView, weight: Tensor) -> Tensor:
    return _SparseProjection.apply(view[0], view[1], weight)


def csr_rows(x: Tensor, rows: Tensor) -> Tensor:
    """The ``rows`` of a CSR matrix ``x``, in that order, as a CSR matrix (no dense copy)."""
    crow, col, values = x.crow_indices(), x.col_indices(), x.values()
    start = crow[rows]
    counts = crow[rows + 1] - start
    offsets = torch.zeros(rows.numel() + 1, dtype=crow.dtype, device=crow.device)
    offsets[1:] = torch.cumsum(counts, 0)
    segment = torch.repeat_interleave(torch.arange(rows.numel(), device=crow.device), counts)
    picked = start[segment] + torch.arange(int(offsets[-1]), device=crow.device) - offsets[segment]
    return torch.sparse_csr_tensor(offsets, col[picked], values[picked], size=(rows.numel(), x.size(1)),
                                   check_invariants=False)


def _project_rows(rows: Tensor, weights: Tensor) -> Tensor:
    """``rows @ weights.T`` for CSR ``rows``: each row a bag of weight columns weighted by its values."""
    # a contiguous (in x out) table: each bag then reads whole rows (strided reads made it 9x slower)
    return F.embedding_bag(rows.col_indices(), weights.t().contiguous(), rows.crow_indices(), mode="sum",
                           per_sample_weights=rows.values(), include_last_offset=True)


class SparseInputSAGEConv(SAGEConv):
    """PyG's ``SAGEConv`` (mean or sum aggregation, root weight, no projection or normalisation)
    that projects a sparse-enough input before aggregating it (see the module docstring)."""

    def forward(self, x: Any, edge_index: Any, size: Any = None) -> Tensor:  # type: ignore[override]
        if isinstance(x, Tensor) and x.layout == torch.sparse_csr:  # a mini-batch's rows (GraphSage.batch_features)
            if not self._linear_before_activation():
                raise TypeError("SparseInputSAGEConv: CSR feature rows need a layer that is linear before its "
                                "activation (mean or sum aggregation, root weight, no projection or normalisation)")
            width = self.lin_l.weight.size(0)
            h, root = _project_rows(x, torch.cat([self.lin_l.weight, self.lin_r.weight])).split(width, dim=1)
        else:
            xs = sparse_view(x) if isinstance(x, Tensor) and self._linear_before_activation() else None
            if xs is None:
                return super().forward(x, edge_index, size)
            h, root = _project(xs, self.lin_l.weight), _project(xs, self.lin_r.weight)
        out = self.propagate(edge_index, x=(h, h), size=size)
        if self.lin_l.bias is not None:
            out = out + self.lin_l.bias
        return out + root

    def _linear_before_activation(self) -> bool:
        return (not self.project and not self.normalize and self.root_weight
                and str(self.aggr) in ("mean", "sum", "add"))


class GraphSage(GraphSAGE):
    """PyG's ``GraphSAGE`` whose first layer is :class:`SparseInputSAGEConv` (same parameters)."""

    def init_conv(self, in_channels: Any, out_channels: int, **kwargs: Any) -> SAGEConv:
        if len(self.convs) == 0 and isinstance(in_channels, int):
            return SparseInputSAGEConv(in_channels, out_channels, **kwargs)
        return super().init_conv(in_channels, out_channels, **kwargs)

    def batch_features(self, x: Tensor, nodes: Tensor) -> Tensor:
        """The rows ``nodes`` of ``x`` as this model reads a mini-batch fastest: CSR rows of the cached
        sparse view where the first layer takes the sparse path, else ``x[nodes]``."""
        first = self.convs[0]
        view = sparse_view(x) if isinstance(first, SparseInputSAGEConv) and first._linear_before_activation() else None
        return x[nodes] if view is None else csr_rows(view[0], nodes)


__all__ = ["SPARSE_DENSITY", "SPARSE_FEATURES_FROM", "GraphSage", "SparseInputSAGEConv", "SparseView", "csr_rows", "sparse_view"]
