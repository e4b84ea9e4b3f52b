"""CeFGC's receiver-side screen: units whose graphs look like another own class are dropped."""

from __future__ import annotations

import math

import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from securefg.methods.cefgc.generator_screen import graph_statistics, screen_units

CAP = 8


def _with_degree_features(edge_index: torch.Tensor, n: int, label: int) -> Data:
    deg = torch.bincount(edge_index[0], minlength=n).clamp(max=CAP)
    return Data(x=torch.nn.functional.one_hot(deg, CAP + 1).float(), edge_index=edge_index, y=torch.tensor([label]),
                num_nodes=n)


def path(n: int, label: int) -> Data:
    src = torch.arange(n - 1)
    return _with_degree_features(to_undirected(torch.stack([src, src + 1])), n, label)


def dense(n: int, label: int, seed: int) -> Data:
    g = torch.Generator().manual_seed(seed)
    a = torch.triu((torch.rand(n, n, generator=g) < 0.6).long(), 1)
    return _with_degree_features(to_undirected(a.nonzero().t()), n, label)


OWN = [path(n, 0) for n in range(6, 14)] + [dense(n, 1, n) for n in range(6, 14)]


def test_graph_statistics_separate_trees_from_dense_graphs() -> None:
    p, d = graph_statistics(path(10, 0)), graph_statistics(dense(10, 1, 0))
    assert p.shape == d.shape == (4 + CAP + 1,)
    assert p[1] < 2 < d[1]  # mean degree
    assert abs(float(p[0]) - math.log(10)) < 1e-12


def test_honest_units_are_kept_and_a_relabelled_unit_is_dropped() -> None:
    honest_trees = [path(n, 0) for n in (7, 9, 11)]
    honest_dense = [dense(n, 1, 100 + n) for n in (7, 9, 11)]
    spoofed = [path(n, 1) for n in (8, 10, 12)]  # trees declared as the dense class
    synthetic = honest_trees + honest_dense + spoofed
    records = [{"class": 0, "graphs": 3}, {"class": 1, "graphs": 3}, {"class": 1, "graphs": 3}]
    kept, verdicts = screen_units(OWN, synthetic, records)
    assert [v.kept for v in verdicts] == [True, True, False]
    assert verdicts[2].nearest_class == 0 and verdicts[2].declared_distance > verdicts[2].nearest_distance
    assert kept == honest_trees + honest_dense


def test_a_unit_of_a_class_the_receiver_lacks_is_kept_and_empty_units_are_skipped() -> None:
    unknown = [dense(9, 2, 5)]
    kept, verdicts = screen_units(OWN, unknown, [{"class": 0, "graphs": 0}, {"class": 2, "graphs": 1}])
    assert kept == unknown and len(verdicts) == 1 and verdicts[0].kept
