"""Poisoning audits refuse to score a clean model that predicts one class (a constant predictor).

FedAvg on Cora METIS sits on such a plateau from round ~10 to ~55: an "accuracy drop" there
only says which constant class the attacked run ended on (a 0.132 'regression' was that).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch_geometric.data import Data

from securefg.attacks.poisoning import CONSTANT_SHARE, constant_share


class Fixed(torch.nn.Module):
    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.logits


def truth(n: int = 10) -> SimpleNamespace:
    data = Data(x=torch.zeros(n, 2), edge_index=torch.zeros(2, 0, dtype=torch.long), y=torch.zeros(n, dtype=torch.long),
                test_mask=torch.ones(n, dtype=torch.bool), num_nodes=n)
    return SimpleNamespace(task=SimpleNamespace(kind="node", clients=[data]), index=lambda cid: 0)


def test_a_model_giving_one_class_everywhere_is_a_constant_predictor() -> None:
    logits = torch.zeros(10, 3)
    logits[:, 1] = 1.0
    assert constant_share(Fixed(logits), truth(), ("client/1",)) == 1.0 >= CONSTANT_SHARE


def test_a_model_that_separates_nodes_is_not() -> None:
    logits = torch.eye(3)[torch.arange(10) % 3]
    assert constant_share(Fixed(logits), truth(), ("client/1",)) == 0.4


def test_graph_tasks_and_missing_models_are_not_judged() -> None:
    assert constant_share(None, truth(), ("client/1",)) is None
    graph = SimpleNamespace(task=SimpleNamespace(kind="graph"), index=lambda cid: 0)
    assert constant_share(Fixed(torch.zeros(2, 2)), graph, ("client/1",)) is None
