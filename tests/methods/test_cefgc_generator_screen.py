"""CeFGC's receiver-side screen: units whose graphs do not fit their declared class are dropped."""

from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from securefg.methods.cefgc.generator_screen import graph_statistics, keep_units, screen_units

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


def random_graph(n: int, p: float, label: int, seed: int) -> Data:
    g = torch.Generator().manual_seed(seed)
    a = torch.triu((torch.rand(n, n, generator=g) < p).long(), 1)
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
    kept, verdicts = screen_units(OWN, synthetic, records, rule="nearest")
    assert [v.kept for v in verdicts] == [True, True, False]
    assert verdicts[2].nearest_class == 0 and verdicts[2].declared_distance > verdicts[2].nearest_distance
    assert kept == honest_trees + honest_dense


def test_a_unit_of_a_class_the_receiver_lacks_is_kept_and_empty_units_are_skipped() -> None:
    unknown = [dense(9, 2, 5)]
    kept, verdicts = screen_units(OWN, unknown, [{"class": 0, "graphs": 0}, {"class": 2, "graphs": 1}])
    assert kept == unknown and len(verdicts) == 1 and verdicts[0].kept


def test_alignment_drops_a_sender_whose_labels_are_swapped_and_keeps_the_honest_one() -> None:
    honest = [path(n, 0) for n in (7, 9, 11)] + [dense(n, 1, 100 + n) for n in (7, 9, 11)]
    spoofed = [dense(n, 0, 300 + n) for n in (7, 9, 11)] + [path(n, 1) for n in (8, 10, 12)]  # classes swapped
    records = [{"class": 0, "graphs": 3}, {"class": 1, "graphs": 3}] * 2
    kept, verdicts = screen_units(OWN, honest + spoofed, records, senders=[0, 0, 1, 1])
    assert [(v.sender, v.kept) for v in verdicts] == [(0, True), (0, True), (1, False), (1, False)]
    assert [v.nearest_class for v in verdicts[2:]] == [1, 0]  # the relabelling that fits: the true classes
    assert verdicts[2].excess > 0.9 and verdicts[0].excess == 0.0  # a clean swap gains what an ideal one would
    assert kept == honest and [v.unit for v in verdicts] == [0, 1, 2, 3]


def test_alignment_keeps_an_honest_sender_whose_classes_share_an_offset_that_fools_the_nearest_rule() -> None:
    """Both classes denser than the receiver's: class 0 then sits nearer its class 1, yet the
    declared labels still fit better than the swap, as synthetic graphs do on real data."""
    honest = [random_graph(n, 0.5, 0, n) for n in (7, 9, 11)] + [random_graph(n, 1.0, 1, 50 + n) for n in (7, 9, 11)]
    records = [{"class": 0, "graphs": 3}, {"class": 1, "graphs": 3}]
    _, nearest = screen_units(OWN, honest, records, rule="nearest")
    kept, aligned = screen_units(OWN, honest, records, senders=[0, 0])
    assert [v.kept for v in nearest] == [False, True]
    assert [v.kept for v in aligned] == [True, True] and kept == honest


def test_alignment_cannot_judge_a_sender_with_one_held_class_and_its_tolerance_bounds_the_drop() -> None:
    spoofed = [path(n, 1) for n in (8, 10, 12)]  # one unit: no relabelling among its own classes
    kept, verdicts = screen_units(OWN, spoofed, [{"class": 1, "graphs": 3}], senders=[5])
    assert kept == spoofed and verdicts[0].kept and verdicts[0].sender == 5
    swapped = [dense(n, 0, 300 + n) for n in (7, 9, 11)] + [path(n, 1) for n in (8, 10, 12)]
    records = [{"class": 0, "graphs": 3}, {"class": 1, "graphs": 3}]
    kept, verdicts = screen_units(OWN, swapped, records, tolerance=1.5)  # more than a clean swap gains
    assert kept == swapped and all(v.kept for v in verdicts) and verdicts[0].excess > 0.9


def test_verdicts_judged_on_other_draws_filter_the_training_draws_by_unit() -> None:
    judged = [path(n, 0) for n in (7, 9)] + [dense(n, 0, n) for n in (7, 9)] + [dense(n, 1, 9 + n) for n in (7, 9)]
    records = [{"class": 0, "graphs": 2}, {"class": 0, "graphs": 2}, {"class": 1, "graphs": 2}]
    _, verdicts = screen_units(OWN, judged, records, rule="nearest")
    assert [v.kept for v in verdicts] == [True, False, True]
    training = [path(12, 0), dense(12, 0, 1), dense(11, 1, 2), dense(13, 1, 3)]
    train_records = [{"class": 0, "graphs": 1}, {"class": 0, "graphs": 1}, {"class": 1, "graphs": 2}]
    assert keep_units(training, train_records, verdicts) == [training[0], training[2], training[3]]


def test_bad_screen_inputs_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown screen rule"):
        screen_units(OWN, [], [], rule="vote")
    with pytest.raises(ValueError, match="senders"):
        screen_units(OWN, [path(7, 0)], [{"class": 0, "graphs": 1}], senders=[0, 1])
    with pytest.raises(ValueError, match="count 2 graphs, but 1"):
        screen_units(OWN, [path(7, 0)], [{"class": 0, "graphs": 2}])
