"""Base class of partitioners: seeded callables with a ``__repr__`` and a parameter-named cache.

Shaped like PyG transforms (``transforms/base_transform.py``): a partitioner is configured once
and then called on data. Unlike ``RandomNodeSplit`` it takes its seed as an argument, so the same
configuration always yields the same :class:`~securefg.data.partition.partition.Partition`, and
that partition can be cached under a file name built from the configuration (as PyG's
``ClusterData`` names ``metis_<parts>.pt``) plus a fingerprint of the data it depends on.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from torch import Tensor
from torch_geometric.data import Data

from securefg.data.partition.partition import Level, Partition
from securefg.data.root import cache_root
from securefg.errors import ConfigError


def _hash_tensor(h: Any, t: Tensor) -> None:
    t = t.detach().cpu().contiguous()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    h.update(t.numpy().tobytes())


def fingerprint_data(data: Data, fields: tuple[str, ...]) -> str:
    """Hash ``num_nodes`` and the named fields of ``data`` (16 hex chars)."""
    h = hashlib.sha256(f"num_nodes={data.num_nodes}".encode())
    for key in fields:
        value = data.get(key, None)
        h.update(key.encode())
        if isinstance(value, Tensor):
            _hash_tensor(h, value)
    return h.hexdigest()[:16]


class Partitioner(ABC):
    """Split one dataset into client shares; subclasses implement :meth:`__call__`.

    Args:
        num_parts (int): Number of clients :math:`K`.
        seed (int): Seed of every random choice the scheme makes.
    """

    #: Short scheme name, used in :class:`Partition` and cache file names.
    name: ClassVar[str] = "base"
    #: What the partition's item ids index.
    level: ClassVar[Level] = "node"
    #: Fields of the input the result depends on (hashed into the cache key).
    uses: ClassVar[tuple[str, ...]] = ("edge_index",)

    def __init__(self, num_parts: int, *, seed: int) -> None:
        if int(num_parts) < 1:
            raise ConfigError(f"{type(self).__name__} needs num_parts >= 1, got {num_parts}")
        self.num_parts = int(num_parts)
        self.seed = int(seed)

    @abstractmethod
    def __call__(self, data: Any) -> Partition:
        """Partition ``data`` (deterministic for a given configuration and input)."""

    def params(self) -> dict[str, Any]:
        """Parameters that, with :attr:`name`, reproduce this partitioner (JSON-compatible)."""
        return {"num_parts": self.num_parts, "seed": self.seed}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    @property
    def cache_name(self) -> str:
        """File stem built from the parameters, e.g. ``metis-num_parts=10-seed=0``."""
        parts = [self.name] + [f"{k}={v}" for k, v in self.params().items()]
        return "-".join(parts).replace("/", "_").replace(" ", "")

    def fingerprint(self, data: Any) -> str:
        """Hash of the input fields the result depends on (see :attr:`uses`)."""
        return fingerprint_data(data, self.uses)

    def cached(self, data: Any, cache_dir: str | os.PathLike[str] | None = None) -> Partition:
        """Return the cached partition of ``data`` if present, else compute and save it.

        Args:
            data: Input, as for :meth:`__call__`.
            cache_dir (str or Path, optional): Folder of cached partitions. (default:
                ``<SECUREFG_CACHE>/partitions``)
        """
        folder = Path(cache_dir) if cache_dir is not None else cache_root() / "partitions"
        path = folder / f"{self.cache_name}-{self.fingerprint(data)}.json"
        if path.is_file():
            return Partition.load(path)
        partition = self(data)
        partition.save(path)
        return partition
