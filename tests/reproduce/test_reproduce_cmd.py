"""``securefg reproduce cefgc``: cells run here are told from cells only recorded, and --quick runs on a fresh clone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from securefg.cli import main
from securefg.reproduce import cell_runner
from securefg.reproduce.cefgc_cells import plan
from securefg.reproduce.cell_ledger import CellLedger
from tests.reproduce.test_cell_ledger import FakeRuns


def _committed_ledger(root: Path) -> Path:
    """A clone's committed ledger holding every cell of ``--quick`` (as docs/results/cefgc_cells.json does)."""
    path = root / "docs" / "results" / "cefgc_cells.json"
    ledger = CellLedger(path)
    for cell in plan(quick=True):
        ledger.record(cell.setting.name, {"method": cell.method.name, "seed": cell.seed, "device": "cpu",
                                          "config": {"dataset": cell.setting.dataset}, "wall_seconds": 9.0,
                                          "metrics": {"test_auc": 0.8}}, source="another machine")
    return path


@pytest.fixture()
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's root: the committed ledger, no run folders; cells run by a fake."""
    _committed_ledger(tmp_path)
    monkeypatch.chdir(tmp_path)
    fake = FakeRuns()
    real = cell_runner.run_cells

    def run_cells(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **{**kwargs, "run_fn": fake, "show_progress": False})

    monkeypatch.setattr(cell_runner, "run_cells", run_cells)
    return tmp_path


def test_quick_runs_its_cells_on_a_fresh_clone_and_writes_beside_them(clone: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "cefgc", "--quick", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(": to run (runs/reproduce_cefgc_quick/" in x for x in lines[:8])
    assert lines[8] == "8 cells: 0 finished here, 8 to run"  # --quick reads no ledger
    assert lines[-1] == "8 runs of cells that never finished anywhere not timed"
    assert main(["reproduce", "cefgc", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "8 cells: 8 ran here, 0 were finished already under runs/reproduce_cefgc_quick, 0 failed" in out
    assert (clone / "runs/reproduce_cefgc_quick/cefgc_quick.md").is_file()
    assert "recorded" not in out and not (clone / "docs/results/cefgc.md").exists()  # the committed page untouched
    assert main(["reproduce", "cefgc", "--quick"]) == 0
    assert "8 cells: 0 ran here, 8 were finished already under runs/reproduce_cefgc_quick" in capsys.readouterr().out


def test_the_full_comparison_says_which_cells_are_only_recorded(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["reproduce", "cefgc", "--datasets", "MUTAG", "PROTEINS", "--methods", "cefgc", "cefgc_plus", "fedavg",
            "centralized", "--seeds", "0", "--no-report"]
    assert main([*args, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all("recorded in docs/results/cefgc_cells.json, not rerun" in x for x in lines[:8])
    assert lines[8:] == ["8 cells: 0 finished here, 8 recorded in docs/results/cefgc_cells.json, 0 to run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert ("8 cells: 0 ran here, 0 were finished already under runs/reproduce_cefgc, 8 are recorded in "
            "docs/results/cefgc_cells.json from an earlier run and were not rerun (--ledger none runs them here)") in out
    assert main([*args, "--ledger", "none"]) == 0
    assert "8 cells: 8 ran here" in capsys.readouterr().out
