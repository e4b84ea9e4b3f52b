"""Partitioners: split a graph's nodes, or a dataset's graphs, over federated clients.

Every partitioner is a seeded callable returning a :class:`Partition`; see
:class:`~securefg.data.partition.base.Partitioner` for caching.
"""

from securefg.data.partition.base import Partitioner
from securefg.data.partition.dirichlet import DirichletGraphSplit, dirichlet_label_split
from securefg.data.partition.graph_split import GraphSplit, graph_labels
from securefg.data.partition.kmeans import KMeansPartitioner
from securefg.data.partition.louvain import LouvainPartitioner
from securefg.data.partition.metis import MetisPartitioner, metis_membership
from securefg.data.partition.multi_dataset import MultiDatasetSplit, concat_with_global_labels
from securefg.data.partition.overlapping import OverlappingMetisPartitioner
from securefg.data.partition.partition import Partition
from securefg.data.partition.random_nodes import RandomPartitioner
from securefg.data.partition.stats import (
    PartitionStats,
    graph_partition_statistics,
    label_heterogeneity,
    partition_statistics,
)
from securefg.data.partition.subgraphs import (
    ExternalEdges,
    client_graph_sets,
    client_subgraphs,
    external_edges,
    global_test_graphs,
)

__all__ = [
    "DirichletGraphSplit",
    "ExternalEdges",
    "GraphSplit",
    "KMeansPartitioner",
    "LouvainPartitioner",
    "MetisPartitioner",
    "MultiDatasetSplit",
    "OverlappingMetisPartitioner",
    "Partition",
    "PartitionStats",
    "Partitioner",
    "RandomPartitioner",
    "client_graph_sets",
    "client_subgraphs",
    "concat_with_global_labels",
    "dirichlet_label_split",
    "external_edges",
    "global_test_graphs",
    "graph_labels",
    "graph_partition_statistics",
    "label_heterogeneity",
    "metis_membership",
    "partition_statistics",
]
