"""Across-dataset and across-domain graph splits: each client holds graphs of one dataset (CeFGC)."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data

from securefg.data.partition.base import Partitioner
from securefg.data.partition.graph_split import GraphSplit, graph_labels
from securefg.data.partition.partition import Partition
from securefg.errors import ConfigError, InvalidInputError


def num_graph_classes(dataset: Sequence[Data]) -> int:
    """Number of classes of a graph dataset (``num_classes`` if it has one, else max label + 1)."""
    k = getattr(dataset, "num_classes", None)
    return int(k) if isinstance(k, int) else int(graph_labels(dataset).max()) + 1


class MultiDatasetSplit(Partitioner):
    r"""Give each client graphs of a single dataset, several datasets side by side.

    CeFGC's across-dataset ("Protein" = ENZYMES + PROTEINS, "Social" = IMDB-B + IMDB-M) and
    across-domain ("Mix" = MUTAG + ENZYMES + IMDB-B + IMDB-M) settings. Every dataset is split
    on its own by :class:`GraphSplit` (8:2 global train/test, even shares, 0.7/0.1/0.2 per
    client) over its own clients; client ids follow the order of :obj:`clients_per_dataset`
    (dataset 0 gets ids ``0..k_0-1``, and so on).

    Items are indexed in the concatenation of the datasets in that order. ``params`` records
    ``item_offsets`` (first item of each dataset), ``label_offsets`` (the first global label
    of each dataset, so labels do not collide: Mix has 2 + 6 + 2 + 3 = 13 global classes),
    ``num_classes`` and ``client_dataset`` (the dataset of every client). Use
    :func:`concat_with_global_labels` to materialise the concatenated graphs.

    Args:
        clients_per_dataset (Mapping[str, int]): Ordered dataset name -> number of clients
            (CeFGC's default is 3 each; its 100-client setting is 15/10/25/25/25).
        seed (int, optional): Seed; dataset :math:`i` is split with ``seed + i``. (default: :obj:`0`)
        test_ratio (float, optional): Global test fraction per dataset. (default: :obj:`0.2`)
        client_ratios (tuple[float, float, float], optional): Per-client train/val/test.
            (default: :obj:`(0.7, 0.1, 0.2)`)
    """

    name = "multi_dataset"
    level = "graph"

    def __init__(
        self,
        clients_per_dataset: Mapping[str, int],
        *,
        seed: int = 0,
        test_ratio: float = 0.2,
        client_ratios: tuple[float, float, float] = (0.7, 0.1, 0.2),
    ) -> None:
        if not clients_per_dataset or min(clients_per_dataset.values()) < 1:
            raise ConfigError(
                f"clients_per_dataset needs >= 1 client per dataset, got {dict(clients_per_dataset)}"
            )
        super().__init__(sum(clients_per_dataset.values()), seed=seed)
        self.clients_per_dataset = {str(k): int(v) for k, v in clients_per_dataset.items()}
        self.splits = [
            GraphSplit(k, seed=seed + i, test_ratio=test_ratio, client_ratios=client_ratios)
            for i, k in enumerate(self.clients_per_dataset.values())
        ]
        self.test_ratio = float(test_ratio)
        self.client_ratios = tuple(float(r) for r in client_ratios)

    def params(self) -> dict[str, Any]:
        """Parameters that reproduce this split."""
        return {
            "clients_per_dataset": dict(self.clients_per_dataset),
            "seed": self.seed,
            "test_ratio": self.test_ratio,
            "client_ratios": list(self.client_ratios),
        }

    @property
    def cache_name(self) -> str:
        """File stem built from the parameters."""
        per = "+".join(f"{k}{v}" for k, v in self.clients_per_dataset.items())
        return f"{self.name}-{per}-seed={self.seed}-test_ratio={self.test_ratio}".replace("/", "_")

    def _ordered(self, datasets: Mapping[str, Sequence[Data]]) -> list[Sequence[Data]]:
        if set(datasets) != set(self.clients_per_dataset):
            raise InvalidInputError(
                f"expected datasets {list(self.clients_per_dataset)}, got {list(datasets)}"
            )
        return [datasets[name] for name in self.clients_per_dataset]

    def fingerprint(self, data: Mapping[str, Sequence[Data]]) -> str:
        """Hash of every dataset's size and labels."""
        h = hashlib.sha256()
        for name, ds in zip(self.clients_per_dataset, self._ordered(data), strict=True):
            h.update(f"{name}:{len(ds)}".encode() + graph_labels(ds).numpy().tobytes())
        return h.hexdigest()[:16]

    def __call__(self, data: Mapping[str, Sequence[Data]]) -> Partition:
        """Split ``{name: dataset}`` (names must match :obj:`clients_per_dataset`)."""
        datasets = self._ordered(data)
        sizes = [len(ds) for ds in datasets]
        classes = [num_graph_classes(ds) for ds in datasets]
        item_offsets = [0, *torch.tensor(sizes).cumsum(0).tolist()][:-1]
        label_offsets = [0, *torch.tensor(classes).cumsum(0).tolist()][:-1]
        total = sum(sizes)
        parts: list[Tensor] = []
        masks = {k: torch.zeros(total, dtype=torch.bool) for k in ("train", "val", "test", "global_test")}
        client_dataset: list[str] = []
        for name, ds, split, off in zip(
            self.clients_per_dataset, datasets, self.splits, item_offsets, strict=True
        ):
            sub = split(ds)
            parts.extend(p + off for p in sub.parts())
            for key in masks:
                masks[key][off : off + len(ds)] = sub.masks[key]
            client_dataset.extend([name] * split.num_parts)
        params = {
            **self.params(),
            "datasets": list(self.clients_per_dataset),
            "dataset_sizes": sizes,
            "item_offsets": item_offsets,
            "num_classes": classes,
            "label_offsets": label_offsets,
            "num_global_classes": sum(classes),
            "client_dataset": client_dataset,
        }
        return Partition.from_parts(
            parts, num_items=total, name=self.name, level="graph", params=params, masks=masks
        )


def concat_with_global_labels(datasets: Mapping[str, Sequence[Data]], partition: Partition) -> list[Data]:
    """Concatenate ``datasets`` in the partition's order, shifting labels into the global space.

    Each returned graph is a shallow copy with ``y + label_offset`` and a ``dataset_id``
    (position of its dataset), so item ``i`` of the partition is element ``i`` of the list.

    Raises:
        InvalidInputError: ``partition`` was not made by :class:`MultiDatasetSplit` or the
            datasets do not match it.
    """
    names = partition.params.get("datasets")
    if partition.name != MultiDatasetSplit.name or names is None:
        raise InvalidInputError(f"{partition!r} is not a MultiDatasetSplit partition")
    out: list[Data] = []
    for i, (name, offset) in enumerate(zip(names, partition.params["label_offsets"], strict=True)):
        if name not in datasets or len(datasets[name]) != partition.params["dataset_sizes"][i]:
            raise InvalidInputError(f"dataset {name!r} is missing or differs in size from the partition")
        for g in datasets[name]:
            g = copy.copy(g)
            g.y = g.y + offset
            g.dataset_id = torch.tensor([i])
            out.append(g)
    return out
