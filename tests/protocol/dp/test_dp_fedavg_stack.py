import json

import pytest
import torch

from securefg.data.synthetic import make_csbm
from securefg.federation.federation import Federation
from securefg.federation.runner import RoundRunner
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.dp.accountant import epsilon_of_history
from securefg.protocol.dp.report import privacy_report
from securefg.protocol.stack import ProtocolStack

ROUNDS = 3


def _fedavg(stack):
    g = make_csbm(num_nodes=120, num_classes=3, num_features=8, seed=0)
    idx = torch.arange(g.num_nodes) % 3
    task = NodeTask(clients=[g.subgraph(idx == k) for k in range(3)], num_features=8, num_classes=3)
    cfg = MethodConfig(rounds=ROUNDS, train=TrainConfig(), seed=1, hidden=8)
    method = method_class("fedavg")(task, cfg)
    fed = Federation(method.num_clients, stack, seed=1)
    RoundRunner(method, fed, rounds=ROUNDS, progress=False).run()
    return fed


def test_fedavg_under_the_dp_stack_reports_each_clients_epsilon():
    stack = ProtocolStack.load("fedavg_dp")
    fed = _fedavg(stack)
    rep = privacy_report(fed.parties, stack=stack)
    expected = epsilon_of_history([(0.3, 1.0, ROUNDS)], delta=1e-5)  # the stack's sigma, all rounds
    assert rep["epsilon"] == pytest.approx(expected)
    assert sorted(rep["clients"]) == ["client/0", "client/1", "client/2"]
    (release,) = rep["clients"]["client/0"]["client"]["releases"]
    assert (release["tag"], release["steps"]) == ("fedavg/update", ROUNDS)
    assert rep["stack"] == "fedavg_dp"
    json.dumps(rep, allow_nan=False)
