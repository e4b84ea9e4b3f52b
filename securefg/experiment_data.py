"""Build a method's task from a run configuration: load, split, partition, hand out.

Defaults per partition reproduce each paper's setting:

* ``metis`` / ``metis_overlap`` (FED-PUB, FedSheafHN): largest connected component,
  row-normalised features, global 20/40/40 node split before partitioning.
* ``louvain`` (FedSage): full graph, 60/20/20.
* ``random`` / ``kmeans`` (FedStruct): full graph, 10/10/80.
* graph datasets: ``single`` (CeFGC: 8:2 global train/test, even shares, 0.7/0.1/0.2 per
  client), ``dirichlet``, ``across_dataset`` / ``across_domain`` (``--dataset A+B+...`` or
  the presets ``Protein``, ``Social``, ``Mix``; ``--clients`` is then per dataset).

Graph-task node features (``--option features=...``, read here, never by a method):

* ``original`` (the default when every dataset of the run has the same feature width): the
  features of the CeFGC paper's Table 6: TU node-label one-hots (MUTAG 7, PROTEINS/ENZYMES 3)
  and GCFL's one-hot degree for the featureless IMDB sets. CeFGC then gives synthetic graphs
  features drawn per class and degree from each sender's own feature distribution
  (:mod:`securefg.methods.cefgc.node_features`). Measured on PROTEINS (pooled GIN, seed 0):
  global-test AUC 0.81 with these features vs 0.71 with one-hot degree.
* ``degree``: one-hot capped degree for every graph (cefgc.md §6.1 decision (a); the default
  when dataset widths differ, e.g. Social = IMDB-B 136 + IMDB-M 89).

Model options of graph tasks are read here too: ``--option pooling=sum|mean`` (GIN readout) and,
with several datasets, ``--option heads=dataset|shared``: ``dataset`` (the default, GCFL's
layout) trains and scores every graph on its own dataset's classes only
(:mod:`securefg.methods.label_groups`); ``shared`` uses one softmax over the global label space
(cefgc.md §6.1 decision (a)), where FedAvg stays at chance on ENZYMES+PROTEINS. With per-dataset
heads, ``--option head_average=owners|all`` says whether model averaging takes each head's mean
over the clients holding its dataset (the default, :mod:`securefg.methods.head_owners`) or over
all clients.
"""

from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data
from torch_geometric.utils import degree

from securefg.data.graph_datasets import load_graph_dataset
from securefg.data.node_datasets import load_node_dataset
from securefg.data.partition import (
    DirichletGraphSplit,
    GraphSplit,
    KMeansPartitioner,
    LouvainPartitioner,
    MetisPartitioner,
    MultiDatasetSplit,
    OverlappingMetisPartitioner,
    RandomPartitioner,
    client_graph_sets,
    client_subgraphs,
    concat_with_global_labels,
    global_test_graphs,
    partition_statistics,
)
from securefg.data.splits import with_node_split
from securefg.data.synthetic import make_csbm, make_graph_classification
from securefg.errors import ConfigError
from securefg.experiment import data_seed_of
from securefg.methods.base import method_class
from securefg.methods.label_groups import LabelGroups
from securefg.methods.tasks import GraphTask, NodeTask
from securefg.methods.training import TrainConfig
from securefg.run_config import GRAPH_PARTITIONS, PRESETS, SYNTHETIC_GRAPH, SYNTHETIC_NODE, dataset_names

