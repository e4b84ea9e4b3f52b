"""A plain Flower app (ServerApp + ClientApp, a small PyG GCN) protected by securefg in a few lines.

``python examples/flower_fedavg_secure.py [--clients 4] [--rounds 5]``

The ClientApp is ordinary Flower code: ``@app.train()`` trains a GCN on the client's partition
and returns ``ArrayRecord`` + ``MetricRecord({"num-examples": ...})``. The securefg lines are:

* client: ``ClientApp(mods=[securefg_mod])`` and ``enable_securefg(app)``;
* server: ``SecureFedAvgWorkflow()``, ``wf.setup(grid)`` and ``wf.train_round(...)`` instead of a
  strategy's train/aggregate step.

The server then never receives an individual model: only the SecAgg+ sum over the clients that
survived the round (stack ``protocols/fedavg_secure_sum.toml``). It runs one OS process per
client over Flower's gRPC transport (``securefg.integrations.flower.local.run_local``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.grid import Grid
from torch import nn
from torch_geometric.nn import GCNConv

from securefg.data.synthetic import make_csbm
from securefg.integrations.flower.local import run_local
from securefg.integrations.flower.mods import enable_securefg, securefg_mod
from securefg.integrations.flower.workflow import SecureFedAvgWorkflow

FEATURES, CLASSES = 16, 3


class Net(nn.Module):
    """Two-layer GCN (PyG ``GCNConv``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = GCNConv(FEATURES, 32), GCNConv(32, CLASSES)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


def graph(seed: int):  # type: ignore[no-untyped-def]
    return make_csbm(num_nodes=600, num_classes=CLASSES, num_features=FEATURES, seed=seed)


# --------------------------------------------------------------------------- ClientApp
app = ClientApp(mods=[securefg_mod])  # securefg line 1
enable_securefg(app)                  # securefg line 2


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Ordinary Flower training: local epochs on this node's partition of the graph."""
    k, n = int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    g = graph(seed=0)
    own = g.subgraph(torch.arange(g.num_nodes) % n == k)
    torch.manual_seed(k)
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(model(own.x, own.edge_index)[own.train_mask], own.y[own.train_mask])
        loss.backward()
        opt.step()
    n_train = int(own.train_mask.sum())
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"num-examples": n_train, "train-loss": loss.item()})})
    return Message(content=content, reply_to=msg)


# --------------------------------------------------------------------------- ServerApp main
def main(grid: Grid, context: Context) -> dict[str, float]:
    """FedAvg rounds whose aggregation is securefg's secure sum; returns the final test accuracy."""
    rounds = int(context.run_config.get("rounds", 5))
    torch.manual_seed(0)
    model = Net()
    arrays = ArrayRecord(model.state_dict())
    wf = SecureFedAvgWorkflow()  # securefg line 3
    wf.setup(grid)               # securefg line 4
    test = graph(seed=1)         # a public held-out graph the server may score on
    acc = 0.0
    for r in range(rounds):
        arrays, n = wf.train_round(grid, arrays, round=r)  # securefg line 5 (was: strategy aggregate)
        model.load_state_dict(arrays.to_torch_state_dict())
        with torch.no_grad():
            pred = model(test.x, test.edge_index).argmax(-1)
        acc = float((pred[test.test_mask] == test.y[test.test_mask]).float().mean())
        print(f"round {r}: {n} clients in the secure sum, global test accuracy {acc:.3f}", flush=True)
    return {"test_acc": acc, "dropped": float(len(wf.rt.dropped)) if wf.rt else 0.0}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    out = run_local(main, f"{Path(__file__).resolve()}:app", num_clients=a.clients, run_config={"rounds": a.rounds})
    print(f"test_acc={out['test_acc']:.4f}")
