"""Propagation matrices of FedStruct: Â = D̃⁻¹Ã and Ā = Σ_l β_l Â^l.

FedStruct (`Aliakbari et al. <https://arxiv.org/abs/2402.19163>`_) uses the *random-walk*
normalisation, not GCN's symmetric one, so ``â_uv != â_vu``. That asymmetry is why client i can
compute its own rows of Â from local knowledge (its nodes' degrees), but not other clients' rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import Tensor
from torch_geometric.utils import coalesce, remove_self_loops

from securefg.errors import InvalidInputError


def rw_normalized_adjacency(
    edge_index: Tensor,
    num_nodes: int,
    *,
    add_self_loops: bool = True,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    r"""Return :math:`\hat{A} = \tilde{D}^{-1}\tilde{A}` as a coalesced sparse COO tensor.

    Duplicate edges count once and existing self-loops are replaced by a single one, so every
    entry of :math:`\tilde{A}` is 0 or 1 and each row sums to one (rows of isolated nodes are
    zero when ``add_self_loops=False``).

    Args:
        edge_index (Tensor): Directed edge list ``[2, E]``; pass both directions for an
            undirected graph, as PyG stores it.
        num_nodes (int): Number of nodes ``n``.
        add_self_loops (bool, optional): Use :math:`\tilde{A} = A + I`. (default: :obj:`True`)
        dtype (torch.dtype, optional): Value dtype. (default: :obj:`torch.float32`)

    Returns:
        Tensor: Sparse ``[n, n]`` matrix on ``edge_index.device``.

    Raises:
        InvalidInputError: If ``edge_index`` is not ``[2, E]`` or names a node ``>= num_nodes``.
    """
    _check_edge_index(edge_index, num_nodes)
    ei, _ = remove_self_loops(edge_index)
    if add_self_loops:
        loop = torch.arange(num_nodes, device=ei.device)
        ei = torch.cat([ei, loop.expand(2, -1)], dim=1)
    ei = coalesce(ei, num_nodes=num_nodes)
    deg = torch.bincount(ei[0], minlength=num_nodes).to(dtype)
    deg_inv = deg.reciprocal().masked_fill(deg == 0, 0.0)
    values = deg_inv[ei[0]]
    return torch.sparse_coo_tensor(
        ei, values, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


def multi_hop_adjacency(
    a_hat: Tensor,
    betas: Sequence[float],
    *,
    prune_p: int | None = None,
    sparse: bool = False,
) -> Tensor:
    r"""Return the L-hop combined matrix :math:`\bar{A} = \sum_{l=1}^{L} \beta_l \hat{A}^l`.

    With ``prune_p`` every intermediate power :math:`\hat{A}^l` keeps only its ``p`` largest
    entries per row before the next multiplication, the per-row analogue of App. L.2.1 (which
    keeps the top ``p * n_i`` entries of each block); pruned rows are not renormalised.

    Args:
        a_hat (Tensor): ``[n, n]`` sparse or dense one-hop matrix, e.g. from
            :func:`rw_normalized_adjacency`.
        betas (Sequence[float]): Hop weights :math:`(\beta_1, \dots, \beta_L)`; the paper does not
            give them, see :func:`last_hop_betas`.
        prune_p (int, optional): Entries kept per row of each power. (default: :obj:`None`)
        sparse (bool, optional): Keep the powers sparse (worth it only with pruning or small L).
            (default: :obj:`False`)

    Returns:
        Tensor: ``[n, n]`` matrix, sparse COO if ``sparse`` else dense.

    Raises:
        InvalidInputError: If ``betas`` is empty, ``a_hat`` is not square, or ``prune_p < 1``.
    """
    if len(betas) == 0:
        raise InvalidInputError("multi_hop_adjacency needs at least one hop weight (betas=[])")
    if a_hat.dim() != 2 or a_hat.size(0) != a_hat.size(1):
        raise InvalidInputError(f"a_hat must be square [n, n], got {tuple(a_hat.shape)}")
    if prune_p is not None and prune_p < 1:
        raise InvalidInputError(f"prune_p must be >= 1 or None, got {prune_p}")
    a = a_hat.coalesce() if a_hat.is_sparse else a_hat
    power = a if sparse or not a.is_sparse else a.to_dense()
    if sparse and not power.is_sparse:
        power = power.to_sparse()
    if prune_p is not None:
        power = prune_top_p_rows(power, prune_p)
    abar = betas[0] * power
    for beta in betas[1:]:
        with warnings.catch_warnings():  # sparse @ sparse goes through beta CSR kernels
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            power = torch.sparse.mm(a, power) if a.is_sparse else a @ power
        if sparse and not power.is_sparse:
            power = power.to_sparse()
        if prune_p is not None:
            power = prune_top_p_rows(power, prune_p)
        abar = abar + beta * power
    return abar.coalesce() if abar.is_sparse else abar


def prune_top_p_rows(matrix: Tensor, p: int) -> Tensor:
    """Keep the ``p`` largest entries of every row and zero the rest.

    Pruning bounds the size of Ā and of Algorithm 3's messages (App. L.2.1). Ties are broken
    arbitrarily, so a row with tied values at the cut-off keeps exactly ``p`` of them.

    Args:
        matrix (Tensor): ``[r, c]`` dense or sparse COO matrix.
        p (int): Entries kept per row.

    Returns:
        Tensor: Same layout, shape, dtype and device as ``matrix``.
    """
    if p < 1:
        raise InvalidInputError(f"p must be >= 1, got {p}")
    if not matrix.is_sparse:
        if p >= matrix.size(1):
            return matrix.clone()
        idx = matrix.topk(p, dim=1).indices
        return torch.zeros_like(matrix).scatter_(1, idx, matrix.gather(1, idx))
    m = matrix.coalesce()
    row, col = m.indices()
    val = m.values()
    # Sort by (row asc, value desc) to rank every entry inside its row.
    order = torch.argsort(val, descending=True, stable=True)
    order = order[torch.argsort(row[order], stable=True)]
    row_sorted = row[order]
    counts = torch.bincount(row_sorted, minlength=m.size(0))
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(row_sorted.numel(), device=row.device) - starts[row_sorted]
    keep = order[rank < p]
    idx = torch.stack([row[keep], col[keep]])
    return torch.sparse_coo_tensor(idx, val[keep], m.shape, check_invariants=False).coalesce()


def last_hop_betas(num_hops: int) -> tuple[float, ...]:
    r"""Return :math:`\beta = (0, \dots, 0, 1)`, i.e. :math:`\bar{A} = \hat{A}^{L}`.

    The paper never states :math:`\beta`; its public code uses only the top power (notes B6), so
    this is the default that matches the published numbers.
    """
    if num_hops < 1:
        raise InvalidInputError(f"num_hops must be >= 1, got {num_hops}")
    return (0.0,) * (num_hops - 1) + (1.0,)


def _check_edge_index(edge_index: Tensor, num_nodes: int) -> None:
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise InvalidInputError(f"edge_index must be [2, E], got {tuple(edge_index.shape)}")
    if edge_index.dtype != torch.long:
        raise InvalidInputError(f"edge_index must be torch.long, got {edge_index.dtype}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise InvalidInputError(
            f"edge_index names nodes outside [0, {num_nodes}); pass the right num_nodes"
        )
