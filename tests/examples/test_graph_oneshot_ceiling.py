"""``examples/graph_oneshot_ceiling.py``: the ideal-generator column draws what CeFGC would receive."""

from collections import Counter

import torch

from securefg.experiment import RunConfig
from securefg.experiment_data import build_task
from securefg.methods.base import MethodConfig
from securefg.methods.training import state_of
from securefg.models.gin import GIN


def _task(clients: int = 3):
    task, _ = build_task(RunConfig(method="cefgc", dataset="synthetic-graphs", clients=clients, seed=0))
    return task


def _label(g) -> int:
    return int(g.y.view(-1)[0])


def test_perfect_synthetic_draws_only_other_clients_graphs_evenly_per_class(load_example) -> None:
    example, task = load_example("graph_oneshot_ceiling"), _task()
    for k in range(task.num_clients):
        drawn = example.perfect_synthetic(task, k, seed=0)
        assert len(drawn) == len(task.train[k])  # CeFGC's default ratio: one synthetic graph per local graph
        own = {id(g) for g in task.train[k]}
        owner = {id(g): j for j in range(task.num_clients) for g in task.train[j]}
        assert all(id(g) not in own and id(g) in owner for g in drawn)
        units = Counter((owner[id(g)], _label(g)) for g in drawn)
        expected = {(j, _label(g)) for j in range(task.num_clients) if j != k for g in task.train[j]}
        assert set(units) == expected  # every received (client, class) unit contributes
        assert max(units.values()) - min(units.values()) <= 1
        again = example.perfect_synthetic(task, k, seed=0)
        assert [id(g) for g in again] == [id(g) for g in drawn]  # seeded: the same draws


def test_one_shot_average_is_the_plain_mean_with_one_dataset(load_example) -> None:
    example, task = load_example("graph_oneshot_ceiling"), _task(clients=2)
    torch.manual_seed(0)
    w0 = GIN(task.num_features, task.num_classes, pooling=MethodConfig.graph_pooling)
    states = [{n: t + shift for n, t in state_of(w0).items()} for shift in (1.0, 3.0)]
    average = state_of(example.one_shot_average(states, w0, task, list(task.train)))
    for n, t in state_of(w0).items():
        assert torch.allclose(average[n], t + 2.0)


def test_val_loss_stop_keeps_the_epoch_with_the_lowest_validation_loss(load_example, monkeypatch) -> None:
    example, task = load_example("graph_oneshot_ceiling"), _task()
    seen: list[float] = []
    measure = example.validation_loss

    def recording(model, graphs, task):
        seen.append(measure(model, graphs, task))
        return seen[-1]

    monkeypatch.setattr(example, "validation_loss", recording)
    torch.manual_seed(0)
    model = GIN(task.num_features, task.num_classes, pooling=MethodConfig.graph_pooling)
    cfg = RunConfig(method="cefgc", dataset="synthetic-graphs", clients=3, seed=0)
    example.fit(model, task.train[0], cfg, task, seed=0, val=task.val[0])
    best = min(range(len(seen)), key=seen.__getitem__)
    assert len(seen) == min(best + 1 + 30, 500)  # stopped 30 epochs after the best one
    assert measure(model, task.val[0], task) == seen[best]  # and restored it


def test_cefgc_synthetic_column_trains_central_on_real_plus_every_clients_synthetic_graphs(
        load_example, monkeypatch, tmp_path) -> None:
    example = load_example("graph_oneshot_ceiling")
    fits: list[int] = []
    runs: list[tuple[float, list]] = []
    real_fit, real_run = example.fit, example.cefgc_run

    def counting(model, graphs, *args, **kwargs):
        fits.append(len(graphs))
        return real_fit(model, graphs, *args, **kwargs)

    def short_run(cfg, pooling, cache):  # the real CeFGC run, with generators trained for 2 epochs
        cfg = RunConfig(**{**vars(cfg), "options": {**cfg.options, "diffusion_epochs": 2}})
        runs.append(real_run(cfg, pooling, cache))
        return runs[-1]

    monkeypatch.setattr(example, "fit", counting)
    monkeypatch.setattr(example, "cefgc_run", short_run)
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "data"))
    cache = tmp_path / "generators"
    row = example.one_seed("synthetic-graphs", 3, 0, None, cefgc_synthetic=str(cache))

    task = _task()
    n_real = sum(len(t) for t in task.train)
    (auc, synthetic), = runs
    assert row["cefgc"] == auc and 0.0 <= auc <= 1.0
    assert len(synthetic) == n_real  # ratio 1: one synthetic graph per local graph, over all clients
    assert all(g.x.size(1) == task.num_features and g.y.numel() == 1 for g in synthetic)
    assert fits[-1] == 2 * n_real  # the central+syn fit: all real plus all synthetic graphs
    assert set(row) == {"central", "one-shot", "local", "cefgc", "central+syn"}
    assert any(cache.iterdir())  # generators cached for the next seed or run


def test_redrawn_features_keep_the_drawn_structures(load_example, monkeypatch) -> None:
    example, task = load_example("graph_oneshot_ceiling"), _task()
    fits: list[bool] = []  # the ``edges`` flag of every table the redraw fits
    fit = example.NodeFeatureTable.fit.__func__
    monkeypatch.setattr(example.NodeFeatureTable, "fit",
                        classmethod(lambda cls, *a, **kw: fits.append(kw["edges"]) or fit(cls, *a, **kw)))
    real = example.perfect_synthetic(task, 0, seed=0)
    assert fits == []  # real features: nothing redrawn
    units = len({(j, _label(g)) for j in range(1, task.num_clients) for g in task.train[j]})  # client 0's senders' classes
    for features in ("degree", "pairwise"):
        fits.clear()
        redrawn = example.perfect_synthetic(task, 0, seed=0, features=features)
        assert fits == [features == "pairwise"] * units  # one sender-class table per unit, pairs only for pairwise
        assert [torch.equal(a.edge_index, b.edge_index) and int(a.y) == int(b.y) for a, b in zip(real, redrawn, strict=True)] \
            == [True] * len(real)
        # one-hot degree features: the sender's table maps every degree to its own column, so the redraw is exact
        assert all(torch.equal(g.x, r.x) for g, r in zip(redrawn, real, strict=True))
