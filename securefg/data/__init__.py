"""Offline-first datasets, synthetic graphs and federated partitioners.

Loaders wrap PyG's own dataset classes and never write to the data root (see
:mod:`securefg.data.root`); partitioners live in :mod:`securefg.data.partition`.

The names below are imported on first use (PEP 562), so that ``securefg.data.catalog`` and
``securefg.data.root`` can be read without importing torch and PyG: the CLI checks a dataset
name and its files that way before it loads anything.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "DatasetStatus": "securefg.data.availability",
    "available_datasets": "securefg.data.availability",
    "format_available": "securefg.data.availability",
    "CATALOG": "securefg.data.catalog",
    "DatasetSpec": "securefg.data.catalog",
    "get_spec": "securefg.data.catalog",
    "load_graph_dataset": "securefg.data.graph_datasets",
    "load_node_dataset": "securefg.data.node_datasets",
    "load_node_pyg_dataset": "securefg.data.node_datasets",
    "cache_root": "securefg.data.root",
    "prepare": "securefg.data.root",
    "resolve_root": "securefg.data.root",
    "SPLIT_PRESETS": "securefg.data.splits",
    "random_node_split": "securefg.data.splits",
    "with_node_split": "securefg.data.splits",
    "make_csbm": "securefg.data.synthetic",
    "make_graph_classification": "securefg.data.synthetic",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'securefg.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


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
