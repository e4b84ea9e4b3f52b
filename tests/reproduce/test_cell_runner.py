"""The resumable cell runner: finished cells are not rerun, a failing cell does not stop the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from securefg.errors import InvalidInputError
from securefg.experiment import RunConfig, run_experiment
from securefg.reproduce.cefgc_cells import METHODS, SETTINGS, Cell, MethodSpec, Setting, plan
from securefg.reproduce.cell_runner import run_cells


class FakeRuns:
    """Stands in for ``run_experiment``: counts calls and writes the result.json a run would."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[RunConfig] = []
        self.fail = fail

    def __call__(self, cfg: RunConfig) -> dict[str, Any]:
        self.calls.append(cfg)
        if cfg.method == self.fail:
            raise RuntimeError("boom")
        res = {"method": cfg.method, "seed": cfg.seed, "config": {"dataset": cfg.dataset}, "metrics": {"test_auc": 0.5}}
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / "result.json").write_text(json.dumps(res))
        return {**res, "_federation": object()}


def test_a_second_invocation_reruns_nothing(tmp_path: Path) -> None:
    cells = plan(quick=True)
    first = FakeRuns()
    outcomes = run_cells(cells, out_root=tmp_path, run_fn=first, generator_cache=tmp_path / "gen", show_progress=False)
    assert len(first.calls) == 8 and [o.status for o in outcomes] == ["ran"] * 8
    assert all("_federation" not in o.result for o in outcomes)
    # CeFGC variants get the shared generator cache, the references do not
    assert {c.method: c.options.get("generator_cache") for c in first.calls} == {
        "cefgc": str(tmp_path / "gen"), "cefgc_plus": str(tmp_path / "gen"), "fedavg": None, "centralized": None}
    assert all(c.rounds == (1 if c.method.startswith("cefgc") else 200) and c.clients == 3 for c in first.calls)
    second = FakeRuns()
    again = run_cells(cells, out_root=tmp_path, run_fn=second, show_progress=False)
    assert second.calls == [] and [o.status for o in again] == ["done"] * 8
    # a wider request runs only the new cells
    third = FakeRuns()
    run_cells(plan(quick=True, seeds=[0, 1]), out_root=tmp_path, run_fn=third, show_progress=False)
    assert len(third.calls) == 8 and {c.seed for c in third.calls} == {1}


def test_a_failing_cell_is_reported_and_the_others_still_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = FakeRuns(fail="fedavg")
    outcomes = run_cells(plan(quick=True), out_root=tmp_path, run_fn=runs, show_progress=True)
    assert [o.status for o in outcomes].count("failed") == 2 and len(runs.calls) == 8
    assert "RuntimeError: boom" in outcomes[2].error
    out = capsys.readouterr().out
    assert "[3/8] MUTAG / FedAvg / seed 0: FAILED RuntimeError: boom" in out
    assert "[1/8] MUTAG / CeFGC / seed 0: test AUC 0.5000, ran in" in out
    # the failed cells are the only ones a rerun runs
    rerun = FakeRuns()
    run_cells(plan(quick=True), out_root=tmp_path, run_fn=rerun, show_progress=False)
    assert [c.method for c in rerun.calls] == ["fedavg", "fedavg"]


def test_a_result_of_another_run_in_a_cell_folder_is_refused(tmp_path: Path) -> None:
    cell = plan(quick=True)[0]
    cell.folder(tmp_path).mkdir(parents=True)
    (cell.folder(tmp_path) / "result.json").write_text(json.dumps(
        {"method": "cefgc", "seed": 3, "config": {"dataset": "MUTAG"}, "metrics": {}}))
    with pytest.raises(InvalidInputError, match="not the cell"):
        run_cells([cell], out_root=tmp_path, run_fn=FakeRuns(), show_progress=False)


def test_cells_run_in_process_through_run_experiment(tmp_path: Path) -> None:
    tiny = Cell(Setting("tiny", "single-dataset", "synthetic-graphs"), MethodSpec("fedavg", "FedAvg", 2), 0)
    calls: list[RunConfig] = []

    def counted(cfg: RunConfig) -> dict[str, Any]:
        calls.append(cfg)
        return run_experiment(cfg)

    [outcome] = run_cells([tiny], out_root=tmp_path, device="cpu", run_fn=counted, show_progress=False)
    assert outcome.status == "ran" and 0.0 <= outcome.result["metrics"]["test_auc"] <= 1.0
    saved = json.loads((tmp_path / "tiny" / "fedavg" / "seed0" / "result.json").read_text())
    assert saved["metrics"]["test_auc"] == outcome.result["metrics"]["test_auc"] and saved["rounds"] == 2
    [again] = run_cells([tiny], out_root=tmp_path, device="cpu", run_fn=counted, show_progress=False)
    assert again.status == "done" and len(calls) == 1


def test_every_setting_and_method_is_known_to_run() -> None:
    from securefg.experiment_data import PRESETS
    from securefg.methods.base import method_class

    for m in METHODS:
        method_class(m.name)
    assert {s.dataset.lower() for s in SETTINGS if s.kind != "single-dataset"} == set(PRESETS)
