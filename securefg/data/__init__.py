"""Offline-first datasets, synthetic graphs and federated partitioners.

Loaders wrap PyG's own dataset classes and never write to the data root (see
:mod:`securefg.data.root`); partitioners live in :mod:`securefg.data.partition`.
"""

from securefg.data.availability import DatasetStatus, available_datasets, format_available
from securefg.data.catalog import CATALOG, DatasetSpec, get_spec
from securefg.data.graph_datasets import load_graph_dataset
from securefg.data.node_datasets import load_node_dataset, load_node_pyg_dataset
from securefg.data.root import cache_root, prepare, resolve_root
from securefg.data.splits import SPLIT_PRESETS, random_node_split, with_node_split
from securefg.data.synthetic import make_csbm, make_graph_classification

__all__ = [
    "CATALOG",
    "SPLIT_PRESETS",
    "DatasetSpec",
    "DatasetStatus",
    "available_datasets",
    "cache_root",
    "format_available",
    "get_spec",
    "load_graph_dataset",
    "load_node_dataset",
    "load_node_pyg_dataset",
    "make_csbm",
    "make_graph_classification",
    "prepare",
    "random_node_split",
    "resolve_root",
    "with_node_split",
]
