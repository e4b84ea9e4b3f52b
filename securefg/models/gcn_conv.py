"""PyG's GCNConv that normalises each graph once instead of on every forward.

Why: full-batch training calls a GCN layer on the same client graph every epoch, and PyG's
``GCNConv(cached=False)`` rebuilds ``D^-1/2 (A + I) D^-1/2`` each time (self-loops, degrees,
a coalesce and a sort of the whole edge list). On a Computers METIS client under FedSheafHN that
rebuild was 15% of the run's CPU (py-spy, docs/performance.md). PyG's own ``cached=True`` keeps
the first graph a layer sees and reuses it for every later one, which is wrong for our models:
one model instance is scored on other graphs (the global graph, FedSage+'s mended graphs). Here
the normalised adjacency is cached *per graph tensor* (keyed by the tensor's identity and
in-place version, released with the tensor), so a layer called on another graph normalises that
one. The output is bit-identical to PyG's layer: the same ``gcn_norm`` runs, only once.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.nn import GCNConv as _PyGGCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from securefg.models.tensor_cache import TensorCache, derived

#: ``(improved, add_self_loops, flow, dtype, num_nodes)``: what ``gcn_norm``'s output depends on
#: besides the graph itself.
_NormKey = tuple[bool, bool, str, torch.dtype, int]
_Normalised = tuple[Tensor, "Tensor | None"]

#: The normalised graphs, per graph tensor (:func:`securefg.models.tensor_cache.derived`).
_NORMALISED: TensorCache = {}


def normalised_graph(conv: _PyGGCNConv, edge_index: Tensor, num_nodes: int, dtype: torch.dtype) -> _Normalised:
    """``gcn_norm(edge_index)`` under ``conv``'s settings, computed once per graph tensor.

    Works for an ``edge_index`` (returns the edge list with self-loops and its weights) and for a
    torch sparse adjacency (returns the normalised sparse matrix and ``None``). Under
    ``torch.inference_mode`` nothing is cached: an inference tensor cannot take part in a later
    backward pass."""
    def make() -> _Normalised:
        with torch.no_grad():  # the adjacency is a constant of the layer, never a leaf of the graph
            return gcn_norm(edge_index, None, num_nodes, conv.improved, conv.add_self_loops, conv.flow, dtype)

    if torch.is_inference_mode_enabled():
        return make()
    key: _NormKey = (bool(conv.improved), bool(conv.add_self_loops), str(conv.flow), dtype, int(num_nodes))
    return derived(_NORMALISED, edge_index, key, make)


class GCNConv(_PyGGCNConv):
    """PyG's :class:`~torch_geometric.nn.GCNConv` (same arguments, parameters and state-dict
    names) whose normalised adjacency is made once per graph tensor (see the module docstring).

    Calls with an explicit ``edge_weight``, a PyG ``SparseTensor``, ``normalize=False`` or
    ``cached=True`` run PyG's own forward unchanged."""

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:  # type: ignore[override]
        if (not self.normalize or self.cached or edge_weight is not None or not isinstance(x, Tensor)
                or not isinstance(edge_index, Tensor) or edge_index.requires_grad):
            return super().forward(x, edge_index, edge_weight)
        graph, weight = normalised_graph(self, edge_index, x.size(self.node_dim), x.dtype)
        out = self.propagate(graph, x=self.lin(x), edge_weight=weight)
        if self.bias is not None:
            out = out + self.bias
        return out
