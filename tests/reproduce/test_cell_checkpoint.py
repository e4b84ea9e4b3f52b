"""An interrupted cell resumes from its own checkpoint; a checkpoint of another run is set aside."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from securefg.commands.reproduce_cmd import print_dry_run
from securefg.experiment import RunConfig, run_experiment
from securefg.federation.runner import CHECKPOINT
from securefg.reproduce.cell_checkpoint import resume_point
from securefg.reproduce.cell_ledger import CellLedger
from securefg.reproduce.cell_runner import run_cells
from securefg.reproduce.cells import Cell, MethodSpec, Setting, run_config

SETTING = Setting("tiny", "disjoint", dataset="csbm", clients=3, partition="metis", rounds=4)
CELL = Cell(SETTING, MethodSpec("fedavg", "FedAvg", stack="plaintext"), seed=3)


class Interrupted(Exception):
    pass


def interrupted_at(stop: int) -> Any:
    """``run_experiment`` that dies after round ``stop`` was played (a session ending mid-cell)."""

    def run(cfg: RunConfig) -> dict[str, Any]:
        def on_round(r: int, row: dict[str, Any]) -> None:
            if r == stop:
                raise Interrupted

        return run_experiment(cfg, on_round=on_round)

    return run


def test_an_interrupted_cell_resumes_where_its_checkpoint_left_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ledger = CellLedger(tmp_path / "cells.json")
    first = run_cells([CELL], out_root=tmp_path / "runs", run_fn=interrupted_at(2), ledger=ledger, checkpoint_every=2)
    assert first[0].status == "failed" and "Interrupted" in first[0].error
    folder = CELL.folder(tmp_path / "runs")
    assert (folder / CHECKPOINT).is_file() and not (folder / "result.json").exists()
    assert torch.load(folder / CHECKPOINT, weights_only=True)["elapsed_seconds"] > 0
    print_dry_run([CELL], str(tmp_path / "runs"), ledger, tmp_path / "cells.json")
    assert "to run (" in (dry := capsys.readouterr().out) and "resumes from its checkpoint at round 2" in dry

    again = run_cells([CELL], out_root=tmp_path / "runs", ledger=ledger, checkpoint_every=2)
    assert again[0].status == "ran"
    out = capsys.readouterr().out
    assert "(resuming from its checkpoint)" in out and "(resumed at round 2)" in out
    res = json.loads((folder / "result.json").read_text())
    assert res["resumed_from_round"] == 2 and [h["round"] for h in res["history"]] == [0, 1, 2, 3]
    assert res["wall_seconds"] >= res["earlier_seconds"] > 0  # the first process's rounds are counted
    assert not (folder / CHECKPOINT).exists()  # the result is the record now
    record = json.loads((tmp_path / "cells.json").read_text())["cells"]["tiny/fedavg@plaintext/seed3"]
    assert record["resumed_from_round"] == 2

    # the same cell run straight through: resuming changed nothing it computed
    straight = run_experiment(run_config(CELL, out_root=tmp_path / "straight"))
    assert straight["metrics"] == res["metrics"]


def test_a_checkpoint_of_another_configuration_is_set_aside_not_resumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = run_config(CELL, out_root=tmp_path, checkpoint_every=2)
    with pytest.raises(Interrupted):  # a run of the column before its learning rate changed, stopped at round 2
        interrupted_at(2)(replace(cfg, lr=0.5))
    outcome = run_cells([CELL], out_root=tmp_path, checkpoint_every=2)[0]
    assert outcome.status == "ran" and "resumed_from_round" not in outcome.result
    assert "different configuration" in (out := capsys.readouterr().out) and "set aside as checkpoint.pt.stale" in out
    folder = Path(cfg.out)
    assert not (folder / CHECKPOINT).exists() and (folder / (CHECKPOINT + ".stale")).is_file()


def test_an_unreadable_checkpoint_is_set_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = CELL.folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / CHECKPOINT).write_bytes(b"torn")
    outcome = run_cells([CELL], out_root=tmp_path, checkpoint_every=2)[0]
    assert outcome.status == "ran" and "resumed_from_round" not in outcome.result
    assert "unreadable" in capsys.readouterr().out and (folder / (CHECKPOINT + ".stale")).read_bytes() == b"torn"


def test_where_and_how_often_a_run_checkpoints_do_not_stop_it_resuming(tmp_path: Path) -> None:
    cfg = run_config(CELL, out_root=tmp_path, checkpoint_every=2)
    with pytest.raises(Interrupted):  # checkpointed each round, with its data elsewhere, on the CPU
        interrupted_at(2)(replace(cfg, data_root=str(tmp_path / "elsewhere"), checkpoint_every=1, device="cpu"))
    outcome = run_cells([CELL], out_root=tmp_path, checkpoint_every=2, show_progress=False)[0]
    assert outcome.status == "ran" and outcome.result["resumed_from_round"] == 2


def test_without_checkpoints_a_leftover_file_is_ignored(tmp_path: Path) -> None:
    cfg = run_config(CELL, out_root=tmp_path)
    Path(cfg.out).mkdir(parents=True)
    (Path(cfg.out) / CHECKPOINT).write_bytes(b"anything")
    start = resume_point(cfg)
    assert start.config is cfg and start.note is None


def test_a_checkpoint_the_method_cannot_restore_is_set_aside_and_the_cell_starts_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from securefg.errors import CheckpointError
    from securefg.methods.base import method_class

    run_cells([CELL], out_root=tmp_path, run_fn=interrupted_at(2), checkpoint_every=2, show_progress=False)

    def refuse(self: Any, party: Any, items: Any) -> None:
        raise CheckpointError("written by another version")

    monkeypatch.setattr(method_class("fedavg"), "restore_party", refuse)
    outcome = run_cells([CELL], out_root=tmp_path, checkpoint_every=2)[0]
    assert outcome.status == "ran" and "resumed_from_round" not in outcome.result
    assert "could not be restored (written by another version): set aside" in capsys.readouterr().out
    assert (CELL.folder(tmp_path) / (CHECKPOINT + ".stale")).is_file()


def test_a_method_that_cannot_resume_gets_no_checkpoints() -> None:
    sheaf = Cell(SETTING, MethodSpec("fedsheafhn", "FedSheafHN", stack="plaintext"), seed=0)
    assert run_config(sheaf, out_root=".", checkpoint_every=10).checkpoint_every == 0
    assert run_config(CELL, out_root=".", checkpoint_every=10).checkpoint_every == 10
