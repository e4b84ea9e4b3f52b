"""Seeded global train/val/test node splits, drawn once on the whole graph before partitioning.

FED-PUB, FedSheafHN and FedStruct all split the *global* node set at random and let each client
inherit the masks of its own nodes, so per-client ratios are only approximately the global ones.
Unlike PyG's ``RandomNodeSplit`` the seed is an argument, so the same split can be rebuilt.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch_geometric.data import Data

from securefg.errors import ConfigError

#: Train/val/test ratios of the papers (FED-PUB: its code's 20/40/40, since the paper's
#: 20/35/35 does not add up; FedSage: 60/20/20 from the original paper).
SPLIT_PRESETS: dict[str, tuple[float, float, float]] = {
    "fedpub": (0.2, 0.4, 0.4),
    "fedsheafhn": (0.4, 0.3, 0.3),
    "fedstruct": (0.1, 0.1, 0.8),
    "fedsage": (0.6, 0.2, 0.2),
}


def random_node_split(
    num_nodes: int, *, ratios: tuple[float, float, float] | str, seed: int
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Draw disjoint boolean train/val/test masks over ``num_nodes`` nodes.

    Convention (FED-PUB's ``split_train``): one permutation; the first
    ``round(r_train * n)`` nodes train, the next ``round(r_test * n)`` test, then validation
    takes the next ``round(r_val * n)`` nodes, or all remaining nodes when the ratios sum to
    one, so every node lands somewhere. With ratios summing to less than one the rest stays
    unassigned.

    Args:
        num_nodes (int): Number of nodes :math:`n`.
        ratios (tuple[float, float, float] or str): ``(train, val, test)`` or a key of
            :data:`SPLIT_PRESETS`.
        seed (int): Seed of the permutation.

    Returns:
        tuple[Tensor, Tensor, Tensor]: ``train_mask``, ``val_mask``, ``test_mask``, each
        :math:`[n]` boolean.

    Raises:
        ConfigError: Unknown preset, negative ratios, or ratios summing to more than one.
    """
    if isinstance(ratios, str):
        if ratios.lower() not in SPLIT_PRESETS:
            raise ConfigError(f"Could not resolve split {ratios!r} among choices {sorted(SPLIT_PRESETS)}")
        ratios = SPLIT_PRESETS[ratios.lower()]
    r_train, r_val, r_test = (float(r) for r in ratios)
    total = r_train + r_val + r_test
    if min(r_train, r_val, r_test) < 0 or total > 1 + 1e-9:
        raise ConfigError(f"split ratios must be >= 0 and sum to <= 1, got {tuple(ratios)}")
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(num_nodes, generator=gen)
    n_train = round(r_train * num_nodes)
    n_test = min(round(r_test * num_nodes), num_nodes - n_train)
    rest = num_nodes - n_train - n_test
    n_val = rest if abs(total - 1.0) < 1e-9 else min(round(r_val * num_nodes), rest)
    masks = []
    for lo, hi in ((0, n_train), (n_train + n_test, n_train + n_test + n_val), (n_train, n_train + n_test)):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[perm[lo:hi]] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def with_node_split(data: Data, *, ratios: tuple[float, float, float] | str, seed: int) -> Data:
    """Return a shallow copy of ``data`` whose masks are replaced by :func:`random_node_split`.

    Multi-split masks (e.g. the ``[N, 10]`` Geom-GCN masks) are replaced too; the input is not
    modified.
    """
    out = copy.copy(data)  # new attribute stores, shared tensors
    out.train_mask, out.val_mask, out.test_mask = random_node_split(
        int(data.num_nodes), ratios=ratios, seed=seed
    )
    return out
