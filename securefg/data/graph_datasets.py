"""Graph-classification datasets (TU collection) through PyG's ``TUDataset``, offline-first."""

from __future__ import annotations

import os

import torch
from torch_geometric.data import Dataset
from torch_geometric.datasets import TUDataset
from torch_geometric.transforms import OneHotDegree

from securefg.data.catalog import get_spec
from securefg.data.root import open_with_pyg

#: GCFL's ``OneHotDegree`` max-degree arguments for the featureless IMDB sets (CeFGC follows GCFL).
GCFL_MAX_DEGREE: dict[str, int] = {"IMDB-BINARY": 135, "IMDB-MULTI": 88}


def max_degree(dataset: Dataset) -> int:
    """Return the largest node (out-)degree over all graphs of ``dataset``.

    Used to size ``OneHotDegree`` from the data itself, so the transform cannot fail on a graph
    with a larger degree than a hard-coded constant.
    """
    best = 0
    for data in dataset:
        if data.edge_index is not None and data.edge_index.numel():
            deg = torch.bincount(data.edge_index[0], minlength=data.num_nodes)
            best = max(best, int(deg.max()))
    return best


def load_graph_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    *,
    use_node_attr: bool = False,
) -> TUDataset:
    r"""Load a TU graph-classification dataset as PyG's :class:`~torch_geometric.datasets.TUDataset`.

    IMDB-BINARY and IMDB-MULTI have no node features; as in GCFL (whose setup CeFGC copies)
    they get a ``OneHotDegree`` transform. GCFL hard-codes max degrees 135 and 88; this loader
    uses ``max(actual, GCFL value)`` so the features keep GCFL's width (136 and 89) and a
    graph with a larger degree can never make the transform fail.

    **STATS** (PyG 2.8.1; features with ``use_node_attr=False``):

    .. list-table::
        :header-rows: 1

        * - Name
          - #graphs
          - #classes
          - #features
        * - MUTAG / PTC_MR / AIDS
          - 188 / 344 / 2,000
          - 2 / 2 / 2
          - 7 / 18 / 38
        * - PROTEINS / ENZYMES / DD
          - 1,113 / 600 / 1,178
          - 2 / 6 / 2
          - 3 / 3 / 89
        * - NCI1 / COX2 / BZR / DHFR
          - 4,110 / 467 / 405 / 756
          - 2 / 2 / 2 / 2
          - 37 / 35 / 53 / 53
        * - IMDB-BINARY / IMDB-MULTI
          - 1,000 / 1,500
          - 2 / 3
          - 136 / 89 (one-hot degree)

    Args:
        name (str): Case-insensitive TU name (``MUTAG``, ``imdb-binary``, ``PTC_MR``, ...).
        root (str or Path, optional): Data root; see :func:`securefg.data.root.resolve_root`.
            (default: :obj:`None`)
        use_node_attr (bool, optional): Append TU's continuous node attributes (PROTEINS,
            ENZYMES, COX2, BZR, DHFR, AIDS). (default: :obj:`False`)

    Raises:
        ConfigError: Unknown name (the message lists the choices), or a node-level name.
        DatasetNotFoundError: Raw files missing and not downloadable.
    """
    spec = get_spec(name, kind="graph")
    dataset = open_with_pyg(
        spec.name, root, build=lambda work: TUDataset(str(work), spec.name, use_node_attr=use_node_attr)
    )
    if spec.name in GCFL_MAX_DEGREE:
        dataset.transform = OneHotDegree(max(max_degree(dataset), GCFL_MAX_DEGREE[spec.name]))
    return dataset
