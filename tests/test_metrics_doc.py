"""Every metric a method reports is defined (``metrics_doc``), and the majority baseline is what it says."""

from __future__ import annotations

import pytest
import torch

from securefg.experiment import RunConfig, run_experiment
from securefg.methods.fedavg import majority_baseline
from securefg.methods.method_card import METHOD_CARDS
from securefg.methods.tasks import NodeTask
from securefg.metrics_doc import metrics_doc, scored_model

#: The smallest model settings that still run each method end to end (one round, synthetic data).
TINY = {"cefgc": {"diffusion_epochs": 1, "gnn_epochs": 2, "langevin_steps": 1, "max_nodes": 12},
        "fedsage_plus": {"gen_local_steps": 2, "gen_fed_steps": 1}, "fedsheafhn": {"warmup_epochs": 1},
        "fedstruct": {"node2vec_epochs": 1, "structure_hops": 2}}


def _cases() -> list[tuple[str, str]]:
    return [(name, kind) for name, card in METHOD_CARDS.items() for kind in card.tasks]


@pytest.mark.parametrize(("method", "kind"), _cases())
def test_every_metric_of_every_method_has_a_definition(method: str, kind: str, one_torch_thread: None) -> None:
    options = TINY.get("cefgc" if method.startswith("cefgc") else method, {})
    cfg = RunConfig(method=method, dataset="csbm" if kind == "node" else "synthetic-graphs", clients=3, rounds=2,
                    hidden=8, progress=False, protocol="plaintext", options=dict(options))
    result = run_experiment(cfg)
    doc = result["metrics_doc"]
    assert list(doc) == list(result["metrics"])
    undocumented = [k for k, v in doc.items() if v == "undocumented"]
    assert not undocumented, f"{method} ({kind}): define {undocumented} in securefg/metrics_doc.py"
    headline = "test_auc" if kind == "graph" else "test_acc"
    assert scored_model(method, kind).split(",")[0] in doc[headline]


def test_fedavg_on_a_node_task_names_both_models() -> None:
    doc = metrics_doc("fedavg", "node", {"test_acc": 0.7, "global_model_test_acc": 0.1})
    assert "after that round's local training" in doc["test_acc"]
    assert "as the server broadcast it in best_round" in doc["global_model_test_acc"]
    assert metrics_doc("fedavg", "graph", {"test_auc": 0.9})["test_auc"].startswith(
        "ROC-AUC (one-vs-rest, macro over classes, when more than two) of the server's global model")
    assert metrics_doc("x", "node", {"new_key": 1.0}) == {"new_key": "undocumented"}


def test_the_majority_baseline_predicts_each_clients_most_frequent_training_label() -> None:
    def client(train: list[int], test: list[int]) -> object:
        y = torch.tensor(train + test)
        n = len(y)
        mask = torch.zeros(n, dtype=torch.bool)
        train_mask, test_mask = mask.clone(), mask.clone()
        train_mask[: len(train)], test_mask[len(train):] = True, True
        return type("C", (), {"y": y, "train_mask": train_mask, "test_mask": test_mask})()

    task = NodeTask(clients=[client([0, 0, 1], [0, 1, 1, 0]), client([2, 2], [2, 2, 2, 1])],  # type: ignore[list-item]
                    num_features=1, num_classes=3)
    assert majority_baseline(task) == pytest.approx((0.5 + 0.75) / 2)
