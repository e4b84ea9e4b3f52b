import itertools

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.models.graph_score import GraphDiffusionModel, dsm_loss, to_dense_batch_adjacency
from securefg.models.graph_score.masks import pair_mask, symmetric_noise
from tests.models.graph_score.conftest import cycle


def test_symmetric_noise_is_symmetric_masked_and_unit_variance() -> None:
    flags = torch.ones(64, 12)
    flags[:, 9:] = 0
    z = symmetric_noise(flags, generator=torch.Generator().manual_seed(0))
    assert torch.equal(z, z.transpose(1, 2))
    assert torch.equal(z * (1 - pair_mask(flags)), torch.zeros_like(z))
    upper = z[:, :9, :9].triu(diagonal=1)[pair_mask(flags)[:, :9, :9].triu(diagonal=1).bool()]
    assert upper.numel() == 64 * 36
    assert abs(float(upper.mean())) < 0.05 and abs(float(upper.std()) - 1.0) < 0.05


def test_dsm_loss_of_the_exact_score_is_zero() -> None:
    # s(A~) = -(A~ - A)/sigma^2 is the optimum; the loss must vanish there, for every level.
    clean = torch.zeros(3, 5, 5)
    flags = torch.ones(3, 5)
    sigmas = torch.tensor([0.1, 0.5, 2.0])

    def oracle(noisy: torch.Tensor, _flags: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return -(noisy - clean) / sigmas[cond].view(-1, 1, 1) ** 2

    loss = dsm_loss(
        oracle,
        clean,
        flags,
        sigmas=sigmas,
        levels=torch.tensor([0, 1, 2]),
        classes=None,
        generator=torch.Generator().manual_seed(0),
    )
    assert float(loss) < 1e-10


def test_dsm_loss_of_a_zero_score_is_half_the_noise_energy() -> None:
    # With s = 0 the per-graph loss is 0.5 * ||Z||^2: n(n-1) unit entries -> mean 0.5 * n(n-1).
    flags = torch.ones(2000, 4)
    loss = dsm_loss(
        lambda a, f, c: torch.zeros_like(a),
        torch.zeros(2000, 4, 4),
        flags,
        sigmas=torch.tensor([0.3]),
        levels=torch.zeros(2000, dtype=torch.long),
        classes=None,
        generator=torch.Generator().manual_seed(1),
    )
    assert abs(float(loss) - 6.0) < 0.25


def _held_loss(model: GraphDiffusionModel, graphs, labels) -> float:
    """DSM loss at every level with fixed noise, so two evaluations differ only by the weights."""
    batch = to_dense_batch_adjacency(graphs, max_node_num=model.max_node_num)
    sigmas = torch.tensor(model.sigmas)
    classes = torch.tensor(labels)
    with torch.no_grad():
        return sum(
            float(
                dsm_loss(
                    model.score_net,
                    batch.adj,
                    batch.flags,
                    sigmas=sigmas,
                    levels=torch.full((len(graphs),), level),
                    classes=classes,
                    generator=torch.Generator().manual_seed(level),
                )
            )
            for level in range(len(model.sigmas))
        )


def test_training_lowers_the_loss_on_cycles_and_bipartite_graphs(cycles, bipartites) -> None:
    model = GraphDiffusionModel(num_classes=2, max_node_num=10, init_seed=0)
    graphs, labels = cycles + bipartites, [0] * len(cycles) + [1] * len(bipartites)
    before = _held_loss(model, graphs, labels)
    result = model.fit(graphs, labels, epochs=60, batch_size=12, lr=1e-2, generator=0)
    after = _held_loss(model, graphs, labels)
    assert len(result.losses) == 60 and result.num_graphs == 12 and result.num_excluded == 0
    assert after < 0.65 * before, (before, after)  # measured: 104.6 -> 55.8


def test_fit_reports_graphs_above_the_cap_and_sets_the_histogram() -> None:
    model = GraphDiffusionModel(max_node_num=8, init_seed=0)
    result = model.fit([cycle(5), cycle(6), cycle(6), cycle(11)], epochs=1, generator=0)
    assert result.num_graphs == 3 and result.num_excluded == 1
    assert model.node_count_hist.tolist() == [[0, 0, 0, 0, 0, 1, 2, 0, 0]]


def test_fit_stops_early_when_the_loss_stalls() -> None:
    model = GraphDiffusionModel(max_node_num=8, init_seed=0)
    seen = []
    result = model.fit(
        [cycle(5)],
        epochs=50,
        generator=0,
        patience=1,
        min_delta=1e9,
        progress=lambda epoch, loss: seen.append(epoch),
    )
    assert result.stopped_early and len(result.losses) == 2 and seen == [0, 1]


def test_fit_rejects_labels_for_an_unconditional_model() -> None:
    with pytest.raises(InvalidInputError, match="this model is unconditional"):
        GraphDiffusionModel(max_node_num=8, init_seed=0).fit([cycle(5)], [0], epochs=1)


def test_fit_rejects_labels_out_of_range() -> None:
    with pytest.raises(InvalidInputError, match=r"labels must lie in \[0, 2\)"):
        GraphDiffusionModel(num_classes=2, max_node_num=8, init_seed=0).fit([cycle(5)], [2], epochs=1)


def test_size_bucketed_batches_cover_every_graph_once_with_similar_sizes() -> None:
    from securefg.models.graph_score.training import size_bucketed_batches

    sizes = torch.randint(5, 80, (103,), generator=torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(0)
    batches = size_bucketed_batches(sizes, 16, gen)
    assert sorted(torch.cat(batches).tolist()) == list(range(103))
    assert [b.numel() for b in batches].count(16) == 6
    # Batches are contiguous in size order: no two batches' size ranges overlap strictly.
    spans = sorted((int(sizes[b].min()), int(sizes[b].max())) for b in batches)
    assert all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(spans))
    # ... and come in random order, different across epochs.
    again = size_bucketed_batches(sizes, 16, gen)
    assert [b.tolist() for b in again] != [b.tolist() for b in batches]
