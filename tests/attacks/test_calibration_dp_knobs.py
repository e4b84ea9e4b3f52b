"""The attacks read the noised message under the DP knobs: FedSheafHN's feedback
(``fedsheafhn_feedback_dp``, attack ``sheaf_feedback`` as the server) and FedSage+'s generated
features (``fedsage_dp``, attack ``generator_membership`` as an owner). Plaintext wins; with the
knob's noise the attack falls to about chance."""

from __future__ import annotations

import torch

from securefg.data.synthetic import make_csbm
from securefg.methods.tasks import NodeTask
from tests.attacks.conftest import play, run_method, threat
from tests.attacks.test_calibration_fedsage import OPTIONS as SAGE_OPTIONS
from tests.attacks.test_calibration_fedsage import _task as sage_task


def _sheaf_task() -> NodeTask:
    g = make_csbm(num_nodes=240, num_classes=3, num_features=12, seed=0)
    g.x = g.x + 0.5 * torch.randn(g.x.shape, generator=torch.Generator().manual_seed(5))
    idx = torch.arange(g.num_nodes) % 4
    clients = [g.subgraph(idx == k) for k in range(4)]
    for k, c in enumerate(clients):  # bag-of-words-like: each client lacks a third of the vocabulary
        c.x = c.x.abs() * torch.tensor([float((f + k) % 3 != 0) for f in range(c.x.shape[1])])
    return NodeTask(clients=clients, num_features=12, num_classes=3)


def _value(stack: str, task: NodeTask, method: str, parties: list[str], attacks: dict, key: str, **kw) -> float:
    r = run_method(task, method, stack, **kw)
    res = play(threat(parties, attacks), r, task)[key]
    assert res.status == "ran", res.reason
    return res.outcome.value


def test_sheaf_feedback_reads_the_noised_feedback() -> None:
    task = _sheaf_task()
    kw = {"rounds": 2, "hidden": 16, "lr": 0.02, "weight_decay": 5e-4, "local_epochs": 2,
          "options": {"warmup_epochs": 3, "refresh_every": 2, "knn": 2, "hn_hidden": 8}}
    attacks = {"sheaf_feedback": {}}
    plain = _value("plaintext", task, "fedsheafhn", ["server"], attacks, "sheaf_feedback", **kw)
    noised = _value("fedsheafhn_feedback_dp", task, "fedsheafhn", ["server"], attacks, "sheaf_feedback", **kw)
    assert plain > 0.6
    assert abs(noised - 0.5) < abs(plain - 0.5)


def test_generator_membership_reads_the_noised_generated_features() -> None:
    task = sage_task()
    kw = {"rounds": 1, "hidden": 16, "options": SAGE_OPTIONS, "weight_decay": 5e-4}
    attacks = {"generator_membership": {"nodes": 60}}
    plain = _value("fedsage_secure", task, "fedsage_plus", ["client/0"], attacks, "generator_membership", **kw)
    noised = _value("fedsage_dp", task, "fedsage_plus", ["client/0"], attacks, "generator_membership", **kw)
    assert plain >= 0.6
    assert noised < 0.6 and abs(noised - 0.5) < abs(plain - 0.5)


def test_a_curious_fedsheafhn_client_steals_links_with_its_generated_model(node_task: NodeTask) -> None:
    """The weights the server generates for a client (from every client's embedding) are the model
    that client holds: link stealing on the peers' public features reads it (calibrated on a
    homophilous csbm: the posteriors rank true edges above non-edges)."""
    task = node_task
    kw = {"rounds": 2, "hidden": 16, "lr": 0.02, "weight_decay": 5e-4, "local_epochs": 2,
          "options": {"warmup_epochs": 3, "refresh_every": 2, "knn": 2, "hn_hidden": 8}}
    r = run_method(task, "fedsheafhn", "fedsheafhn_secure", **kw)
    res = play(threat(["client/0"], {"link_stealing": {"pairs": 300}}, target_features=True), r, task)["link_stealing"]
    assert res.status == "ran", res.reason
    assert res.outcome.value > 0.55
    assert "own generated model" in str(res.outcome.details)
