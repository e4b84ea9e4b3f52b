"""Per-dataset heads on one shared output layer, for the across-dataset and across-domain settings.

With several datasets, the global label space is their labels side by side (ENZYMES+PROTEINS:
6 + 2 = 8 classes). One softmax over all of them fails a federation whose clients each hold one
dataset: every local step pushes the other datasets' logits down, and FedAvg's global model
stays at chance (measured: 0.49-0.51 AUC on ENZYMES+PROTEINS). GCFL, whose GIN the CeFGC paper
reuses, keeps one head per dataset (cefgc.md §6.1 item 3, decision (b)). Here the heads are the
row blocks of the shared classifier: a graph's loss and scores use only its own dataset's
logits, so every model-averaging step, CeFGC's one-shot average and the protocol layer still see
a single model of a single shape. Model averaging takes each head's mean over the clients that
hold its dataset only (``owner_average``, :mod:`securefg.methods.head_owners`).

A graph's dataset is read from its global label (the datasets' label ranges are disjoint). That
is what a party knows of its own graphs, and what the evaluator knows of a global test graph
(which dataset it came from); the label *within* the dataset is what is scored.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.metrics import accuracy, roc_auc


@dataclass(frozen=True)
class LabelGroups:
    """Contiguous, disjoint class ranges ``[start, stop)`` covering ``0 .. num_classes - 1``.

    Args:
        bounds (tuple[tuple[int, int], ...]): One ``(start, stop)`` per dataset, in order.
        names (tuple[str, ...], optional): The datasets' names (reported per-dataset AUCs use
            them). (default: ``"0"``, ``"1"``, ...)
        owner_average (bool, optional): Average each head over the clients holding its dataset
            (``--option head_average=owners``) rather than over all clients (``all``).
            (default: ``True``)

    Raises:
        ConfigError: Ranges that are empty, overlap, leave gaps or do not start at 0, or a
            name count that does not match.
    """

    bounds: tuple[tuple[int, int], ...]
    names: tuple[str, ...] = ()
    owner_average: bool = True

    def __post_init__(self) -> None:
        if not self.names:
            object.__setattr__(self, "names", tuple(str(i) for i in range(len(self.bounds))))
        if len(self.names) != len(self.bounds):
            raise ConfigError(f"{len(self.names)} names for {len(self.bounds)} label groups")
        expected = 0
        for start, stop in self.bounds:
            if start != expected or stop <= start:
                raise ConfigError(f"label groups must be contiguous non-empty ranges from 0, got {list(self.bounds)}")
            expected = stop
        if not self.bounds:
            raise ConfigError("label groups need at least one range")

    @classmethod
    def from_counts(cls, counts: Sequence[int], names: Sequence[str] = (), owner_average: bool = True) -> LabelGroups:
        """Groups of ``counts[i]`` classes each, side by side (the multi-dataset label layout)."""
        starts = [0, *torch.tensor(list(counts)).cumsum(0).tolist()]
        return cls(tuple((int(a), int(b)) for a, b in itertools.pairwise(starts)), tuple(names), owner_average)

    @property
    def num_classes(self) -> int:
        return self.bounds[-1][1]

    def group_of(self, y: torch.Tensor) -> torch.Tensor:
        """The group index of every label.

        Raises:
            InvalidInputError: A label outside ``0 .. num_classes - 1``.
        """
        y = y.view(-1)
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= self.num_classes):
            raise InvalidInputError(f"labels must lie in [0, {self.num_classes}), got {int(y.min())}..{int(y.max())}")
        stops = torch.tensor([b for _, b in self.bounds], device=y.device)
        return torch.bucketize(y, stops, right=True)

    def restrict(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``logits`` with every class outside each row's group set to ``-inf`` (its head only).

        Raises:
            InvalidInputError: ``logits`` is not ``[len(y), num_classes]``.
        """
        if logits.dim() != 2 or logits.size(0) != y.numel() or logits.size(1) != self.num_classes:
            raise InvalidInputError(f"logits of shape {tuple(logits.shape)} for {y.numel()} labels of "
                                    f"{self.num_classes} grouped classes")
        starts = torch.tensor([a for a, _ in self.bounds], device=logits.device)
        stops = torch.tensor([b for _, b in self.bounds], device=logits.device)
        g = self.group_of(y.to(logits.device))
        cls = torch.arange(self.num_classes, device=logits.device)
        inside = (cls >= starts[g].unsqueeze(1)) & (cls < stops[g].unsqueeze(1))
        return logits.masked_fill(~inside, float("-inf"))

    def scores(self, logits: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        """Accuracy of each graph's own head, the mean over datasets of each dataset's ROC-AUC
        (binary, or macro one-vs-rest within the dataset), and those AUCs by dataset name
        (``auc_by_dataset``). A dataset with fewer than two of its classes present has no AUC and
        is left out of the mean (``nan`` when none has one)."""
        y = y.view(-1)
        if y.numel() == 0:
            return {"acc": float("nan"), "auc": float("nan"), "auc_by_dataset": {}}
        acc = accuracy(self.restrict(logits, y), y)
        groups = self.group_of(y)
        by_name: dict[str, float] = {}
        for i, (start, stop) in enumerate(self.bounds):
            members = groups == i
            if bool(members.any()):
                value = roc_auc(logits[members][:, start:stop], y[members] - start, stop - start)
                if not math.isnan(value):
                    by_name[self.names[i]] = value
        aucs = list(by_name.values())
        return {"acc": acc, "auc": sum(aucs) / len(aucs) if aucs else float("nan"), "auc_by_dataset": by_name}


__all__ = ["LabelGroups"]
