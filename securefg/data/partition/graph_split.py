"""Graph-level split of one dataset over clients, in CeFGC's (and GCFL's) convention."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data

from securefg.data.partition.base import Partitioner
from securefg.data.partition.partition import Partition
from securefg.errors import ConfigError, InvalidInputError


def graph_labels(dataset: Sequence[Data]) -> Tensor:
    """Return the :math:`[G]` graph labels of a PyG dataset or a list of graphs."""
    y = getattr(dataset, "y", None)  # InMemoryDataset exposes the collated labels
    if not isinstance(y, Tensor) or y.numel() != len(dataset):
        y = torch.cat([d.y.view(-1)[:1] for d in dataset]) if len(dataset) else torch.empty(0)
    return y.view(-1).long()


def local_roles(
    shares: Sequence[Tensor], num_items: int, *, ratios: tuple[float, float, float]
) -> dict[str, Tensor]:
    """Mark each client's share as ``train``/``val``/``test`` (ratios applied per share).

    A share of :math:`m` graphs, in its (random) order: the last ``round(r_test * m)`` are
    local test, the ``round(r_val * m)`` before them validation, all earlier ones train.
    """
    _, r_val, r_test = ratios
    masks = {k: torch.zeros(num_items, dtype=torch.bool) for k in ("train", "val", "test")}
    for share in shares:
        m = share.numel()
        n_test = round(r_test * m)
        n_val = min(round(r_val * m), m - n_test)
        n_train = m - n_val - n_test
        masks["train"][share[:n_train]] = True
        masks["val"][share[n_train : n_train + n_val]] = True
        masks["test"][share[n_train + n_val :]] = True
    return masks


class GraphSplit(Partitioner):
    r"""Split one graph-classification dataset over :obj:`num_parts` clients (CeFGC §1).

    The exact convention, with :math:`G` graphs and :math:`K` clients:

    1. Draw one random permutation (seeded).
    2. Its first ``round(test_ratio * G)`` graphs form the **global test set**: held by no
       client (the server evaluates the global model there); mask ``global_test``.
    3. The remaining graphs (global train) are cut into :math:`K` contiguous chunks whose sizes
       differ by at most one (the first ``G_train mod K`` chunks are larger), one per client.
    4. Each client's chunk, in its random order, is split ``client_ratios`` =
       (train, val, test) by :func:`local_roles`: masks ``train``, ``val``, ``test``.

    With the defaults (0.2, and 0.7/0.1/0.2) this is CeFGC's "8:2 global train/test split,
    training set evenly distributed among clients, each client 0.7/0.1/0.2". Splits are not
    stratified, as in GCFL.

    Args:
        num_parts (int): Number of clients :math:`K`.
        seed (int, optional): Seed of the permutation. (default: :obj:`0`)
        test_ratio (float, optional): Global test fraction. (default: :obj:`0.2`)
        client_ratios (tuple[float, float, float], optional): Per-client train/val/test
            fractions; must sum to 1. (default: :obj:`(0.7, 0.1, 0.2)`)
    """

    name = "graph_split"
    level = "graph"

    def __init__(
        self,
        num_parts: int,
        *,
        seed: int = 0,
        test_ratio: float = 0.2,
        client_ratios: tuple[float, float, float] = (0.7, 0.1, 0.2),
    ) -> None:
        super().__init__(num_parts, seed=seed)
        ratios = tuple(float(r) for r in client_ratios)
        if len(ratios) != 3 or min(ratios) < 0 or abs(sum(ratios) - 1.0) > 1e-9:
            raise ConfigError(
                f"client_ratios must be three non-negative numbers summing to 1, got {client_ratios}"
            )
        if not 0.0 <= test_ratio < 1.0:
            raise ConfigError(f"test_ratio must be in [0, 1), got {test_ratio}")
        self.test_ratio = float(test_ratio)
        self.client_ratios: tuple[float, float, float] = (ratios[0], ratios[1], ratios[2])

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this split."""
        return {**super().params(), "test_ratio": self.test_ratio, "client_ratios": list(self.client_ratios)}

    def fingerprint(self, data: Sequence[Data]) -> str:
        """Hash of the number of graphs and their labels."""
        y = graph_labels(data)
        return hashlib.sha256(f"{len(data)}".encode() + y.numpy().tobytes()).hexdigest()[:16]

    def divide(self, pool: Tensor, labels: Tensor, gen: torch.Generator) -> list[Tensor]:
        """Step 3: cut the (shuffled) global-train pool into one share per client."""
        return list(torch.tensor_split(pool, self.num_parts))

    def __call__(self, data: Sequence[Data]) -> Partition:
        """Split the graphs of ``data`` (a PyG dataset or a list of graphs).

        Raises:
            InvalidInputError: Fewer training graphs than clients.
        """
        labels = graph_labels(data)
        n = labels.numel()
        gen = torch.Generator().manual_seed(self.seed)
        perm = torch.randperm(n, generator=gen)
        n_test = round(self.test_ratio * n)
        if n - n_test < self.num_parts:
            raise InvalidInputError(
                f"{n - n_test} training graphs cannot be shared by {self.num_parts} clients"
            )
        global_test = torch.zeros(n, dtype=torch.bool)
        global_test[perm[:n_test]] = True
        shares = self.divide(perm[n_test:], labels, gen)
        masks = local_roles(shares, n, ratios=self.client_ratios)
        masks["global_test"] = global_test
        return Partition.from_parts(
            shares, num_items=n, name=self.name, level="graph", params=self.params(), masks=masks
        )
