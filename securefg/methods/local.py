"""Local training only: every client trains alone on its own data; nothing is exchanged."""

from __future__ import annotations

from typing import Any

from securefg.federation.federation import Federation
from securefg.methods.base import Method, register_method
from securefg.methods.fedavg import measure_clients, summarize_task
from securefg.methods.tasks import NodeTask
from securefg.methods.training import evaluate_node, train_graph_epochs, train_node_epochs


@register_method
class Local(Method):
    """Local baseline: the same backbone and optimiser, ``rounds x local_epochs`` local steps."""

    name = "local"
    TAGS = {}

    def setup(self, fed: Federation) -> None:
        for k, client in enumerate(fed.clients):
            if isinstance(self.task, NodeTask):
                client.state["data"] = self.task.clients[k].to(self.config.device)
            else:
                client.state["data"] = {"train": self.task.train[k], "val": self.task.val[k], "test": self.task.test[k]}
            client.state["model"] = self.make_model()
            client.state["optimizer"] = self.optimizer_for(client.state["model"])

    def run_round(self, fed: Federation, r: int) -> dict[str, float]:
        t = self.config.train
        for client in fed.clients:
            model, opt, data = client.state["model"], client.state["optimizer"], client.state["data"]
            if isinstance(self.task, NodeTask):
                train_node_epochs(model, opt, data, t.local_epochs)
                client.state["scores"] = evaluate_node(model, data)
            else:
                train_graph_epochs(model, opt, data["train"], epochs=t.local_epochs, batch_size=t.batch_size,
                                   device=self.config.device, generator=self.generator, groups=self.task.label_groups)
                val, test = self.score_graphs(model, data["val"]), self.score_graphs(model, data["test"])
                glob = self.score_graphs(model, self.task.global_test)
                client.state["scores"] = {"val_acc": val["acc"], "val_auc": val["auc"], "test_acc": test["acc"],
                                          "test_auc": test["auc"], "global_test_auc": glob["auc"], "global_test_acc": glob["acc"]}
        return {}

    def measure(self, fed: Federation) -> dict[str, Any]:
        out = measure_clients(self, fed)
        if not isinstance(self.task, NodeTask):
            scores = out["per_client"].values()
            aucs = [s["global_test_auc"] for s in scores if s.get("global_test_auc") == s.get("global_test_auc")]
            accs = [s["global_test_acc"] for s in scores]
            out["global_test_auc"] = sum(aucs) / len(aucs) if aucs else float("nan")
            out["global_test_acc"] = sum(accs) / len(accs)
        return out

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        return summarize_task(self.task, history)
