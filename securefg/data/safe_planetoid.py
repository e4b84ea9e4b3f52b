"""PyG's :class:`~torch_geometric.datasets.Planetoid`, with its raw pickles read by an allow-list unpickler.

PyG's ``Planetoid.process`` calls ``torch_geometric.io.planetoid.read_planetoid_data``, which reads
each raw file through that module's ``read_file`` (``pickle.load``, able to run any code a file
names). :class:`SafePlanetoid` swaps that one function for :func:`read_planetoid_file` while PyG's
own processing runs (CiteSeer's isolated test nodes, the test-index reordering, the edge list), so
the result is PyG's own, but PyG's unpickler never sees a file. The module's ``pickle`` is replaced
too, by a stub that refuses, so should a PyG release read files another way, loading fails closed
instead of unpickling.
"""

from __future__ import annotations

import contextlib
import importlib
import os.path as osp
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor
from torch_geometric.datasets import Planetoid
from torch_geometric.io import read_txt_array

from securefg.data.safe_pickle import PickledCsr, load_pickle, numeric_array
from securefg.errors import DatasetFileError, UnsafeDataFileError

_PLANETOID_IO = importlib.import_module("torch_geometric.io.planetoid")
_PATCH_LOCK = threading.RLock()  # the swap is process-wide: one Planetoid processes at a time


class _RefusingPickle:
    """Stands in for the ``pickle`` module inside PyG's Planetoid reader: any use is refused."""

    @staticmethod
    def load(file: Any, **kwargs: Any) -> Any:
        name = getattr(file, "path", None) or getattr(file, "name", "a Planetoid raw file")
        raise UnsafeDataFileError(
            f"{name}: PyG's Planetoid reader tried to unpickle it directly; securefg refuses (its "
            f"allow-list reader was bypassed, which means the installed torch_geometric changed)",
            path=str(name),
        )


def _matrix(value: object, path: str) -> Tensor:
    if isinstance(value, PickledCsr):
        return torch.from_numpy(value.to_dense(path)).to(torch.float)
    array = numeric_array(value, path=path, what="the matrix")
    if array.ndim != 2:
        raise DatasetFileError(f"{path}: expected a 2-D matrix, found shape {array.shape}", path=path)
    return torch.from_numpy(array).to(torch.float)


def _graph(value: object, path: str) -> dict[int, list[int]]:
    if not isinstance(value, dict) or not all(
        type(k) is int and isinstance(v, list) and all(type(n) is int for n in v) for k, v in value.items()
    ):
        raise DatasetFileError(f"{path}: expected a dict of int -> list of int (adjacency lists)", path=path)
    return value


def read_planetoid_file(folder: str, prefix: str, name: str) -> Tensor | dict[int, list[int]]:
    """Drop-in for PyG's ``torch_geometric.io.planetoid.read_file``, without PyG's unpickler.

    Args:
        folder (str): The raw folder.
        prefix (str): The dataset name (``"Cora"``); files are ``ind.<prefix lower>.<name>``.
        name (str): ``x``, ``tx``, ``allx``, ``y``, ``ty``, ``ally``, ``graph`` or ``test.index``.

    Returns:
        Tensor or dict: A float matrix, the adjacency lists (``graph``) or the long test
        indices (``test.index``), as PyG's ``read_file`` returns them.

    Raises:
        UnsafeDataFileError: The file names a global outside the allow-list (nothing ran).
        DatasetFileError: The file is truncated, corrupt or holds the wrong kind of object.
    """
    path = osp.join(folder, f"ind.{prefix.lower()}.{name}")
    if name == "test.index":
        try:
            index = read_txt_array(path, dtype=torch.long)
        except Exception as exc:  # a text parse failure means a bad file
            raise DatasetFileError(f"{path}: not a list of integers ({type(exc).__name__}: {exc})", path=path) from exc
        if index.dim() != 1 or index.numel() == 0 or int(index.min()) < 0:
            raise DatasetFileError(f"{path}: expected one non-negative node index per line", path=path)
        return index
    value = load_pickle(path)
    return _graph(value, path) if name == "graph" else _matrix(value, path)


@contextlib.contextmanager
def _safe_reader() -> Iterator[None]:
    """Swap PyG's ``read_file`` and ``pickle`` in ``torch_geometric.io.planetoid`` while held."""
    with _PATCH_LOCK:
        saved = _PLANETOID_IO.read_file, _PLANETOID_IO.pickle
        _PLANETOID_IO.read_file, _PLANETOID_IO.pickle = read_planetoid_file, _RefusingPickle
        try:
            yield
        finally:
            _PLANETOID_IO.read_file, _PLANETOID_IO.pickle = saved


class SafePlanetoid(Planetoid):
    r"""PyG's Planetoid (Cora, CiteSeer, PubMed) whose ``process`` reads raw files via an allow-list.

    Same arguments, files, processed output and ``__repr__`` (``Cora()``) as
    :class:`~torch_geometric.datasets.Planetoid`; only the unpickling differs (see the module
    docstring).

    Raises:
        UnsafeDataFileError: A raw pickle names a global outside the allow-list.
        DatasetFileError: A raw file is truncated or corrupt.
    """

    def process(self) -> None:
        """Run PyG's processing with :func:`read_planetoid_file` as its file reader."""
        with _safe_reader():
            super().process()


__all__ = ["SafePlanetoid", "read_planetoid_file"]
