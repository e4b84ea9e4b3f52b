r"""FedSage+'s owner half: NeighGen's losses, the peer-side gradient, and graph mending.

Every function runs *as one owner* on its own model and data; the cross-owner exchange that
links them is in :mod:`.federated`.

Losses (paper Eq. (6), with the reference code's per-feature mean squared error):

.. math::
    L^d = \frac{1}{|\bar{V}_i|}\sum_v \mathrm{SmoothL1}(\tilde{n}_v - n_v), \qquad
    L^f = \frac{1}{|B|}\sum_{v \in B}\sum_{p < \min(n_v, P)}
          \min_{u \in N_{G_i}(v) \cap V_i^h} \tfrac{1}{d}\|\tilde{x}_v^p - x_u\|^2

and the cross-owner term of owner :math:`i` against peer :math:`j` on a batch :math:`B`,
:math:`L^f_{i,j} = \frac{1}{|B|}\sum_{v, p} \min_{u \in V_j} \frac{1}{d}\|\tilde{x}_v^p - x_u\|^2`,
whose gradient with respect to :math:`\tilde{x}_v^p` is
:math:`\frac{2}{d|B|}(\tilde{x}_v^p - x_{u^*})`: peer :math:`j` computes it against its own
nodes and only the sum over peers reaches :math:`i`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from securefg.methods.fedsage.impair import ImpairedGraph, hidden_neighbour_block
from securefg.models.neighgen import NeighGen
from securefg.models.sage import sparse_view

#: Rows of generated features matched against a peer's nodes at once (bounds cdist memory).
MATCH_CHUNK = 1024


def greedy_loss(generated: Tensor, true: Tensor, mask: Tensor, counts: Tensor) -> Tensor:
    """Each of the first ``min(n_v, P)`` generated vectors against its nearest true hidden
    neighbour (mean squared error per feature), summed per node and averaged over nodes.

    Args:
        generated (Tensor): ``(b, P, d)``.
        true (Tensor): ``(b, K, d)`` hidden neighbours' features, padded.
        mask (Tensor): ``(b, K)``, which entries of :obj:`true` are real.
        counts (Tensor): ``(b,)`` the true :math:`n_v`.
    """
    d = generated.size(-1)
    dist = torch.cdist(generated, true).pow(2) / d  # (b, P, K)
    dist = dist.masked_fill(~mask[:, None, :], float("inf"))
    best = dist.min(-1).values  # (b, P)
    p = torch.arange(generated.size(1), device=generated.device)
    used = p[None, :] < counts.clamp(max=generated.size(1))[:, None]
    return torch.where(used, best, torch.zeros_like(best)).sum(1).mean()


def draw_noise(shape: tuple[int, ...], generator: torch.Generator, device: torch.device) -> Tensor:
    """fGen's input noise :math:`N(0, I)`, drawn from the owner's own generator."""
    return torch.randn(shape, generator=generator).to(device)


def local_step(model: NeighGen, opt: torch.optim.Optimizer, graph: ImpairedGraph, x_full: Tensor, *, batch: int,
               max_neighbours: int, generator: torch.Generator, lambda_d: float = 1.0, lambda_f: float = 1.0) -> float:
    r"""One Adam step of :math:`\lambda^d L^d + \lambda^f L^f` on the impaired graph (a batch of
    nodes that miss neighbours for :math:`L^f`); returns the loss."""
    model.train()
    opt.zero_grad()
    z = model.embed(graph.x, graph.edge_index)
    loss = lambda_d * F.smooth_l1_loss(model.degrees(z), graph.missing)
    candidates = graph.with_missing
    if candidates.numel():
        pick = candidates[torch.randperm(candidates.numel(), generator=generator)[:batch].to(candidates.device)]
        true, mask = hidden_neighbour_block(graph, x_full, pick, max_neighbours, generator)
        gen = model.features(z[pick], draw_noise((pick.numel(), z.size(1)), generator, z.device))
        loss = loss + lambda_f * greedy_loss(gen, true, mask, graph.missing[pick])
    loss.backward()
    opt.step()
    return float(loss.detach())


def local_feature_loss(model: NeighGen, graph: ImpairedGraph, x_full: Tensor, z: Tensor, *, batch: int,
                       max_neighbours: int, generator: torch.Generator) -> Tensor:
    """:math:`L^f` on a batch of nodes that miss neighbours (0 if none does), from fixed embeddings."""
    candidates = graph.with_missing
    if not candidates.numel():
        return z.new_zeros(())
    pick = candidates[torch.randperm(candidates.numel(), generator=generator)[:batch].to(candidates.device)]
    true, mask = hidden_neighbour_block(graph, x_full, pick, max_neighbours, generator)
    gen = model.features(z[pick], draw_noise((pick.numel(), z.size(1)), generator, z.device))
    return greedy_loss(gen, true, mask, graph.missing[pick])


@torch.no_grad()
def nearest_rows(queries: Tensor, table: Tensor) -> Tensor:
    r"""Index of the nearest row of ``table`` (Euclidean) for every row of ``queries``.

    A large sparse ``table`` (an owner's share of Coauthor-CS's bag-of-words rows, 0.9% non-zero;
    the threshold is GraphSage's, :func:`~securefg.models.sage.sparse_view`) is matched through
    its CSR view: :math:`\arg\min_u \|q - x_u\|^2 = \arg\min_u (\|x_u\|^2 - 2\, q \cdot x_u)`,
    products over the non-zeros only instead of cdist's dense ones.
    """
    if queries.size(0) == 0:
        return torch.zeros(0, dtype=torch.long, device=queries.device)
    view = sparse_view(table)
    if view is None:
        return torch.cat([torch.cdist(chunk, table).argmin(1) for chunk in queries.split(MATCH_CHUNK)])
    csr = view[0]
    row_of_value = torch.repeat_interleave(torch.arange(table.size(0), device=table.device),
                                           csr.crow_indices().diff())
    square_norms = torch.zeros(table.size(0), dtype=table.dtype, device=table.device)
    square_norms.index_add_(0, row_of_value, csr.values().square())
    return torch.cat([(square_norms[:, None] - 2.0 * torch.sparse.mm(csr, chunk.t())).argmin(0)
                      for chunk in queries.split(MATCH_CHUNK)])


@torch.no_grad()
def peer_gradient(generated: Tensor, own_x: Tensor) -> tuple[Tensor, float]:
    r"""As peer :math:`j`: the gradient of :math:`\sum_{v,p} \min_{u \in V_j}\frac{1}{d}\|\tilde{x}_v^p - x_u\|^2`
    with respect to every generated vector, ``2 (x~ - x_{u*}) / d``; and the loss itself.

    Args:
        generated (Tensor): ``(m, d)`` another owner's generated vectors.
        own_x (Tensor): ``(n_j, d)`` this owner's node features.
    """
    d = generated.size(-1)
    match = own_x[nearest_rows(generated, own_x)]
    diff = generated - match
    return 2.0 * diff / d, float(diff.pow(2).sum() / d)


@torch.no_grad()
def mend(data: Data, model: NeighGen, *, generator: torch.Generator) -> tuple[Data, Tensor]:
    r"""Owner :math:`i`'s mended graph :math:`G'_i`: every node :math:`v` gets
    :math:`\min(\mathrm{round}(\tilde{n}_v), P)` generated leaf neighbours (edges both ways).

    NeighGen runs on the whole :math:`G_i` (it learned on :math:`\bar{G}_i` what a node misses;
    here the missing neighbours are those in other owners). Generated nodes carry no label and
    are outside every mask.

    Returns:
        (the mended graph, the generated-neighbour count per original node).
    """
    model.eval()
    x, ei = data.x, data.edge_index
    n = int(data.num_nodes)
    z = model.embed(x, ei)
    counts = model.degrees(z).round().clamp(0, model.num_pred).long()
    gen = model.features(z, draw_noise(tuple(z.shape), generator, z.device))  # (n, P, d)
    keep = torch.arange(model.num_pred, device=x.device)[None, :] < counts[:, None]  # (n, P)
    owners = torch.arange(n, device=x.device)[:, None].expand(-1, model.num_pred)[keep]
    new_x = gen[keep].to(x.dtype)
    new_ids = torch.arange(n, n + new_x.size(0), device=x.device)
    new_edges = torch.cat([torch.stack([owners, new_ids]), torch.stack([new_ids, owners])], 1)
    mended = Data(x=torch.cat([x, new_x]), edge_index=torch.cat([ei, new_edges], 1),
                  y=torch.cat([data.y, data.y.new_zeros(new_x.size(0))]))
    pad = torch.zeros(new_x.size(0), dtype=torch.bool, device=x.device)
    for split in ("train", "val", "test"):
        mended[f"{split}_mask"] = torch.cat([data[f"{split}_mask"], pad])
    mended.generated_mask = torch.cat([torch.zeros(n, dtype=torch.bool, device=x.device), ~pad])
    if hasattr(data, "global_id"):
        mended.global_id = data.global_id
    return mended, counts.cpu()
