"""The step clock: per-stage client and server seconds of an in-process round, and its critical path."""

from __future__ import annotations

import time

import torch

from securefg.data.synthetic import make_csbm
from securefg.federation.federation import Federation
from securefg.federation.program.session import InProcessRun
from securefg.federation.program.step_clock import ROUND_START, StepClock, step_name
from securefg.methods.base import MethodConfig, method_class
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.protocol.stack import ProtocolStack


def _fedavg_run(stack: str) -> InProcessRun:
    g = make_csbm(num_nodes=240, num_classes=3, num_features=12, seed=0)
    idx = torch.arange(g.num_nodes) % 3
    task = NodeTask(clients=[g.subgraph(idx == k) for k in range(3)], num_features=12, num_classes=3, full_graph=g)
    method = method_class("fedavg")(task, MethodConfig(rounds=2, train=TrainConfig(), seed=3, hidden=16))
    fed = Federation(method.num_clients, ProtocolStack.load(stack), seed=3)
    return InProcessRun(method, fed, rounds=2)


def test_a_secure_sum_round_is_split_by_stage_and_its_critical_path_is_shorter() -> None:
    run = _fedavg_run("fedavg_secure_sum")
    run.prepare()
    clock = run.parties.server.clock = StepClock()
    clock.start()
    t0 = time.perf_counter()
    run.play_round(0)
    wall = time.perf_counter() - t0
    clock.stop()
    names = set(clock.stages)
    assert {"fedavg/update secure_sum/masked_input", "fedavg/update secure_sum/unmask", "fedavg/train"} <= names
    for st in clock.stages.values():
        assert 0.0 <= st.clients_slowest <= st.clients_total + 1e-12
    train = clock.stages["fedavg/train"]
    assert train.steps == 1 and train.clients_total > 0.0
    # everything the round did is on the clock, once; with 3 clients side by side it is shorter
    assert 0.8 * wall <= clock.in_process <= wall * 1.01
    assert clock.critical_path < clock.in_process


def test_the_server_is_charged_to_the_stage_whose_replies_it_processes() -> None:
    clock = StepClock()
    clock.start()
    time.sleep(0.01)  # before any step
    clock.step_started("a")
    clock.step_answered("a", {"c1": 0.5, "c2": 0.25})
    time.sleep(0.02)  # the server works on a's replies
    clock.step_started("b")
    clock.step_answered("b", {})
    clock.stop()
    assert clock.stages[ROUND_START].server >= 0.01
    assert clock.stages["a"].server >= 0.02 and clock.stages["a"].clients_total == 0.75
    assert clock.stages["a"].clients_slowest == 0.5 and clock.stages["b"].steps == 1
    assert step_name(action="x/train", tag="", stage="") == "x/train"
    assert step_name(action="act", tag="t", stage="s/up") == "t s/up"
