"""``securefg reproduce cefgc``: the cell list, the paper's cells, the table and the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.cli import main
from securefg.errors import ConfigError, InvalidInputError
from securefg.reproduce.cefgc_cells import METHODS, SEEDS, SETTINGS, Cell, plan
from securefg.reproduce.cefgc_report import write_report
from securefg.reproduce.cefgc_table import collect, comparison_table, mutag_check, proteins_target, shortfalls
from securefg.reproduce.paper_cells import TRANSCRIBED, parse_cefgc_targets

TARGETS = """# targets

## CeFGC (graph classification, single-dataset setting)

| method | MUTAG | PROTEINS |
|---|---|---|
| FedAvg | 0.78 | 0.83 |
| FedProx | 0.87 | 0.83 |
| CeFGC | 0.91 | 0.87 |
| CeFGC* | 0.90 | 0.87 |

Communication: ...

## FedStruct
| method | Cora |
|---|---|
| FedStruct | 0.80 |
"""


def _cell(setting: str, method: str, seed: int) -> Cell:
    return Cell(next(s for s in SETTINGS if s.name == setting), next(m for m in METHODS if m.name == method), seed)


def test_quick_is_one_seed_of_mutag_and_proteins_with_four_methods() -> None:
    cells = plan(quick=True)
    assert [(c.setting.name, c.method.name, c.seed) for c in cells] == [
        (s, m, 0) for s in ("MUTAG", "PROTEINS") for m in ("cefgc", "cefgc_plus", "fedavg", "centralized")]
    assert len(plan()) == len(SETTINGS) * len(METHODS) * len(SEEDS) == 280


def test_filters_narrow_the_grid_and_unknown_names_are_refused() -> None:
    cells = plan(settings=["proteins", "Mix"], methods=["FedAvg"], seeds=[3, 1, 3])
    assert [(c.setting.name, c.method.name, c.seed) for c in cells] == [
        ("PROTEINS", "fedavg", 3), ("PROTEINS", "fedavg", 1), ("Mix", "fedavg", 3), ("Mix", "fedavg", 1)]
    assert [c.seed for c in plan(quick=True, seeds=[2], methods=["cefgc"])] == [2, 2]
    with pytest.raises(ConfigError, match="unknown setting"):
        plan(settings=["CORA"])
    with pytest.raises(ConfigError, match="unknown method"):
        plan(methods=["fedsgd"])
    with pytest.raises(ConfigError, match="seeds"):
        plan(seeds=[-1])


def test_cell_folders_follow_setting_method_seed(tmp_path: Path) -> None:
    assert _cell("Social", "cefgc_star_plus", 4).folder(tmp_path) == tmp_path / "Social" / "cefgc_star_plus" / "seed4"


def test_targets_parse_to_the_transcription_and_bad_files_are_refused() -> None:
    assert parse_cefgc_targets(TARGETS) == TRANSCRIBED
    with pytest.raises(InvalidInputError, match="no '## CeFGC' section"):
        parse_cefgc_targets("## FedStruct\n| a | b |\n|---|---|\n| x | 1 |\n")
    with pytest.raises(InvalidInputError, match="not a number"):
        parse_cefgc_targets(TARGETS.replace("0.78", "n/a"))
    with pytest.raises(InvalidInputError, match="unknown method"):
        parse_cefgc_targets(TARGETS.replace("| FedProx |", "| SCAFFOLD |"))


def _results(values: dict[tuple[str, str], dict[int, float]], final: float | None = None) -> list[tuple[Cell, dict]]:
    out = []
    for (setting, method), by_seed in values.items():
        for seed, v in by_seed.items():
            metrics = {"test_auc": v, **({"final_test_auc": final} if final is not None else {})}
            out.append((_cell(setting, method, seed), {"metrics": metrics}))
    return out


def _row(table: str, setting: str, label: str) -> list[str]:
    line = next(x for x in table.splitlines() if x.startswith(f"| {setting} | {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_table_gives_mean_std_paper_and_delta_and_shows_missing_cells() -> None:
    measured = collect(_results({("MUTAG", "cefgc"): {0: 0.90, 1: 0.80}, ("PROTEINS", "fedavg"): {0: 0.81}}, final=0.84))
    table = comparison_table(measured, TRANSCRIBED, settings=SETTINGS, methods=METHODS, seeds=SEEDS)
    # sample std of (0.90, 0.80) is 0.0707
    assert _row(table, "MUTAG", "CeFGC") == ["MUTAG", "CeFGC", "2/5", "0.850 ± 0.071", "0.900, 0.800", "—", "0.91", "-0.060"]
    assert _row(table, "PROTEINS", "FedAvg") == ["PROTEINS", "FedAvg", "1/5", "0.810", "0.810", "0.840", "0.83", "-0.020"]
    assert _row(table, "PROTEINS", "CeFGC*") == ["PROTEINS", "CeFGC*", "0/5", "not run", "", "", "0.87", "—"]
    assert _row(table, "Mix", "central GIN") == ["Mix", "central GIN", "0/5", "not run", "", "", "—", "—"]
    assert len(table.splitlines()) == 2 + len(SETTINGS) * len(METHODS)
    note = shortfalls(measured, TRANSCRIBED, methods=METHODS)
    assert "MUTAG / CeFGC: 0.850 ± 0.071 against the paper's 0.91 (-0.060" in note and "FedAvg" not in note


def test_proteins_target_needs_every_seed_and_then_decides() -> None:
    seeds = [0, 1]
    part = collect(_results({("PROTEINS", "cefgc"): {0: 0.80, 1: 0.82}, ("PROTEINS", "fedavg"): {0: 0.79}}))
    text = proteins_target(part, seeds=seeds)
    assert "| 1 | 0.820 | not run | not run | — | — |" in text and text.endswith("on every seed [0, 1].")
    full = collect(_results({("PROTEINS", "cefgc"): {0: 0.80, 1: 0.82}, ("PROTEINS", "fedavg"): {0: 0.79, 1: 0.83},
                             ("PROTEINS", "centralized"): {0: 0.86, 1: 0.87}}))
    text = proteins_target(full, seeds=seeds)
    assert "| 0 | 0.800 | 0.790 | 0.860 | -0.060 | +0.010 |" in text
    assert "Within 0.04 of central: NOT met (-0.055)" in text and ">= FedAvg best-val: met (+0.000)" in text
    assert "not run" in mutag_check(full) and "met" in mutag_check(collect(_results({("MUTAG", "cefgc"): {0: 0.9}})))


def _write(root: Path, cell: Cell, auc: float) -> None:
    folder = cell.folder(root)
    folder.mkdir(parents=True)
    res = {"method": cell.method.name, "seed": cell.seed, "device": "cpu", "wall_seconds": 3.0,
           "config": {"dataset": cell.setting.dataset}, "metrics": {"test_auc": auc},
           **({"protocol": cell.method.protocol} if cell.method.protocol else {})}  # as a run records it
    (folder / "result.json").write_text(json.dumps(res))


def test_page_lists_every_cell_says_it_is_partial_and_plots_measured_settings(tmp_path: Path) -> None:
    _write(tmp_path / "runs", _cell("MUTAG", "cefgc", 0), 0.93)
    _write(tmp_path / "runs", _cell("MUTAG", "fedavg", 0), 0.90)
    (tmp_path / "runs" / "commands.txt").write_text("securefg reproduce cefgc --quick\nsecurefg reproduce cefgc --quick\n"
                                                   "securefg reproduce cefgc --seeds 1\n")
    page = tmp_path / "docs" / "cefgc.md"
    plots = write_report(out_root=tmp_path / "runs", page=page, command="securefg reproduce cefgc --quick",
                         paper=TRANSCRIBED, paper_source="test")
    text = page.read_text()
    assert "`securefg reproduce cefgc --quick`" in text and "2 of the 280 cells" in text and "NOT the full table" in text
    assert "* `securefg reproduce cefgc --quick`\n* `securefg reproduce cefgc --seeds 1`\n" in text
    assert "| MUTAG | CeFGC | 1/5 | 0.930 |" in text and "| Mix | CeFGC* | 0/5 | not run |" in text
    assert plots == [tmp_path / "docs" / "cefgc_MUTAG.png"] and plots[0].stat().st_size > 0


def test_cli_dry_run_lists_the_quick_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, _cell("MUTAG", "fedavg", 0), 0.9)
    page = str(tmp_path / "page.md")  # the default ledger lies beside the page: not the committed one
    assert main(["reproduce", "cefgc", "--quick", "--dry-run", "--out", str(tmp_path), "--page", page]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("MUTAG / FedAvg / seed 0: finished")
    assert all(": to run" in x for i, x in enumerate(lines[:8]) if i != 2)
    assert lines[8] == "8 cells: 1 finished here, 7 to run"  # --quick reads no ledger
    assert not any(x.startswith("  MUTAG / FedAvg:") for x in lines)  # finished: nothing left of it
    assert "  PROTEINS / FedAvg: seeds 0; no finished run of it to time" in lines
    assert lines[-1] == "7 runs of cells that never finished anywhere not timed"
    assert main(["reproduce", "cefgc", "--datasets", "CORA", "--dry-run"]) == 2


def test_the_papers_cefgc_columns_run_the_papers_stack_without_the_screen_whatever_the_defaults() -> None:
    """CeFGC's defaults moved (cefgc_robust, the receiver screen); the table reproduces the paper."""
    cells = plan(settings=["MUTAG"], methods=["cefgc", "cefgc_star", "cefgc_plus"], seeds=[0])
    by = {c.method.name: c for c in cells}
    assert by["cefgc"].method.protocol == by["cefgc_star"].method.protocol == "cefgc"
    assert by["cefgc_plus"].method.protocol is None  # its default, cefgc_plus, did not move
    assert all(dict(c.method.options)["screen_generators"] is False for c in cells)
    assert [c.method.key for c in cells] == ["cefgc", "cefgc_star", "cefgc_plus"]  # the ledger's keys stay
