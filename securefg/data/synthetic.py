"""Small synthetic datasets for unit tests and a quick start with no downloaded data.

* :func:`make_csbm`: a contextual stochastic block model (Deshpande et al., NeurIPS 2018,
  `arXiv:1807.09596 <https://arxiv.org/abs/1807.09596>`_): community structure in the edges and
  class-dependent Gaussian features, so both a GNN and an MLP have signal whose strength the
  caller controls.
* :func:`make_graph_classification`: graphs whose class is visible in their structure (cycles,
  trees, dense random graphs, wheels) with one-hot degree features, like the featureless TU
  sets after ``OneHotDegree``.

Both are deterministic in ``seed`` and take milliseconds at test sizes.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, to_undirected

from securefg.data.splits import random_node_split
from securefg.errors import ConfigError

# Above this many candidate pairs per block, edges are drawn by sampling pair indices instead of
# one Bernoulli per pair, to bound memory at about 16 MB per block.
_DENSE_PAIRS = 4_000_000


def _block_edges(rows: Tensor, cols: Tensor, p: float, same: bool, gen: torch.Generator) -> Tensor:
    """Draw edges between node sets ``rows`` and ``cols`` with probability ``p`` per pair."""
    n_r, n_c = rows.numel(), cols.numel()
    pairs = n_r * (n_r - 1) // 2 if same else n_r * n_c
    if pairs == 0 or p <= 0.0:
        return torch.empty(2, 0, dtype=torch.long)
    if pairs <= _DENSE_PAIRS:
        hit = torch.rand(n_r, n_c, generator=gen) < p
        if same:
            hit = torch.triu(hit, diagonal=1)
        r, c = hit.nonzero().t()
    else:
        # Sparse regime: draw the edge count, then endpoints uniformly; collisions are merged by
        # coalesce, so the realised density is slightly below p (negligible when p is small).
        m = int(torch.binomial(torch.tensor(float(pairs)), torch.tensor(p), generator=gen))
        r = torch.randint(n_r, (m,), generator=gen)
        c = torch.randint(n_c, (m,), generator=gen)
        if same:
            keep = r != c
            r, c = r[keep], c[keep]
    return torch.stack([rows[r], cols[c]])


def make_csbm(
    *,
    num_nodes: int = 500,
    num_classes: int = 3,
    num_features: int = 16,
    p_in: float = 0.05,
    p_out: float = 0.005,
    feature_signal: float = 1.0,
    split: tuple[float, float, float] = (0.6, 0.2, 0.2),
    seed: int = 0,
) -> Data:
    r"""Generate a contextual SBM graph for node classification.

    Labels are balanced (class sizes differ by at most one), assigned in random order. An
    undirected edge joins two nodes with probability :obj:`p_in` if they share a class and
    :obj:`p_out` otherwise. Features are

    .. math::
        \mathbf{x}_v = s\,\boldsymbol{\mu}_{y_v} + \boldsymbol{\varepsilon}_v,
        \qquad \boldsymbol{\varepsilon}_v \sim \mathcal{N}(\mathbf{0}, \mathbf{I}_d),

    with class means :math:`\boldsymbol{\mu}_c` random unit vectors and :math:`s` =
    :obj:`feature_signal`.

    Args:
        num_nodes (int, optional): Number of nodes. (default: :obj:`500`)
        num_classes (int, optional): Number of classes (blocks). (default: :obj:`3`)
        num_features (int, optional): Feature dimension :math:`d`. (default: :obj:`16`)
        p_in (float, optional): Intra-class edge probability. (default: :obj:`0.05`)
        p_out (float, optional): Inter-class edge probability. (default: :obj:`0.005`)
        feature_signal (float, optional): Distance scale :math:`s` of the class means; 0 gives
            uninformative features. (default: :obj:`1.0`)
        split (tuple[float, float, float], optional): Train/val/test ratios, see
            :func:`~securefg.data.splits.random_node_split`. (default: :obj:`(0.6, 0.2, 0.2)`)
        seed (int, optional): Seed of every random draw. (default: :obj:`0`)

    Returns:
        Data: ``x`` :math:`[N, d]`, ``y`` :math:`[N]`, symmetric ``edge_index`` without
        self-loops, and boolean ``train_mask``/``val_mask``/``test_mask`` :math:`[N]`.

    Raises:
        ConfigError: Impossible sizes or probabilities outside :math:`[0, 1]`.
    """
    if num_nodes < num_classes or num_classes < 1 or num_features < 1:
        raise ConfigError(
            f"make_csbm needs num_nodes >= num_classes >= 1 and num_features >= 1, got "
            f"num_nodes={num_nodes}, num_classes={num_classes}, num_features={num_features}"
        )
    if not (0.0 <= p_out <= 1.0 and 0.0 <= p_in <= 1.0):
        raise ConfigError(f"make_csbm probabilities must lie in [0, 1], got p_in={p_in}, p_out={p_out}")
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(num_nodes) % num_classes
    y = y[torch.randperm(num_nodes, generator=gen)]
    blocks = [torch.nonzero(y == c).view(-1) for c in range(num_classes)]
    parts = []
    for a in range(num_classes):
        for b in range(a, num_classes):
            parts.append(_block_edges(blocks[a], blocks[b], p_in if a == b else p_out, a == b, gen))
    edge_index = to_undirected(coalesce(torch.cat(parts, dim=1), num_nodes=num_nodes), num_nodes=num_nodes)
    means = torch.randn(num_classes, num_features, generator=gen)
    means = means / means.norm(dim=1, keepdim=True).clamp_min(1e-12)
    x = feature_signal * means[y] + torch.randn(num_nodes, num_features, generator=gen)
    train, val, test = random_node_split(num_nodes, ratios=split, seed=seed + 1)
    return Data(x=x, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test)


# ----------------------------------------------------------------------------- graph classes
FAMILIES: tuple[str, ...] = ("cycle", "tree", "dense", "wheel")


def _family_edges(family: str, n: int, gen: torch.Generator) -> Tensor:
    if family == "cycle":
        src = torch.arange(n)
        return torch.stack([src, (src + 1) % n])
    if family == "tree":  # random recursive tree: node i attaches to a uniform earlier node
        child = torch.arange(1, n)
        parent = (torch.rand(n - 1, generator=gen) * child).long()
        return torch.stack([parent, child])
    if family == "dense":  # Erdos-Renyi with p = 0.6
        hit = torch.triu(torch.rand(n, n, generator=gen) < 0.6, diagonal=1)
        return hit.nonzero().t()
    if family == "wheel":  # hub 0 joined to a rim cycle 1..n-1
        rim = torch.arange(1, n)
        nxt = torch.roll(rim, -1)
        spokes = torch.stack([torch.zeros_like(rim), rim])
        return torch.cat([spokes, torch.stack([rim, nxt])], dim=1)
    raise AssertionError(family)


def make_graph_classification(
    *,
    num_graphs: int = 120,
    num_classes: int = 3,
    min_nodes: int = 6,
    max_nodes: int = 16,
    max_degree: int | None = None,
    seed: int = 0,
) -> list[Data]:
    r"""Generate graphs whose class is their structural family.

    Class :math:`c` uses family ``FAMILIES[c]``: ``cycle`` (all degrees 2), ``tree`` (random
    recursive tree, has leaves), ``dense`` (Erdős–Rényi, :math:`p = 0.6`) and ``wheel`` (a hub
    plus a rim). Labels cycle through the classes, so classes are balanced, and graph sizes are
    uniform in ``[min_nodes, max_nodes]``. Features are the one-hot (undirected) degree,
    capped at :obj:`max_degree`, which keeps every class separable by a one-layer GNN.

    Args:
        num_graphs (int, optional): Number of graphs. (default: :obj:`120`)
        num_classes (int, optional): Number of classes, 2 to 4. (default: :obj:`3`)
        min_nodes (int, optional): Smallest graph size (at least 4). (default: :obj:`6`)
        max_nodes (int, optional): Largest graph size. (default: :obj:`16`)
        max_degree (int, optional): Degree cap of the one-hot features; default
            ``max_nodes - 1``, so no degree is ever clipped. (default: :obj:`None`)
        seed (int, optional): Seed of every random draw. (default: :obj:`0`)

    Returns:
        list[Data]: Graphs with ``x`` :math:`[n, \text{max\_degree} + 1]`, ``y`` :math:`[1]` and
        a symmetric ``edge_index``; usable with PyG's ``DataLoader`` as is.

    Raises:
        ConfigError: Unsupported class count or sizes.
    """
    if not 2 <= num_classes <= len(FAMILIES):
        raise ConfigError(f"make_graph_classification supports 2..{len(FAMILIES)} classes, got {num_classes}")
    if not 4 <= min_nodes <= max_nodes:
        raise ConfigError(f"need 4 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
    cap = max_nodes - 1 if max_degree is None else max_degree
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(num_graphs):
        label = i % num_classes
        n = int(torch.randint(min_nodes, max_nodes + 1, (1,), generator=gen))
        edge_index = to_undirected(_family_edges(FAMILIES[label], n, gen), num_nodes=n)
        deg = torch.bincount(edge_index[0], minlength=n).clamp_max(cap)
        x = torch.nn.functional.one_hot(deg, cap + 1).float()
        graphs.append(Data(x=x, edge_index=edge_index, y=torch.tensor([label]), num_nodes=n))
    return graphs
