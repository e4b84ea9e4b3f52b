"""Turn many uneven groups (communities, clusters) into K clients of similar size.

These are the steps FedSage (``src/utils/louvain_networkx.py``) and FedStruct
(``src/utils/graph_partitioning.py``) apply after Louvain or k-means: cap group sizes, merge
groups greedily into clients, and (FedSage) make every client hold a few nodes of every class.
The reference loops can spin forever or silently drop nodes when no client fits a group; here a
group that fits nowhere is cut to fill the smallest client, so every node is always assigned.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def split_oversized(groups: Sequence[Tensor], max_size: int) -> list[Tensor]:
    """Cut every group larger than ``max_size`` into consecutive chunks of ``max_size``.

    Chunks follow the group's (sorted) node order, as the reference code slices its lists;
    the remainder chunks are appended after all original groups.
    """
    max_size = max(int(max_size), 1)
    out = [g[:max_size] for g in groups]
    for g in groups:
        for start in range(max_size, g.numel(), max_size):
            out.append(g[start : start + max_size])
    return out


def greedy_merge(groups: Sequence[Tensor], num_parts: int, *, target: int, delta: int) -> list[Tensor]:
    """Merge groups, largest first, into ``num_parts`` clients of about ``target`` items each.

    FedSage's rule: a cyclic pointer walks over the clients still below ``target``; a group
    goes to the first such client where it keeps the size below ``target + delta``. Where the
    reference then loops forever (FedSage) or drops the group (FedStruct), a group that fits
    no client is cut: the smallest client is filled up to ``target`` and the rest tries
    again; once every client has reached ``target``, the smallest one takes what is left.

    Returns:
        list[Tensor]: The item ids of every client (unsorted).
    """
    order = sorted(range(len(groups)), key=lambda i: -groups[i].numel())  # stable: ties keep order
    size = [0] * num_parts
    held: list[list[Tensor]] = [[] for _ in range(num_parts)]
    open_ = list(range(num_parts))
    ind = 0

    def give(k: int, items: Tensor) -> None:
        held[k].append(items)
        size[k] += items.numel()

    for gi in order:
        pending = groups[gi]
        while pending.numel():
            while open_ and size[open_[ind]] >= target:
                open_.pop(ind)
                ind = ind % len(open_) if open_ else 0
            fit = None
            for step in range(len(open_)):
                cand = open_[(ind + step) % len(open_)]
                if size[cand] + pending.numel() < target + delta:
                    ind, fit = (ind + step) % len(open_), cand
                    break
            if fit is not None:
                give(fit, pending)
                break
            k = min(range(num_parts), key=lambda c: size[c])
            room = target - size[k]
            if room <= 0 or room >= pending.numel():
                give(k, pending)
                break
            give(k, pending[:room])
            pending = pending[room:]
    return [torch.cat(h) if h else torch.empty(0, dtype=torch.long) for h in held]


def rebalance_labels(assignment: Tensor, y: Tensor, *, num_parts: int, min_per_class: int = 2) -> Tensor:
    """Move nodes so every client holds at least ``min_per_class`` nodes of every class.

    FedSage's step 4: for each class and each client short of it, take nodes of that class
    (the highest id first) from clients that hold more than ``min_per_class`` of it. The
    reference code takes one node from *every* donor (its ``j = num_owners`` does not break the
    loop); we stop as soon as the recipient has ``min_per_class``, which is what it intends.

    Returns:
        Tensor: A new assignment; the input is not modified.
    """
    out = assignment.clone()
    if min_per_class <= 0:
        return out
    for c in torch.unique(y).tolist():
        for k in range(num_parts):
            while int(((out == k) & (y == c)).sum()) < min_per_class:
                donor = None
                for j in range(num_parts):
                    if j != k and int(((out == j) & (y == c)).sum()) > min_per_class:
                        donor = j
                        break
                if donor is None:
                    break
                node = int(torch.nonzero((out == donor) & (y == c)).view(-1)[-1])
                out[node] = k
    return out