NODE_PARTITIONS = {
    "metis": (MetisPartitioner, (0.2, 0.4, 0.4), True),
    "metis_overlap": (OverlappingMetisPartitioner, (0.2, 0.4, 0.4), True),
    "louvain": (LouvainPartitioner, (0.6, 0.2, 0.2), False),
    "random": (RandomPartitioner, (0.1, 0.1, 0.8), False),
    "kmeans": (KMeansPartitioner, (0.1, 0.1, 0.8), False),
}
MAX_DEGREE_FEATURE = 64
#: Options that configure the data or the backbone, not a method; :func:`split_options` takes them out.
DATA_OPTIONS = ("features", "alpha", "pooling", "heads", "head_average")
HEAD_MODES = ("dataset", "shared")
#: How model averaging treats per-dataset heads (securefg.methods.head_owners).
HEAD_AVERAGES = ("owners", "all")
FEATURE_MODES = ("original", "degree")


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data and backbone options, method options)``: methods validate only their own."""
    data = {k: v for k, v in options.items() if k in DATA_OPTIONS}
    return data, {k: v for k, v in options.items() if k not in DATA_OPTIONS}


def is_graph_dataset(name: str) -> bool:
    from securefg.data.catalog import get_spec

    key = name.lower()
    if key in SYNTHETIC_GRAPH or key in PRESETS or "+" in name:
        return True
    if key in SYNTHETIC_NODE:
        return False
    return get_spec(name).kind == "graph"


def build_task(cfg: Any) -> tuple[NodeTask | GraphTask, dict[str, Any]]:
    """The task for ``cfg`` plus a description of the data (for result.json)."""
    if is_graph_dataset(cfg.dataset):
        return _graph_task(cfg)
    return _node_task(cfg)


def default_train_config(cfg: Any, task: NodeTask | GraphTask) -> TrainConfig:
    """Per-task defaults: FED-PUB's code for node tasks, GCFL's for graph tasks."""
    if isinstance(task, NodeTask):
        return TrainConfig(lr=0.01, weight_decay=1e-6, local_epochs=1)
    return TrainConfig(lr=1e-3, weight_decay=5e-4, local_epochs=1, batch_size=cfg.batch_size)


# ------------------------------------------------------------------------------ node tasks
def _node_task(cfg: Any) -> tuple[NodeTask, dict[str, Any]]:
    part_name = (cfg.partition or "metis").lower()
    if part_name not in NODE_PARTITIONS:
        raise ConfigError(f"unknown node partition {cfg.partition!r}; choices: {sorted(NODE_PARTITIONS)}")
    pcls, ratios, fedpub_prep = NODE_PARTITIONS[part_name]
    if cfg.dataset.lower() in SYNTHETIC_NODE:
        data = make_csbm(num_nodes=1000, num_classes=4, num_features=32, seed=data_seed_of(cfg))
    else:
        data = load_node_dataset(cfg.dataset, cfg.data_root, largest_cc=fedpub_prep, normalize_features=fedpub_prep)
    ratios = getattr(method_class(cfg.method), "default_node_split", None) or ratios  # e.g. FedSheafHN 40/30/30
    data = with_node_split(data, ratios=tuple(cfg.split) if cfg.split else ratios, seed=data_seed_of(cfg))
    partition = pcls(cfg.clients, seed=data_seed_of(cfg))(data)
    clients = client_subgraphs(data, partition)
    task = NodeTask(clients=clients, num_features=int(data.num_features), num_classes=int(data.y.max()) + 1, full_graph=data,
                    extras={"partition": partition})
    stats = partition_statistics(data, partition)
    info = {
        "partition": part_name,
        "nodes": int(data.num_nodes),
        "edges": int(data.num_edges),
        "split": list(cfg.split or ratios),
        "preprocessing": "largest_cc+normalize_features" if fedpub_prep else "none",
        "partition_stats": stats.to_dict(),
    }
    return task, info


# ----------------------------------------------------------------------------- graph tasks
def _datasets_for(cfg: Any) -> list[str]:
    return dataset_names(cfg.dataset)


def owner_heads(cfg: Any) -> bool:
    """Whether a graph run averages each dataset's head over its owners only (several datasets,
    ``heads=dataset``, ``head_average=owners``, the defaults), so its model aggregate must be a sum."""
    options = cfg.options or {}
    return (len(_datasets_for(cfg)) > 1 and str(options.get("heads", "dataset")) == "dataset"
            and str(options.get("head_average", "owners")) == "owners")


def _load_graphs(name: str, cfg: Any) -> list[Data]:
    if name.lower() in SYNTHETIC_GRAPH:
        return make_graph_classification(num_graphs=150, num_classes=3, seed=data_seed_of(cfg))
    return list(load_graph_dataset(name, cfg.data_root))


def degree_features(graphs: list[Data], cap: int) -> list[Data]:
    """Copies of ``graphs`` whose ``x`` is the one-hot (capped) undirected degree."""
    out = []
    for g in graphs:
        n = int(g.num_nodes)
        deg = degree(g.edge_index[0], n, dtype=torch.long)
        x = torch.nn.functional.one_hot(deg.clamp(max=cap), cap + 1).float()
        out.append(Data(x=x, edge_index=g.edge_index, y=g.y.view(-1)[:1], num_nodes=n))
    return out


def max_degree(graphs: list[Data]) -> int:
    return max((int(degree(g.edge_index[0], int(g.num_nodes)).max()) for g in graphs if g.num_nodes), default=0)


def _graph_task(cfg: Any) -> tuple[GraphTask, dict[str, Any]]:
    part_name = (cfg.partition or "single").lower()
    if part_name not in GRAPH_PARTITIONS:
        raise ConfigError(f"unknown graph partition {cfg.partition!r}; choices: {list(GRAPH_PARTITIONS)}")
    names = _datasets_for(cfg)
    multi = len(names) > 1
    if multi and part_name in ("single", "dirichlet"):
        part_name = "across_domain" if cfg.dataset.lower() == "mix" else "across_dataset"
    if not multi and part_name in ("across_dataset", "across_domain"):
        raise ConfigError(f"partition {part_name!r} needs several datasets, e.g. --dataset ENZYMES+PROTEINS or Protein/Social/Mix")
    options = getattr(cfg, "options", {}) or {}
    loaded = {n: _load_graphs(n, cfg) for n in names}
    widths = {int(gs[0].x.size(1)) if gs and gs[0].x is not None else -1 for gs in loaded.values()}
    feature_mode = str(options.get("features", "original" if len(widths) == 1 and -1 not in widths else "degree"))
    if multi:
        splitter = MultiDatasetSplit({n: cfg.clients for n in names}, seed=data_seed_of(cfg))
        partition = splitter(loaded)
        graphs = concat_with_global_labels(loaded, partition)
        num_classes = int(partition.params["num_global_classes"])
    else:
        graphs = loaded[names[0]]
        if part_name == "dirichlet":
            alpha = float(options.get("alpha", 0.5))
            partition = DirichletGraphSplit(cfg.clients, seed=data_seed_of(cfg), alpha=alpha)(graphs)
        else:
            partition = GraphSplit(cfg.clients, seed=data_seed_of(cfg))(graphs)
        num_classes = int(max(int(g.y.view(-1)[0]) for g in graphs)) + 1
    if feature_mode == "degree":
        cap = min(max_degree(graphs), MAX_DEGREE_FEATURE)
        graphs = degree_features(graphs, cap)
    elif feature_mode == "original":
        if len(widths) != 1 or -1 in widths:
            raise ConfigError(f"features=original needs every dataset to have node features of one width, got "
                              f"{sorted(widths)} for {names}; use --option features=degree")
        graphs = [Data(x=g.x.float(), edge_index=g.edge_index, y=g.y.view(-1)[:1], num_nodes=g.num_nodes) for g in graphs]
    else:
        raise ConfigError(f"unknown features mode {feature_mode!r}; choices: {list(FEATURE_MODES)}")
    heads = str(options.get("heads", "dataset"))
    if heads not in HEAD_MODES:
        raise ConfigError(f"unknown heads mode {heads!r}; choices: {list(HEAD_MODES)}")
    head_average = str(options.get("head_average", "owners"))
    if head_average not in HEAD_AVERAGES:
        raise ConfigError(f"unknown head_average {head_average!r}; choices: {list(HEAD_AVERAGES)}")
    if "head_average" in options and not (multi and heads == "dataset"):
        raise ConfigError("--option head_average applies to per-dataset heads only (several datasets, heads=dataset)")
    groups = (LabelGroups.from_counts(partition.params["num_classes"], partition.params["datasets"], head_average == "owners")
              if multi and heads == "dataset" else None)
    sets = client_graph_sets(graphs, partition)
    task = GraphTask(
        train=[s["train"] for s in sets], val=[s["val"] for s in sets], test=[s["test"] for s in sets],
        global_test=global_test_graphs(graphs, partition), num_features=int(graphs[0].x.size(1)), num_classes=num_classes,
        extras={"partition": partition, "datasets": names, "feature_mode": feature_mode}, label_groups=groups,
    )
    info = {
        "partition": part_name,
        "datasets": names,
        "graphs": len(graphs),
        "features": feature_mode,
        "num_features": task.num_features,
        "num_classes": num_classes,
        "heads": heads if multi else "single",
        **({"head_average": head_average} if groups is not None else {}),
        "client_sizes": [[len(s["train"]), len(s["val"]), len(s["test"])] for s in sets],
        "global_test": len(task.global_test),
    }
    return task, info
