from itertools import combinations

import networkx as nx
import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from torch_geometric.data import Data
from torch_geometric.utils import to_networkx

from securefg.data.partition import MetisPartitioner, OverlappingMetisPartitioner, partition_statistics
from securefg.data.partition.stats import average_clustering, label_heterogeneity


def test_average_clustering_matches_networkx(graph: Data) -> None:
    ours = average_clustering(graph.edge_index, graph.num_nodes)
    ref = nx.average_clustering(to_networkx(graph, to_undirected=True))
    assert ours == pytest.approx(ref, abs=1e-12)


def test_heterogeneity_is_the_median_pairwise_js_distance() -> None:
    counts = np.array([[10, 0, 0], [5, 5, 0], [0, 2, 8], [3, 3, 3]])
    expected = np.median([jensenshannon(a, b) for a, b in combinations(counts, 2)])
    assert label_heterogeneity(counts) == pytest.approx(expected)
    assert label_heterogeneity(np.array([[1, 1], [2, 2]])) == pytest.approx(0.0, abs=1e-7)


def test_node_statistics_add_up(graph: Data) -> None:
    p = MetisPartitioner(4, seed=0)(graph)
    st = partition_statistics(graph, p)
    assert st.columns == ["client", "nodes", "edges", "cut", "classes", "train", "val", "test", "clust"]
    assert sum(st.column("nodes")) == graph.num_nodes
    # disjoint: inside edges + edges leaving a client = all edge columns
    assert sum(st.column("edges")) + sum(st.column("cut")) == graph.edge_index.size(1)
    assert sum(st.column("cut")) == st.summary["cross_edges"]
    assert sum(st.column("train")) == int(graph.train_mask.sum())
    assert st.summary["coverage"] == 1.0 and st.summary["overlap"] == 0.0
    text = st.to_text()
    assert text.splitlines()[0] == "Partition(metis, num_parts=4, num_items=600, disjoint)"
    assert "heterogeneity_js:" in text and len(text.splitlines()) > 6


def test_overlapping_statistics_report_overlap(graph: Data) -> None:
    st = partition_statistics(graph, OverlappingMetisPartitioner(5, seed=0)(graph))
    assert st.summary["overlap"] > 0.5 and "cross_edges" not in st.summary
    assert st.to_dict()["rows"][0][0] == 0


def test_statistics_leave_inputs_unchanged(graph: Data) -> None:
    before = graph.edge_index.clone()
    partition_statistics(graph, MetisPartitioner(3, seed=0)(graph))
    assert torch.equal(graph.edge_index, before)
