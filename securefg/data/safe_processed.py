"""PyG's processed files (``processed/*.pt``), read with ``weights_only=True`` and never retried without.

Why: PyG's ``io.fs.torch_load`` retries a failed ``torch.load(weights_only=True)`` with
``weights_only=False``, and ``Dataset._process`` reads ``pre_transform.pt`` / ``pre_filter.pt``
with ``weights_only=False``: either would run whatever a crafted file names. Processed files live
in securefg's own work copy (:mod:`securefg.data.root`), never in a data root, but that cache may
be shared, so while a dataset is built :func:`strict_pyg_loads` puts :func:`strict_torch_load` in
place of ``fs.torch_load``, and :func:`check_processed` first reads the two marker files with
``weights_only=True`` (a file that loads that way holds only plain data, so PyG's second,
unrestricted read of it runs nothing). Every processed file PyG writes for the catalog loads
this way.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from securefg.errors import DatasetFileError, UnsafeDataFileError

_FS = importlib.import_module("torch_geometric.io.fs")
_PATCH_LOCK = threading.RLock()  # the swap is process-wide: one dataset is built at a time

#: Files ``Dataset._process`` reads with ``weights_only=False`` when present.
MARKER_FILES = ("pre_transform.pt", "pre_filter.pt")


def strict_torch_load(path: str | os.PathLike[str], map_location: Any = None) -> Any:
    """``torch.load(path, weights_only=True)``, with failures as typed errors naming the file.

    Args:
        path (str or Path): A processed file in the work copy.
        map_location (Any, optional): As for :func:`torch.load`. (default: :obj:`None`)

    Raises:
        UnsafeDataFileError: The file holds objects outside torch's weights-only allow-list.
        DatasetFileError: The file is truncated or corrupt.
    """
    name = os.fspath(path)
    fix = f"delete {Path(name).parent} so it is rebuilt from the raw files"
    try:
        return torch.load(name, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"names {found.group(1)}" if found else "holds objects"
        raise UnsafeDataFileError(
            f"{name}: refused to load: it {what}, outside torch's weights-only allow-list (nothing was run); {fix}",
            path=name,
        ) from exc
    except Exception as exc:  # torch raises RuntimeError, EOFError, ... for a bad file
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise DatasetFileError(f"{name}: truncated or corrupt ({type(exc).__name__}: {first}); {fix}", path=name) from exc


def check_processed(folder: Path) -> None:
    """Read the marker files PyG would load unrestricted, with ``weights_only=True`` first.

    Raises:
        UnsafeDataFileError: A marker file holds objects outside the weights-only allow-list.
        DatasetFileError: A marker file is truncated or corrupt.
    """
    for name in MARKER_FILES:
        if (folder / name).is_file():
            strict_torch_load(folder / name)


@contextlib.contextmanager
def strict_pyg_loads() -> Iterator[None]:
    """Hold :func:`strict_torch_load` in place of PyG's ``torch_geometric.io.fs.torch_load``."""
    with _PATCH_LOCK:
        saved = _FS.torch_load
        _FS.torch_load = strict_torch_load
        try:
            yield
        finally:
            _FS.torch_load = saved


__all__ = ["MARKER_FILES", "check_processed", "strict_pyg_loads", "strict_torch_load"]
