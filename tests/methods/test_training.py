"""``securefg.methods.training``: the stopping rule CeFGC's clients train with."""

import torch

from securefg.data.synthetic import make_graph_classification
from securefg.methods.training import state_of, train_graphs_until_stall
from securefg.models.gin import GIN


def _setup():
    graphs = make_graph_classification(num_graphs=24, seed=0)
    torch.manual_seed(0)
    model = GIN(graphs[0].num_features, 3, pooling="sum")
    return graphs, model, torch.optim.Adam(model.parameters(), lr=1e-2)


def test_monitor_stops_after_patience_and_restores_its_best_epoch() -> None:
    graphs, model, opt = _setup()
    values = iter([5.0, 4.0, 3.0, 3.5, 4.5, 6.0, 1.0])  # best at epoch 3, then two without a decrease
    states: list[dict[str, torch.Tensor]] = []

    def monitor(m):
        states.append(state_of(m))
        return next(values)

    epochs = train_graphs_until_stall(model, opt, graphs, max_epochs=50, patience=2, batch_size=8,
                                      device=torch.device("cpu"), monitor=monitor)
    assert epochs == 5 and len(states) == 5
    now = state_of(model)
    assert all(torch.equal(now[k], states[2][k]) for k in now)  # back at epoch 3
    assert not all(torch.equal(now[k], states[4][k]) for k in now)  # not left at the last epoch

