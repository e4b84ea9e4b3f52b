"""The committed cell ledger: finished cells outlive their run folders, and bad records are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from securefg.errors import InvalidInputError
from securefg.experiment import RunConfig
from securefg.reproduce.cefgc_cells import plan
from securefg.reproduce.cefgc_report import measure_all, write_report
from securefg.reproduce.cell_ledger import CellLedger, cell_key
from securefg.reproduce.cell_runner import run_cells


class FakeRuns:
    """Stands in for ``run_experiment``: counts calls, writes the result.json a run would."""

    def __init__(self) -> None:
        self.calls: list[RunConfig] = []

    def __call__(self, cfg: RunConfig) -> dict[str, Any]:
        self.calls.append(cfg)
        res = {"method": cfg.method, "seed": cfg.seed, "config": {"dataset": cfg.dataset}, "device": "cpu",
               "wall_seconds": 3.0, "history": [{"round": 0}],
               "metrics": {"test_auc": 0.5 + cfg.seed / 100, "final_test_auc": 0.4, "test_acc": 0.6, "other": 1}}
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        (Path(cfg.out) / "result.json").write_text(json.dumps(res))
        return res


def test_cells_recorded_in_the_ledger_are_not_rerun_after_the_folders_are_gone(tmp_path: Path) -> None:
    ledger = CellLedger(tmp_path / "cells.json")
    cells = plan(quick=True, seeds=[0, 1])
    first = FakeRuns()
    run_cells(cells, out_root=tmp_path / "runs", run_fn=first, ledger=ledger, show_progress=False)
    assert len(first.calls) == 16 and len(ledger) == 16
    shutil.rmtree(tmp_path / "runs")  # a fresh machine: only the committed file is left
    again = FakeRuns()
    outcomes = run_cells(cells, out_root=tmp_path / "runs", run_fn=again, ledger=CellLedger(tmp_path / "cells.json"),
                         show_progress=False)
    assert again.calls == [] and {o.status for o in outcomes} == {"recorded"}  # not "done": no run folder here
    rec = json.loads((tmp_path / "cells.json").read_text())["cells"][cell_key("MUTAG", "fedavg", 1)]
    # compact: the table's metrics, run time and provenance; no history, no other metric
    assert rec["metrics"] == {"test_auc": 0.51, "final_test_auc": 0.4, "test_acc": 0.6}
    assert rec["wall_seconds"] == 3.0 and "history" not in rec and rec["source"].startswith("securefg reproduce")


def test_a_run_folder_missing_from_the_ledger_is_recorded_when_found(tmp_path: Path) -> None:
    cells = plan(quick=True)
    run_cells(cells, out_root=tmp_path / "runs", run_fn=FakeRuns(), show_progress=False)  # no ledger
    ledger = CellLedger(tmp_path / "cells.json")
    measured, found = measure_all(tmp_path / "runs", ledger)
    assert len(found) == 8 and len(CellLedger(tmp_path / "cells.json")) == 8
    assert measured[("PROTEINS", "cefgc")].best == {0: 0.5}


def test_the_page_is_built_from_the_ledger_alone(tmp_path: Path) -> None:
    ledger = CellLedger(tmp_path / "cells.json")
    ledger.add_command("securefg reproduce cefgc --quick")
    run_cells(plan(quick=True), out_root=tmp_path / "runs", run_fn=FakeRuns(), ledger=ledger, show_progress=False)
    shutil.rmtree(tmp_path / "runs")
    page = tmp_path / "page.md"
    write_report(out_root=tmp_path / "runs", page=page, command="securefg reproduce cefgc", paper={},
                 paper_source="none", ledger=CellLedger(tmp_path / "cells.json"))
    text = page.read_text()
    assert "8 of the 280 cells" in text and "| MUTAG | CeFGC | 1/5 | 0.500 |" in text
    assert "* `securefg reproduce cefgc --quick`" in text and "cells.json" in text


def test_bad_ledgers_are_refused_with_the_file_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="bad.json"):
        CellLedger(bad)
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(InvalidInputError, match="'cells'"):
        CellLedger(bad)
    bad.write_text(json.dumps({"cells": {cell_key("MUTAG", "cefgc", 0): {"method": "fedavg", "seed": 0}}}))
    with pytest.raises(InvalidInputError, match="holds the run"):
        CellLedger(bad).get("MUTAG", "cefgc", 0)


def test_the_committed_ledger_is_well_formed() -> None:
    """Every record in docs/results names a known cell and carries a test AUC in [0, 1]."""
    path = Path(__file__).resolve().parents[2] / "docs" / "results" / "cefgc_cells.json"
    if not path.is_file():
        pytest.skip("no committed ledger in this checkout")
    ledger = CellLedger(path)
    keys = {cell_key(c.setting.name, c.method.name, c.seed) for c in plan()}
    data = json.loads(path.read_text())["cells"]
    assert set(data) <= keys and len(ledger) == len(data)
    assert all(0.0 <= rec["metrics"]["test_auc"] <= 1.0 and rec["source"] for rec in data.values())


def test_report_only_runs_nothing_and_records_the_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from securefg.cli import main
    from securefg.reproduce import cell_runner

    run_cells(plan(quick=True), out_root=tmp_path / "runs", run_fn=FakeRuns(), show_progress=False)

    def boom(*_: Any, **__: Any) -> None:
        raise AssertionError("report-only must not run a cell")

    monkeypatch.setattr(cell_runner, "run_cells", boom)
    page = tmp_path / "page.md"
    assert main(["reproduce", "cefgc", "--report-only", "--out", str(tmp_path / "runs"), "--page", str(page)]) == 0
    assert len(CellLedger(tmp_path / "page_cells.json")) == 8 and "8 of the 280 cells" in page.read_text()


def test_logged_invocations_move_into_the_ledger(tmp_path: Path) -> None:
    from securefg.reproduce.cell_ledger import COMMAND_LOG

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / COMMAND_LOG).write_text("securefg reproduce cefgc --datasets MUTAG\n\n")
    ledger = CellLedger(tmp_path / "cells.json")
    write_report(out_root=tmp_path / "runs", page=tmp_path / "page.md", command="x", paper={}, paper_source="none",
                 ledger=ledger)
    assert CellLedger(tmp_path / "cells.json").commands == ["securefg reproduce cefgc --datasets MUTAG"]


def test_a_rerun_folder_replaces_an_older_record(tmp_path: Path) -> None:
    ledger = CellLedger(tmp_path / "cells.json")
    ledger.record("MUTAG", {"method": "cefgc", "seed": 0, "metrics": {"test_auc": 0.971}}, source="old table")
    run_cells(plan(quick=True), out_root=tmp_path / "runs", run_fn=FakeRuns(), show_progress=False)  # no ledger
    measure_all(tmp_path / "runs", ledger)
    rec = CellLedger(tmp_path / "cells.json").get("MUTAG", "cefgc", 0)
    assert rec is not None and rec["metrics"]["test_auc"] == 0.5 and rec["source"].startswith("run folder")
    before = (tmp_path / "cells.json").read_text()
    measure_all(tmp_path / "runs", CellLedger(tmp_path / "cells.json"))  # same metrics: nothing rewritten
    assert (tmp_path / "cells.json").read_text() == before


def test_per_dataset_metrics_are_kept_and_non_finite_values_stored_as_null(tmp_path: Path) -> None:
    ledger = CellLedger(tmp_path / "cells.json")
    res = {"method": "cefgc", "seed": 0, "config": {"dataset": "Social"},
           "metrics": {"test_auc": 0.6, "test_auc_by_dataset": {"IMDB-BINARY": 0.45, "IMDB-MULTI": float("nan")},
                       "mean_client_test_auc": 0.69, "global_val_auc": float("nan"), "per_client": {}}}
    ledger.record("Social", res, source="test")
    text = (tmp_path / "cells.json").read_text()
    assert "NaN" not in text  # strict JSON
    rec = json.loads(text)["cells"][cell_key("Social", "cefgc", 0)]
    assert rec["metrics"] == {"test_auc": 0.6, "test_auc_by_dataset": {"IMDB-BINARY": 0.45, "IMDB-MULTI": None},
                              "mean_client_test_auc": 0.69, "global_val_auc": None}


def test_the_page_names_invocations_without_one_machines_paths(tmp_path) -> None:
    from securefg.reproduce.cell_ledger import COMMAND_LOG, CellLedger, logged_commands

    out = tmp_path / "runs"
    out.mkdir()
    local = ("securefg reproduce fedstruct --settings 'Cora 20' --rows 'Local GNN' --out /work/x/runs "
             "--ledger /work/x/cells.json --data-root=/data")
    (out / COMMAND_LOG).write_text(local + "\n", encoding="utf-8")
    ledger = CellLedger(tmp_path / "cells.json")
    ledger.add_command("securefg reproduce fedstruct --settings 'Cora 20' --rows 'Local GNN'")
    # the same invocation from another machine is one line, with its quoting kept
    assert logged_commands(out, ledger) == ["securefg reproduce fedstruct --settings 'Cora 20' --rows 'Local GNN'"]
    assert CellLedger(tmp_path / "cells.json").commands == logged_commands(out, ledger)


def _lane_result(method: str, seed: int, auc: float) -> dict[str, Any]:
    return {"method": method, "seed": seed, "config": {"dataset": "MUTAG"}, "metrics": {"test_auc": auc}}


def test_two_invocations_sharing_a_ledger_keep_each_others_records(tmp_path: Path) -> None:
    # two lanes of one table load the ledger, then each records its own cells
    a, b = CellLedger(tmp_path / "cells.json"), CellLedger(tmp_path / "cells.json")
    a.record("MUTAG", _lane_result("cefgc", 0, 0.7), source="lane a")
    b.record("MUTAG", _lane_result("fedavg", 0, 0.6), source="lane b")
    b.add_command("securefg reproduce cefgc --rows FedAvg")
    a.record("MUTAG", _lane_result("cefgc", 1, 0.8), source="lane a")  # a has never seen b's record
    on_disk = CellLedger(tmp_path / "cells.json")
    assert len(on_disk) == 3
    assert on_disk.get("MUTAG", "fedavg", 0)["metrics"] == {"test_auc": 0.6}
    assert on_disk.commands == ["securefg reproduce cefgc --rows FedAvg"]
    # a record one lane rewrites wins over the copy the other loaded before
    b.record("MUTAG", _lane_result("cefgc", 0, 0.75), source="lane b")
    a.record("MUTAG", _lane_result("cefgc", 2, 0.9), source="lane a")
    assert CellLedger(tmp_path / "cells.json").get("MUTAG", "cefgc", 0)["metrics"] == {"test_auc": 0.75}
