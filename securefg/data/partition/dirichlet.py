"""Label-skewed shares drawn from a Dirichlet distribution (Hsu et al., 2019)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from securefg.data.partition.graph_split import GraphSplit
from securefg.errors import ConfigError

_MAX_TRIES = 1000


def dirichlet_label_split(
    items: Tensor, labels: Tensor, *, num_parts: int, alpha: float, min_size: int, rng: np.random.Generator
) -> list[Tensor]:
    r"""Divide ``items`` among ``num_parts`` clients with Dirichlet(:math:`\alpha`) label skew.

    For every class :math:`c`, proportions :math:`\mathbf{p}_c \sim \mathrm{Dir}(\alpha
    \mathbf{1}_K)` decide how its items (in random order) are cut among the clients. Small
    :math:`\alpha` gives each client few classes; large :math:`\alpha` approaches an even
    i.i.d. split. The draw is repeated until every client holds at least ``min_size`` items
    (the usual rule of the reference implementations).

    Args:
        items (Tensor): :math:`[M]` item ids to divide.
        labels (Tensor): Label of every item id (indexed by id).
        num_parts (int): Number of clients :math:`K`.
        alpha (float): Concentration :math:`\alpha > 0`.
        min_size (int): Minimum items per client.
        rng (numpy.random.Generator): Source of all randomness.

    Raises:
        ConfigError: No draw met ``min_size`` within 1000 tries.
    """
    item_labels = labels[items].numpy()
    classes = np.unique(item_labels)
    for _ in range(_MAX_TRIES):
        shares: list[list[np.ndarray]] = [[] for _ in range(num_parts)]
        for c in classes:
            ids = items.numpy()[item_labels == c]
            ids = ids[rng.permutation(ids.size)]
            cuts = (np.cumsum(rng.dirichlet(np.full(num_parts, alpha))) * ids.size).astype(int)[:-1]
            for k, chunk in enumerate(np.split(ids, cuts)):
                shares[k].append(chunk)
        out = [torch.from_numpy(np.concatenate(s)).long() for s in shares]
        if min(s.numel() for s in out) >= min_size:
            return [s[torch.from_numpy(rng.permutation(s.numel()))] for s in out]
    raise ConfigError(
        f"no Dirichlet(alpha={alpha}) split gave every one of {num_parts} clients >= {min_size} items "
        f"in {_MAX_TRIES} tries; raise alpha, lower min_size or use fewer clients"
    )


class DirichletGraphSplit(GraphSplit):
    r""":class:`GraphSplit` whose global-train pool is divided with Dirichlet label skew.

    Steps 1, 2 and 4 are those of :class:`GraphSplit` (global test set, per-client
    train/val/test); step 3 uses :func:`dirichlet_label_split` instead of equal chunks.

    Args:
        num_parts (int): Number of clients :math:`K`.
        alpha (float): Dirichlet concentration :math:`\alpha > 0`.
        seed (int, optional): Seed of every draw. (default: :obj:`0`)
        min_size (int, optional): Minimum graphs per client. (default: :obj:`5`)
        test_ratio (float, optional): Global test fraction. (default: :obj:`0.2`)
        client_ratios (tuple[float, float, float], optional): Per-client train/val/test.
            (default: :obj:`(0.7, 0.1, 0.2)`)
    """

    name = "dirichlet"

    def __init__(
        self,
        num_parts: int,
        *,
        alpha: float,
        seed: int = 0,
        min_size: int = 5,
        test_ratio: float = 0.2,
        client_ratios: tuple[float, float, float] = (0.7, 0.1, 0.2),
    ) -> None:
        super().__init__(num_parts, seed=seed, test_ratio=test_ratio, client_ratios=client_ratios)
        if not alpha > 0:
            raise ConfigError(f"DirichletGraphSplit needs alpha > 0, got {alpha}")
        self.alpha = float(alpha)
        self.min_size = int(min_size)

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this split."""
        return {**super().params(), "alpha": self.alpha, "min_size": self.min_size}

    def divide(self, pool: Tensor, labels: Tensor, gen: torch.Generator) -> list[Tensor]:
        """Step 3: Dirichlet label-skewed shares of the global-train pool."""
        rng = np.random.default_rng(self.seed)
        return dirichlet_label_split(
            pool, labels, num_parts=self.num_parts, alpha=self.alpha, min_size=self.min_size, rng=rng
        )
