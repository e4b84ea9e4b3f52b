"""``securefg tune`` never reads test labels: a study on a graph whose test labels are poisoned
chooses exactly what the clean study chooses, trial by trial, while the runs' test accuracy moves
(so the poisoning is real and the test could fail)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from securefg import experiment_data
from securefg.experiment import run_experiment
from securefg.run_config import RunConfig
from securefg.tuning.spaces import space_for
from securefg.tuning.study import TuneSpec, run_study

BASE = RunConfig(method="fedstruct", dataset="csbm", partition="random", clients=3, rounds=4, hidden=8,
                 protocol="plaintext", progress=False)


def _poison(build: Callable[[Any], tuple[Any, dict[str, Any]]]) -> Callable[[Any], tuple[Any, dict[str, Any]]]:
    """``build_task`` whose test nodes all carry a wrong label (each shifted by one class)."""

    def poisoned(cfg: Any) -> tuple[Any, dict[str, Any]]:
        task, info = build(cfg)
        c = task.num_classes
        for data in [*task.clients, *([task.full_graph] if task.full_graph is not None else [])]:
            y = data.y.clone()
            y[data.test_mask] = (y[data.test_mask] + 1) % c
            data.y = y
        return task, info

    return poisoned


def _study(test_scores: list[float]) -> dict[str, Any]:
    def run(cfg: RunConfig, **kw: Any) -> dict[str, Any]:
        result = run_experiment(cfg, **kw)
        test_scores.append(float(result["metrics"]["test_acc"]))  # the experimenter's view, never the tuner's
        return result

    spec = TuneSpec(base=BASE, space=space_for("fedstruct", ["lr", "weight_decay", "options.dropout"]),
                    seeds=[0, 1], trials=3, sampler_seed=0, run=run)
    return run_study(spec)


def _trace(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(t["number"], t["state"], tuple(sorted(t["params"].items())),
             tuple(s["best_val"] for s in t["val_scores"])) for t in record["trials"]]


def test_poisoned_test_labels_change_nothing_the_tuner_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(1)
    clean_test: list[float] = []
    clean = _study(clean_test)
    monkeypatch.setattr(experiment_data, "build_task", _poison(experiment_data.build_task))
    poisoned_test: list[float] = []
    poisoned = _study(poisoned_test)
    assert len(clean["trials"]) == 3 and clean["baseline"]["lr"] == pytest.approx(0.002)  # FedStruct's Table 4 lr
    assert _trace(poisoned) == _trace(clean)
    assert poisoned["chosen"] == clean["chosen"] and poisoned["chosen_trial"] == clean["chosen_trial"]
    assert poisoned["chosen_value"] == clean["chosen_value"]
    # the poisoning is real: the same runs score differently on the test split
    assert len(poisoned_test) == len(clean_test) == 6
    assert max(abs(a - b) for a, b in zip(clean_test, poisoned_test)) > 0.05  # measured: 0.13
