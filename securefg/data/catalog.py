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
