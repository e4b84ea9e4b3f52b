"""Centralized reference: one model trained on everyone's data pooled in one place.

Not a federated method (it deliberately breaks the privacy boundary): it bounds what any
federated method can reach on the same splits. Nothing is exchanged; the pooled data lives in
the server's state only because this baseline pretends there is one data owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch_geometric.data import Data

from securefg.errors import ConfigError
from securefg.federation.party import Party, client_id
from securefg.federation.program.context import ServerContext
from securefg.methods.backbone_option import (
    BACKBONE_OPTIONS,
    check_backbone_options,
    node_backbone,
    train_node_backbone,
)
from securefg.methods.base import Method, MethodConfig, Task, register_method
from securefg.methods.fedavg import summarize_task
from securefg.methods.tasks import NodeTask
from securefg.methods.training import (
    evaluate_node,
    party_rng,
    train_graph_epochs,
    with_sparse_adjacency,
)


@register_method
class Centralized(Method):
    """Train on the union of the clients' training data (node: on the full graph).

    Options:
        backbone (str): ``"gcn"`` or ``"sage"`` (FedSage's GlobSage) for node tasks. (default: ``"gcn"``)
        layers (int): GraphSage layers. (default: ``2``)
        dropout (float): GraphSage dropout. (default: ``0.5``)
        fanouts, batch_nodes: GraphSage's sampled mini-batch training
            (:data:`securefg.methods.backbone_option.SAMPLING_OPTION_HELP`; default: full batch).
    """

    name = "centralized"
    TAGS = {}
    option_defaults = BACKBONE_OPTIONS

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        check_backbone_options(self.name, self.options, node_task=isinstance(task, NodeTask))

    def make_model(self) -> nn.Module:
        """The chosen backbone on node tasks, GIN on graph tasks."""
        if not isinstance(self.task, NodeTask):
            return super().make_model()
        return node_backbone(self.options, in_channels=self.task.num_features, classes=self.task.num_classes,
                             hidden=self.config.hidden, seed=self.config.seed).to(self.config.device)

    #: One data owner by construction: it runs in process only (the launcher of a multi-process
    #: backend refuses it), since no party of a federation may hold everyone's data.
    distributable = False

    def setup_server(self, party: Party) -> None:
        s = party.state
        if isinstance(self.task, NodeTask):
            g = self.task.full_graph
            if g is None:
                raise ConfigError("the centralized baseline needs the full graph (NodeTask.full_graph)")
            s["data"] = with_sparse_adjacency(g).to(self.config.device)
        else:
            s["data"] = {
                "train": [d for part in self.task.train for d in part],
                "val": [d for part in self.task.val for d in part],
            }
        s["model"] = self.make_model()
        s["optimizer"] = self.optimizer_for(s["model"])

    def setup_client(self, party: Party, index: int) -> None:
        """Clients hold nothing here: their data is pooled at the one owner."""

    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        s, t = srv.state, self.config.train
        if isinstance(self.task, NodeTask):
            # The one data holder draws client 0's per-round stream (party_rng), so one-client
            # full-batch FedAvg stays exactly centralized training.
            with party_rng(self.config.seed, client_id(0), r):
                train_node_backbone(self.options, s["model"], s["optimizer"], s["data"], t.local_epochs,
                                    generator=self.generator)
        else:
            train_graph_epochs(s["model"], s["optimizer"], s["data"]["train"], epochs=t.local_epochs,
                               batch_size=t.batch_size, device=self.config.device, generator=self.generator,
                               groups=self.task.label_groups)
        return {}

    def measure_server(self, party: Party) -> dict[str, Any]:
        s = party.state
        if isinstance(self.task, NodeTask):
            sc = evaluate_node(s["model"], s["data"])
            return {"mean_val": sc["val_acc"], "mean_test": sc["test_acc"]}
        val, glob = self.score_graphs(s["model"], s["data"]["val"]), self.score_graphs(s["model"], self.task.global_test)
        return {"mean_val": val["auc"], "mean_test": glob["auc"], "global_test_auc": glob["auc"],
                "global_test_acc": glob["acc"]}

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        return {**server, "per_client": {}}

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        return summarize_task(self.task, history)


def union_graph(clients: list[Data]) -> Data:
    """Disjoint union of client subgraphs (no cross-client edges), e.g. for tests."""
    masks: dict[str, list[torch.Tensor]] = {"train_mask": [], "val_mask": [], "test_mask": []}
    xs, ys, eis, off = [], [], [], 0
    for d in clients:
        xs.append(d.x)
        ys.append(d.y)
        eis.append(d.edge_index + off)
        for m in masks:
            masks[m].append(getattr(d, m))
        off += d.num_nodes
    return Data(x=torch.cat(xs), y=torch.cat(ys), edge_index=torch.cat(eis, 1), **{m: torch.cat(v) for m, v in masks.items()})
