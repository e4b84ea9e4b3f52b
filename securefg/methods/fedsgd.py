"""FedSGD: one full-batch gradient per client per round, a server-side optimiser.

FedStruct's "FL GNN" baseline (notes B2/B6: rounds are FedSGD steps, the GNN is GraphSage with
3 layers on Cora). Each client computes the gradient of its mean training loss on the received
model over its own subgraph and sends it through the protected ``aggregate`` weighted by its
labelled-node count, so the server's weighted mean is the gradient of the pooled training loss;
the server applies Adam to it. This equals full-batch training on the union of the client
subgraphs (no cross-client edges), which is why the baseline sits below a central GNN.

It reuses FedAvg's tags (``fedavg/update`` then carries a gradient, not a weight delta), so
every FedAvg stack applies unchanged. Clients score the *received* model (there is no local
step), on their own validation and test nodes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from securefg.errors import ConfigError
from securefg.federation.party import Party
from securefg.methods.base import MethodConfig, Task, register_method
from securefg.methods.fedavg import FedAvg
from securefg.methods.training import TrainConfig, evaluate_node, load_state

BACKBONES = ("sage", "gcn")


@register_method
class FedSGD(FedAvg):
    """FedSGD on node classification with a GraphSage (default) or FED-PUB GCN backbone.

    Options:
        backbone (str): ``"sage"`` (PyG GraphSAGE) or ``"gcn"`` (the baselines' 2-layer GCN).
            (default: ``"sage"``)
        layers (int): GraphSAGE message-passing layers (FedStruct, Cora: 3). (default: ``3``)
        dropout (float): GraphSAGE dropout between layers. (default: ``0.5``)
    """

    name = "fedsgd"
    default_stack = "fedavg_secure_sum"  # FedStruct's FL GNN baseline: the papers' plain FedSGD, summed by SecAgg+
    tasks = frozenset({"node"})
    option_defaults: ClassVar[dict[str, Any]] = {"weighting": "size", "backbone": "sage", "layers": 3, "dropout": 0.5}

    clients_take_steps = False  # the server takes the one Adam step per round

    @staticmethod
    def train_defaults(task: Task) -> TrainConfig:
        """Server Adam, lr 0.01, weight decay 5e-4 (the FL GNN reference trainer's choices)."""
        return TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=1)

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        if self.options["backbone"] not in BACKBONES:
            raise ConfigError(f"backbone must be one of {BACKBONES}, got {self.options['backbone']!r}")
        if int(self.options["layers"]) < 1 or not 0.0 <= float(self.options["dropout"]) < 1.0:
            raise ConfigError(f"need layers >= 1 and 0 <= dropout < 1, got {self.options['layers']}, {self.options['dropout']}")

    def make_model(self) -> nn.Module:
        if self.options["backbone"] == "gcn":
            return super().make_model()
        from torch_geometric.nn.models import GraphSAGE

        torch.manual_seed(self.config.seed)
        model = GraphSAGE(self.task.num_features, self.config.hidden or 64, int(self.options["layers"]),
                          self.task.num_classes, dropout=float(self.options["dropout"]))
        return model.to(self.config.device)

    def setup_server(self, party: Party) -> None:
        super().setup_server(party)
        party.state["optimizer"] = self.optimizer_for(party.state["model"])

    def aggregate_train(self, server: Party, mean_gradient: dict[str, torch.Tensor]) -> None:
        """One server Adam step along the (weighted) mean client gradient."""
        model, opt = server.state["model"], server.state["optimizer"]
        opt.zero_grad()
        for name, p in model.named_parameters():
            p.grad = mean_gradient[name].to(p.device, p.dtype)
        opt.step()

    def handle_train(self, client: Party, global_state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], float]:
        """Score the received model, then return the gradient of the mean training loss."""
        model, data = client.state["model"], client.state["data"]
        load_state(model, global_state)
        client.state["scores"] = evaluate_node(model, data)
        model.train()
        model.zero_grad()
        F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask]).backward()
        grads = {n: p.grad.detach().to("cpu", torch.float64) for n, p in model.named_parameters()}
        n = int(data.train_mask.sum())
        weight = 1.0 if self.options["weighting"] == "uniform" else float(n)
        return grads, weight
