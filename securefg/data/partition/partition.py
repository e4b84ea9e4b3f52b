"""The :class:`Partition` record: which items (nodes or graphs) each client holds.

Shaped like PyG's ``loader/cluster.py`` ``Partition``: a small dataclass in CSR form
(``ptr`` + ``index``), so disjoint and overlapping partitions share one type. It round-trips
through plain JSON (no pickle, no ``torch.load``), so a saved partition is safe to read and easy
to diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from securefg.errors import InvalidInputError

Level = Literal["node", "graph"]
FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class Partition:
    r"""Items assigned to clients, disjoint or overlapping.

    Client :math:`k` holds ``index[ptr[k]:ptr[k+1]]`` (sorted ascending). An item may belong
    to several clients (overlapping schemes) or to none (a server-held global test set).

    Args:
        name (str): Scheme that produced it (``"metis"``, ``"louvain"``, ...).
        level (str): ``"node"`` or ``"graph"``: what the item ids index.
        num_items (int): Number of items in the partitioned dataset.
        ptr (Tensor): :math:`[K + 1]` offsets into :obj:`index`.
        index (Tensor): Item ids grouped by client.
        params (Mapping[str, Any]): JSON-compatible parameters that reproduce it (seed, ...).
            (default: empty)
        masks (Mapping[str, Tensor]): Optional per-item boolean roles, e.g. ``train``/``val``/
            ``test`` and ``global_test`` for graph-level splits. (default: empty)
    """

    name: str
    level: Level
    num_items: int
    ptr: Tensor
    index: Tensor
    params: Mapping[str, Any] = field(default_factory=dict)
    masks: Mapping[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:  # normalise params to what JSON gives back (tuples -> lists), failing early if it can't
            object.__setattr__(self, "params", json.loads(json.dumps(dict(self.params))))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"Partition params must be JSON-compatible: {exc}") from exc
        if self.level not in ("node", "graph"):
            raise InvalidInputError(f"Partition level must be 'node' or 'graph', got {self.level!r}")
        if self.ptr.dim() != 1 or self.ptr.numel() < 2 or int(self.ptr[0]) != 0:
            raise InvalidInputError("Partition.ptr must be 1-D, start at 0 and cover at least one part")
        if bool((self.ptr.diff() < 0).any()) or int(self.ptr[-1]) != self.index.numel():
            raise InvalidInputError("Partition.ptr must be non-decreasing and end at len(index)")
        if self.index.dtype != torch.long or self.index.dim() != 1:
            raise InvalidInputError("Partition.index must be a 1-D int64 tensor")
        if self.index.numel() and (int(self.index.min()) < 0 or int(self.index.max()) >= self.num_items):
            raise InvalidInputError(f"Partition.index has ids outside [0, {self.num_items})")
        if self.index.numel() > 1:  # strictly increasing inside every part: sorted, no duplicates
            starts = torch.zeros(self.index.numel(), dtype=torch.bool)
            starts[self.ptr[:-1][self.ptr[:-1] < self.index.numel()]] = True
            if bool((self.index.diff()[~starts[1:]] <= 0).any()):
                raise InvalidInputError("Partition.index must be sorted and duplicate-free within each part")
        for key, mask in self.masks.items():
            if mask.dtype != torch.bool or mask.shape != (self.num_items,):
                raise InvalidInputError(f"Partition mask {key!r} must be bool of shape [{self.num_items}]")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_parts(
        cls,
        parts: Sequence[Tensor],
        *,
        num_items: int,
        name: str,
        level: Level = "node",
        params: Mapping[str, Any] | None = None,
        masks: Mapping[str, Tensor] | None = None,
    ) -> Partition:
        """Build from one id tensor per client (ids are sorted and de-duplicated per client)."""
        parts = [torch.unique(torch.as_tensor(p, dtype=torch.long).view(-1)) for p in parts]
        sizes = torch.tensor([p.numel() for p in parts], dtype=torch.long)
        ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        index = torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)
        return cls(name, level, int(num_items), ptr, index, dict(params or {}), dict(masks or {}))

    @classmethod
    def from_assignment(
        cls,
        assignment: Tensor,
        *,
        num_parts: int,
        name: str,
        level: Level = "node",
        params: Mapping[str, Any] | None = None,
        masks: Mapping[str, Tensor] | None = None,
    ) -> Partition:
        """Build a disjoint partition from a per-item client id (``-1``: held by no client)."""
        assignment = torch.as_tensor(assignment, dtype=torch.long).view(-1)
        if assignment.numel() and int(assignment.max()) >= num_parts:
            raise InvalidInputError(f"assignment has client ids >= num_parts={num_parts}")
        order = torch.argsort(assignment, stable=True)
        held = order[assignment[order] >= 0]
        sizes = torch.bincount(assignment[assignment >= 0], minlength=num_parts)
        ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        return cls(name, level, assignment.numel(), ptr, held, dict(params or {}), dict(masks or {}))

    # ------------------------------------------------------------------ views
    @property
    def num_parts(self) -> int:
        """Number of clients :math:`K`."""
        return self.ptr.numel() - 1

    def part(self, k: int) -> Tensor:
        """Item ids held by client ``k`` (sorted)."""
        if not 0 <= k < self.num_parts:
            raise InvalidInputError(f"client {k} out of range [0, {self.num_parts})")
        return self.index[int(self.ptr[k]) : int(self.ptr[k + 1])]

    def parts(self) -> list[Tensor]:
        """Item ids of every client."""
        return [self.part(k) for k in range(self.num_parts)]

    def sizes(self) -> Tensor:
        """:math:`[K]` number of items per client."""
        return self.ptr.diff()

    def membership(self) -> Tensor:
        """:math:`[N]` number of clients holding each item."""
        return torch.bincount(self.index, minlength=self.num_items)

    @property
    def is_disjoint(self) -> bool:
        """Whether no item is held by two clients."""
        return bool((self.membership() <= 1).all())

    def assignment(self) -> Tensor:
        """:math:`[N]` client id per item (``-1``: held by none).

        Raises:
            InvalidInputError: The partition overlaps, so an item has no single owner.
        """
        if not self.is_disjoint:
            raise InvalidInputError(
                f"{self!r} overlaps, so items have no single owner; use parts() or membership()"
            )
        out = torch.full((self.num_items,), -1, dtype=torch.long)
        out[self.index] = torch.repeat_interleave(torch.arange(self.num_parts), self.sizes())
        return out

    def __repr__(self) -> str:
        kind = "disjoint" if self.is_disjoint else "overlapping"
        return f"Partition({self.name}, num_parts={self.num_parts}, num_items={self.num_items}, {kind})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return (
            self.name == other.name
            and self.level == other.level
            and self.num_items == other.num_items
            and torch.equal(self.ptr, other.ptr)
            and torch.equal(self.index, other.index)
            and dict(self.params) == dict(other.params)
            and self.masks.keys() == other.masks.keys()
            and all(torch.equal(self.masks[k], other.masks[k]) for k in self.masks)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable tensors inside

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (masks stored as lists of the item ids where they are true)."""
        return {
            "format": "securefg.partition",
            "version": FORMAT_VERSION,
            "name": self.name,
            "level": self.level,
            "num_items": self.num_items,
            "ptr": self.ptr.tolist(),
            "index": self.index.tolist(),
            "params": dict(self.params),
            "masks": {k: torch.nonzero(m).view(-1).tolist() for k, m in self.masks.items()},
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Partition:
        """Inverse of :meth:`to_dict`; validates the format tag and every field."""
        if obj.get("format") != "securefg.partition" or obj.get("version") != FORMAT_VERSION:
            raise InvalidInputError(
                f"not a securefg partition (format {obj.get('format')!r}, version {obj.get('version')!r})"
            )
        n = int(obj["num_items"])
        masks = {}
        for key, ids in obj.get("masks", {}).items():
            mask = torch.zeros(n, dtype=torch.bool)
            mask[torch.tensor(ids, dtype=torch.long)] = True
            masks[key] = mask
        return cls(
            name=str(obj["name"]),
            level=obj["level"],
            num_items=n,
            ptr=torch.tensor(obj["ptr"], dtype=torch.long),
            index=torch.tensor(obj["index"], dtype=torch.long),
            params=dict(obj.get("params", {})),
            masks=masks,
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write as JSON (atomically: a temp file is renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Partition:
        """Read a partition written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))
