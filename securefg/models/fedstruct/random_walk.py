r"""Vectorised node2vec (second-order, p/q-biased) random walks in plain torch.

PyG's ``Node2Vec`` needs ``torch-cluster``, which we cannot install; this sampler does the same
job with rejection sampling (as ``torch-cluster`` does): propose a uniform neighbour ``x`` of the
current node ``v`` and accept with :math:`\alpha(t, x) / \max(1/p, 1, 1/q)`, where ``t`` is the
previous node and :math:`\alpha = 1/p` if ``x = t``, ``1`` if ``x`` neighbours ``t``, else
``1/q``. All walkers advance together; only rejected ones are re-drawn.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.utils import coalesce, remove_self_loops

from securefg.errors import InvalidInputError


def biased_random_walks(
    edge_index: Tensor,
    num_nodes: int,
    start: Tensor,
    *,
    walk_length: int,
    p: float = 1.0,
    q: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Sample one node2vec walk from every node in ``start``.

    Args:
        edge_index (Tensor): ``[2, E]`` edge list; walks follow ``src -> dst``.
        num_nodes (int): Number of nodes ``n``.
        start (Tensor): ``[B]`` start nodes (repeat a node for several walks).
        walk_length (int): Steps per walk.
        p (float, optional): Return parameter; small ``p`` favours stepping back.
            (default: :obj:`1.0`)
        q (float, optional): In-out parameter; small ``q`` favours moving away (DFS-like).
            (default: :obj:`1.0`)
        generator (torch.Generator, optional): Source of randomness, on ``edge_index``'s
            device. (default: :obj:`None`)

    Returns:
        Tensor: ``[B, walk_length + 1]`` node ids; isolated nodes stay where they are.
    """
    if walk_length < 1 or p <= 0 or q <= 0:
        raise InvalidInputError(
            f"need walk_length >= 1, p > 0, q > 0; got {walk_length}, {p}, {q}"
        )
    device = edge_index.device
    ei, _ = remove_self_loops(edge_index)
    ei = coalesce(ei, num_nodes=num_nodes)  # sorted by (src, dst)
    src, dst = ei
    deg = torch.bincount(src, minlength=num_nodes)
    rowptr = torch.cumsum(deg, 0) - deg
    keys = src * num_nodes + dst  # sorted: membership test for "x neighbours t"
    if keys.numel() == 0:  # no edges: every walker stays put
        return start.to(device).unsqueeze(1).repeat(1, walk_length + 1)
    bound = max(1.0 / p, 1.0, 1.0 / q)
    biased = p != 1.0 or q != 1.0

    def propose(v: Tensor) -> Tensor:
        r = torch.rand(v.numel(), generator=generator, device=device)
        d = deg[v]
        off = (r * d).long().clamp_max((d - 1).clamp_min(0))
        return torch.where(d > 0, dst[(rowptr[v] + off).clamp_max(dst.numel() - 1)], v)

    walks = torch.empty(start.numel(), walk_length + 1, dtype=torch.long, device=device)
    walks[:, 0] = start
    walks[:, 1] = propose(start)
    for step in range(2, walk_length + 1):
        t, v = walks[:, step - 2], walks[:, step - 1]
        if not biased:
            walks[:, step] = propose(v)
            continue
        nxt = torch.empty_like(v)
        pending = torch.arange(v.numel(), device=device)
        while pending.numel():
            tp, vp = t[pending], v[pending]
            x = propose(vp)
            key = tp * num_nodes + x
            near = keys[torch.searchsorted(keys, key).clamp_max(keys.numel() - 1)] == key
            alpha = torch.where(near, 1.0, 1.0 / q).to(torch.float32)
            alpha = torch.where(x == tp, torch.full_like(alpha, 1.0 / p), alpha)
            alpha = torch.where(deg[vp] == 0, torch.full_like(alpha, bound), alpha)
            ok = torch.rand(x.numel(), generator=generator, device=device) * bound < alpha
            nxt[pending[ok]] = x[ok]
            pending = pending[~ok]
        walks[:, step] = nxt
    return walks
