"""The catalog of datasets securefg knows how to load, and where their raw files live.

One table, so that the loaders, the offline checks and the ``securefg datasets`` command agree on
names, folders and files. The raw layouts are PyG's own (``torch_geometric.datasets``); a realdata
test checks the file lists here against PyG's ``raw_file_names``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from securefg.errors import ConfigError

Kind = Literal["node", "graph"]


@dataclass(frozen=True)
class DatasetSpec:
    """Where one dataset lives and which PyG class reads it.

    Args:
        name (str): Canonical name, as PyG spells it (``"CiteSeer"``, ``"IMDB-BINARY"``).
        kind (str): ``"node"`` (one graph, node classification) or ``"graph"`` (graph
            classification).
        family (str): PyG loader family: ``"planetoid"``, ``"amazon"``, ``"coauthor"``,
            ``"wikipedia"``, ``"actor"``, ``"heterophilous"`` or ``"tu"``.
        raw_dir (str): Folder of the raw files, relative to the data root.
        raw_files (tuple[str, ...]): Files that must exist in :obj:`raw_dir` for an offline load.
    """

    name: str
    kind: Kind
    family: str
    raw_dir: str
    raw_files: tuple[str, ...]

    @property
    def dataset_dir(self) -> str:
        """The top folder of the dataset under the root (first component of :obj:`raw_dir`)."""
        return self.raw_dir.split("/", 1)[0]


def _planetoid(name: str) -> DatasetSpec:
    parts = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
    files = tuple(f"ind.{name.lower()}.{p}" for p in parts)
    return DatasetSpec(name, "node", "planetoid", f"{name}/raw", files)


def _geom_gcn_files(prefix: str) -> tuple[str, ...]:
    splits = tuple(f"{prefix}_split_0.6_0.2_{i}.npz" for i in range(10))
    return ("out1_node_feature_label.txt", "out1_graph_edges.txt", *splits)


def _wikipedia(name: str) -> DatasetSpec:
    return DatasetSpec(name, "node", "wikipedia", f"{name}/geom_gcn/raw", _geom_gcn_files(name))


def _heterophilous(name: str) -> DatasetSpec:
    folder = name.lower().replace("-", "_")
    return DatasetSpec(name, "node", "heterophilous", f"{folder}/raw", (f"{folder}.npz",))


def _tu(name: str) -> DatasetSpec:
    files = tuple(f"{name}_{p}.txt" for p in ("A", "graph_indicator", "graph_labels"))
    return DatasetSpec(name, "graph", "tu", f"{name}/raw", files)


_SPECS: tuple[DatasetSpec, ...] = (
    _planetoid("Cora"),
    _planetoid("CiteSeer"),
    _planetoid("PubMed"),
    DatasetSpec("Computers", "node", "amazon", "Computers/raw", ("amazon_electronics_computers.npz",)),
    DatasetSpec("Photo", "node", "amazon", "Photo/raw", ("amazon_electronics_photo.npz",)),
    DatasetSpec("CS", "node", "coauthor", "CS/raw", ("ms_academic_cs.npz",)),
    DatasetSpec("Physics", "node", "coauthor", "Physics/raw", ("ms_academic_phy.npz",)),
    _wikipedia("chameleon"),
    _wikipedia("squirrel"),
    DatasetSpec("Actor", "node", "actor", "Actor/raw", _geom_gcn_files("film")),
    _heterophilous("Minesweeper"),
    _heterophilous("Amazon-ratings"),
    *(
        _tu(n)
        for n in (
            "MUTAG",
            "PROTEINS",
            "ENZYMES",
            "NCI1",
            "DD",
            "IMDB-BINARY",
            "IMDB-MULTI",
            "COX2",
            "BZR",
            "DHFR",
            "PTC_MR",
            "AIDS",
        )
    ),
)

#: Every known dataset by canonical name, in display order.
CATALOG: dict[str, DatasetSpec] = {spec.name: spec for spec in _SPECS}

#: Each dataset's size as PyG loads it from the raw files (no preprocessing): ``nodes``, ``edges``
#: (directed, each undirected edge twice), ``features`` and ``classes``; graph datasets also
#: ``graphs``. ``securefg datasets`` prints these without loading anything; a realdata test checks
#: them against loading (``securefg datasets --verify`` loads and counts).
STATS: dict[str, dict[str, int]] = {
    "Cora": {"nodes": 2708, "edges": 10556, "features": 1433, "classes": 7},
    "CiteSeer": {"nodes": 3327, "edges": 9104, "features": 3703, "classes": 6},
    "PubMed": {"nodes": 19717, "edges": 88648, "features": 500, "classes": 3},
    "Computers": {"nodes": 13752, "edges": 491722, "features": 767, "classes": 10},
    "Photo": {"nodes": 7650, "edges": 238162, "features": 745, "classes": 8},
    "CS": {"nodes": 18333, "edges": 163788, "features": 6805, "classes": 15},
    "Physics": {"nodes": 34493, "edges": 495924, "features": 8415, "classes": 5},
    "chameleon": {"nodes": 2277, "edges": 36101, "features": 2325, "classes": 5},
    "squirrel": {"nodes": 5201, "edges": 217073, "features": 2089, "classes": 5},
    "Actor": {"nodes": 7600, "edges": 30019, "features": 932, "classes": 5},
    "Minesweeper": {"nodes": 10000, "edges": 78804, "features": 7, "classes": 2},
    "Amazon-ratings": {"nodes": 24492, "edges": 186100, "features": 300, "classes": 5},
    "MUTAG": {"graphs": 188, "nodes": 3371, "edges": 7442, "features": 7, "classes": 2},
    "PROTEINS": {"graphs": 1113, "nodes": 43471, "edges": 162088, "features": 3, "classes": 2},
    "ENZYMES": {"graphs": 600, "nodes": 19580, "edges": 74564, "features": 3, "classes": 6},
    "NCI1": {"graphs": 4110, "nodes": 122747, "edges": 265506, "features": 37, "classes": 2},
    "DD": {"graphs": 1178, "nodes": 334925, "edges": 1686092, "features": 89, "classes": 2},
    "IMDB-BINARY": {"graphs": 1000, "nodes": 19773, "edges": 193062, "features": 136, "classes": 2},
    "IMDB-MULTI": {"graphs": 1500, "nodes": 19502, "edges": 197806, "features": 89, "classes": 3},
    "COX2": {"graphs": 467, "nodes": 19252, "edges": 40578, "features": 35, "classes": 2},
    "BZR": {"graphs": 405, "nodes": 14479, "edges": 31070, "features": 53, "classes": 2},
    "DHFR": {"graphs": 756, "nodes": 32075, "edges": 67352, "features": 53, "classes": 2},
    "PTC_MR": {"graphs": 344, "nodes": 4915, "edges": 10108, "features": 18, "classes": 2},
    "AIDS": {"graphs": 2000, "nodes": 31385, "edges": 64780, "features": 38, "classes": 2},
}

# Names used in the papers and their code that differ from PyG's spelling.
_ALIASES: dict[str, str] = {
    "computer": "Computers",
    "amazon-computer": "Computers",
    "amazon-computers": "Computers",
    "amazon-photo": "Photo",
    "coauthor-cs": "CS",
    "coauthor-physics": "Physics",
    "film": "Actor",
    "imdb-b": "IMDB-BINARY",
    "imdb-m": "IMDB-MULTI",
}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


_LOOKUP: dict[str, str] = {_key(n): n for n in CATALOG} | _ALIASES


def get_spec(name: str, kind: Kind | None = None) -> DatasetSpec:
    """Resolve a dataset name, case-insensitively (``"cora"``, ``"imdb_binary"``, ``"film"``).

    Args:
        name (str): Dataset name.
        kind (str, optional): If given, the dataset must be of this kind, so a graph-classification
            name passed to the node loader fails here with a pointer to the right loader.
            (default: :obj:`None`)

    Raises:
        ConfigError: Unknown name (the message lists the choices), or the wrong kind.
    """
    canonical = _LOOKUP.get(_key(name))
    if canonical is None:
        choices = sorted(n for n, s in CATALOG.items() if kind is None or s.kind == kind)
        raise ConfigError(f"Could not resolve dataset {name!r} among choices {choices}")
    spec = CATALOG[canonical]
    if kind is not None and spec.kind != kind:
        loader = "load_graph_dataset" if spec.kind == "graph" else "load_node_dataset"
        raise ConfigError(
            f"{spec.name!r} is a {spec.kind}-level dataset, not a {kind}-level one; use {loader}()"
        )
    return spec
