"""Node-classification datasets through PyG's own classes, offline-first.

All loads go through :func:`securefg.data.root.open_with_pyg`, which copies the raw files to a
writable work directory first, so the shared root is never written. Planetoid's raw files are
pickles, read by :class:`~securefg.data.safe_planetoid.SafePlanetoid`'s allow-list unpickler.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch_geometric.transforms as T
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.datasets import (
    Actor,
    Amazon,
    Coauthor,
    HeterophilousGraphDataset,
    WikipediaNetwork,
)

from securefg.data.catalog import DatasetSpec, get_spec
from securefg.data.root import open_with_pyg
from securefg.data.safe_planetoid import SafePlanetoid


def _build(spec: DatasetSpec, work: Path) -> InMemoryDataset:
    root = str(work)
    if spec.family == "planetoid":
        return SafePlanetoid(root, spec.name)  # raw files are pickles: read through an allow-list
    if spec.family == "amazon":
        return Amazon(root, spec.name)
    if spec.family == "coauthor":
        return Coauthor(root, spec.name)
    if spec.family == "wikipedia":
        return WikipediaNetwork(root, spec.name, geom_gcn_preprocess=True)
    if spec.family == "actor":
        return Actor(str(work / spec.dataset_dir))  # Actor takes its own folder as root
    if spec.family == "heterophilous":
        return HeterophilousGraphDataset(root, spec.name)
    raise AssertionError(f"no node loader for family {spec.family!r}")  # catalog bug, not input


def load_node_pyg_dataset(name: str, root: str | os.PathLike[str] | None = None) -> InMemoryDataset:
    """Return the PyG dataset object for a node-classification dataset (no transforms).

    Args:
        name (str): Dataset name, case-insensitive (see :func:`load_node_dataset`).
        root (str or Path, optional): Data root; see :func:`securefg.data.root.resolve_root`.
            (default: :obj:`None`)

    Raises:
        ConfigError: Unknown name, or a graph-classification name.
        DatasetNotFoundError: Raw files missing and not downloadable.
    """
    spec = get_spec(name, kind="node")
    return open_with_pyg(spec.name, root, build=lambda work: _build(spec, work))


def load_node_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    *,
    largest_cc: bool = False,
    normalize_features: bool = False,
) -> Data:
    r"""Load one node-classification graph as a :class:`~torch_geometric.data.Data`.

    FED-PUB and FedSheafHN preprocess Planetoid and Amazon graphs with
    ``LargestConnectedComponents()`` then ``NormalizeFeatures()``, which is why their tables
    list Cora with 2,485 nodes rather than 2,708; pass ``largest_cc=True,
    normalize_features=True`` to reproduce that. FedStruct uses the full graphs (the defaults).
    The transforms run after loading, so the processed cache does not depend on them.

    The Geom-GCN sets (chameleon, squirrel, Actor) are directed as stored and carry
    ``[N, 10]`` masks (ten public splits); apply ``ToUndirected()`` yourself if needed.

    **STATS** (PyG 2.8.1, full graphs; edges are directed ``edge_index`` columns):

    .. list-table::
        :header-rows: 1

        * - Name
          - #nodes
          - #edges
          - #features
          - #classes
        * - Cora
          - 2,708 (LCC 2,485)
          - 10,556 (LCC 10,138)
          - 1,433
          - 7
        * - CiteSeer
          - 3,327 (LCC 2,120)
          - 9,104 (LCC 7,358)
          - 3,703
          - 6
        * - PubMed
          - 19,717
          - 88,648
          - 500
          - 3
        * - Computers / Photo
          - 13,752 / 7,650
          - 491,722 / 238,162
          - 767 / 745
          - 10 / 8
        * - CS / Physics
          - 18,333 / 34,493
          - 163,788 / 495,924
          - 6,805 / 8,415
          - 15 / 5
        * - chameleon / squirrel / Actor
          - 2,277 / 5,201 / 7,600
          - 36,101 / 217,073 / 30,019
          - 2,325 / 2,089 / 932
          - 5 / 5 / 5
        * - Minesweeper / Amazon-ratings
          - 10,000 / 24,492
          - 78,804 / 186,100
          - 7 / 300
          - 2 / 5

    Args:
        name (str): Case-insensitive name: ``Cora``, ``CiteSeer``, ``PubMed``, ``Computers``,
            ``Photo``, ``CS``, ``Physics``, ``chameleon``, ``squirrel``, ``Actor``,
            ``Minesweeper``, ``Amazon-ratings`` (aliases such as ``film`` are accepted).
        root (str or Path, optional): Data root; see :func:`securefg.data.root.resolve_root`.
            (default: :obj:`None`)
        largest_cc (bool, optional): Keep only the largest (weakly) connected component.
            (default: :obj:`False`)
        normalize_features (bool, optional): Row-normalize features to sum to one.
            (default: :obj:`False`)

    Returns:
        Data: The graph, with PyG's masks where the dataset ships them.

    Raises:
        ConfigError: Unknown name (the message lists the choices), or a graph-level name.
        DatasetNotFoundError: Raw files missing and not downloadable.
    """
    data = load_node_pyg_dataset(name, root)[0]
    if largest_cc:
        data = T.LargestConnectedComponents(num_components=1, connection="weak")(data)
    if normalize_features:
        data = T.NormalizeFeatures()(data)
    return data
