"""Planetoid raw folders for tests: a tiny valid one, and pickles that try to run code.

The tiny set has PyG's layout and pickle types (scipy CSR features, numpy one-hot labels, a
``defaultdict(list)`` of adjacency lists), so the real reader path runs without the real data.
PyG marks nodes ``y.size(0) .. y.size(0) + 500`` as validation, hence 520 nodes.
"""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

NODES, TRAIN, TEST, FEATURES, CLASSES = 520, 2, 10, 3, 2


def _dump(path: Path, obj: object) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=4))


def write_tiny_planetoid(root: Path, name: str = "Cora") -> Path:
    """Write ``root/<name>/raw/ind.<name>.*`` for a 520-node graph; return the raw folder."""
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    features = (rng.random((NODES, FEATURES)) < 0.5).astype(np.float32)
    labels = np.eye(CLASSES, dtype=np.int32)[np.arange(NODES) % CLASSES]
    known = NODES - TEST
    p = f"ind.{name.lower()}"
    _dump(raw / f"{p}.x", sp.csr_matrix(features[:TRAIN]))
    _dump(raw / f"{p}.allx", sp.csr_matrix(features[:known]))
    _dump(raw / f"{p}.tx", sp.csr_matrix(features[known:]))
    _dump(raw / f"{p}.y", labels[:TRAIN])
    _dump(raw / f"{p}.ally", labels[:known])
    _dump(raw / f"{p}.ty", labels[known:])
    _dump(raw / f"{p}.graph", collections.defaultdict(list, {i: [(i + 1) % NODES] for i in range(NODES)}))
    (raw / f"{p}.test.index").write_text("".join(f"{i}\n" for i in range(known, NODES)))
    return raw


class CallOnLoad:
    """Pickles as ``func(*args)``: what a crafted dataset file does to run code."""

    def __init__(self, func: Any, *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return self.func, self.args


def crafted_calls(marker: Path) -> dict[str, CallOnLoad]:
    """Pickled payloads that each create ``marker`` if they are ever run."""
    import builtins
    import subprocess

    return {
        "os.system": CallOnLoad(os.system, f"touch {marker}"),
        "builtins.eval": CallOnLoad(builtins.eval, f"open({str(marker)!r}, 'w').close()"),
        "subprocess.call": CallOnLoad(subprocess.call, ["touch", str(marker)]),
    }


def write_crafted(path: Path, payload: CallOnLoad, *, protocol: int = 2) -> None:
    """Replace ``path`` with a pickle of ``payload`` (protocol 2, as the published files use)."""
    path.write_bytes(pickle.dumps(payload, protocol=protocol))
