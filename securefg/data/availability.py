"""Which catalog datasets are usable under a root: their files, and optionally a real load.

Backs the ``securefg datasets`` command. "Raw files present" is not enough (a truncated or
re-compressed file fails only when parsed), so ``verify=True`` loads each dataset once and counts
it; that takes a minute and gigabytes of memory for the whole catalog, so the command checks only
the files unless asked (``--verify``). Loading is quiet: PyG's "Processing... Done!" lines are
swallowed.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass, field
from typing import Literal

from securefg.data.catalog import CATALOG, DatasetSpec
from securefg.data.root import missing_raw_files, resolve_root
from securefg.errors import ConfigError, DatasetNotFoundError

Status = Literal["ok", "missing", "error"]


@dataclass(frozen=True)
class DatasetStatus:
    """The outcome of checking one dataset.

    Args:
        name (str): Canonical dataset name.
        kind (str): ``"node"`` or ``"graph"``.
        status (str): ``"ok"`` (loaded), ``"missing"`` (raw files absent) or ``"error"``
            (files present but loading failed; see :obj:`detail`).
        counts (dict[str, int]): Loaded counts: nodes/edges/features/classes for node
            datasets, graphs/nodes/edges/features/classes for graph datasets. Empty unless ok.
        detail (str): Missing files or the error message. (default: ``""``)
    """

    name: str
    kind: str
    status: Status
    counts: dict[str, int] = field(default_factory=dict)
    detail: str = ""


def _counts(spec: DatasetSpec, root: str) -> dict[str, int]:
    """Load the dataset (PyG's progress prints swallowed) and count it."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return _load_and_count(spec, root)


def _load_and_count(spec: DatasetSpec, root: str) -> dict[str, int]:
    from securefg.data.graph_datasets import load_graph_dataset  # torch and PyG: only when loading
    from securefg.data.node_datasets import load_node_dataset

    if spec.kind == "node":
        data = load_node_dataset(spec.name, root)
        return {
            "nodes": int(data.num_nodes),
            "edges": int(data.num_edges),
            "features": int(data.num_features),
            "classes": int(data.y.max()) + 1,
        }
    ds = load_graph_dataset(spec.name, root)
    return {
        "graphs": len(ds),
        "nodes": int(ds._data.num_nodes) if ds._data.num_nodes is not None else 0,
        "edges": int(ds._data.edge_index.size(1)),
        "features": int(ds.num_features),
        "classes": int(ds.num_classes),
    }


def available_datasets(
    root: str | os.PathLike[str] | None = None,
    *,
    verify: bool = True,
    names: list[str] | None = None,
    kind: str | None = None,
) -> list[DatasetStatus]:
    """Report every catalog dataset as ok, missing or error under ``root``.

    Missing raw files are reported without any download attempt, whatever
    ``SECUREFG_OFFLINE`` says: listing must be fast and side-effect free.

    Args:
        root (str or Path, optional): Data root; see :func:`securefg.data.root.resolve_root`.
            (default: :obj:`None`)
        verify (bool, optional): Load each present dataset and report its counts; if
            :obj:`False`, only check that the raw files exist. (default: :obj:`True`)
        names (list[str], optional): Restrict to these canonical names. (default: all)
        kind (str, optional): Restrict to ``"node"`` or ``"graph"`` datasets. (default: both)

    Returns:
        list[DatasetStatus]: One entry per dataset, in catalog order.
    """
    if kind not in (None, "node", "graph"):
        raise ConfigError(f"dataset kind must be 'node' or 'graph', got {kind!r}")
    src = resolve_root(root)
    out: list[DatasetStatus] = []
    for spec in CATALOG.values():
        if (names is not None and spec.name not in names) or (kind is not None and spec.kind != kind):
            continue
        missing = missing_raw_files(spec, src)
        if missing:
            detail = f"missing in {src / spec.raw_dir}: {', '.join(missing)}"
            out.append(DatasetStatus(spec.name, spec.kind, "missing", detail=detail))
            continue
        if not verify:
            out.append(DatasetStatus(spec.name, spec.kind, "ok"))
            continue
        try:
            out.append(DatasetStatus(spec.name, spec.kind, "ok", _counts(spec, str(src))))
        except DatasetNotFoundError as exc:
            out.append(DatasetStatus(spec.name, spec.kind, "missing", detail=str(exc)))
        except Exception as exc:  # noqa: BLE001 - report and keep going: one bad dataset must not hide the rest
            out.append(DatasetStatus(spec.name, spec.kind, "error", detail=f"{type(exc).__name__}: {exc}"))
    return out


def format_available(statuses: list[DatasetStatus]) -> str:
    """Render :func:`available_datasets` output as a text table."""
    header = f"{'dataset':<16}{'kind':<7}{'status':<9}details"
    lines = [header, "-" * len(header)]
    for s in statuses:
        info = ", ".join(f"{k}={v}" for k, v in s.counts.items()) if s.counts else s.detail
        lines.append(f"{s.name:<16}{s.kind:<7}{s.status:<9}{info}")
    return "\n".join(lines)
