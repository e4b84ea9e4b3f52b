"""The notes on why a cell is far from its paper: read, checked, shown beside the cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from securefg.cli import main
from securefg.errors import ConfigError, InvalidInputError
from securefg.reproduce.cell_ledger import CellLedger
from securefg.reproduce.cell_runner import run_cells
from securefg.reproduce.gap_notes import gap_notes_path, load_gap_notes
from securefg.reproduce.node_tables import FEDSTRUCT, plan
from securefg.reproduce.table_page import write_page
from tests.reproduce.test_node_tables import FakeNodeRuns

KNOWN = [("Cora 10", "Local GNN"), ("Cora 20", "FedSage+")]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fedstruct_gaps.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_notes_are_read_per_cell_and_an_absent_file_is_no_notes(tmp_path: Path) -> None:
    assert load_gap_notes(tmp_path / "missing.toml", KNOWN) == {}
    path = _write(tmp_path, '[[gap]]\nsetting = "Cora 10"\nrow = "Local GNN"\nwhy = """one client\n  sees   a third"""\n')
    assert load_gap_notes(path, KNOWN) == {("Cora 10", "Local GNN"): "one client sees a third"}
    assert gap_notes_path("docs/results/fedpub.md") == Path("docs/results/fedpub_gaps.toml")


@pytest.mark.parametrize("text, error, words", [
    ('[[gap]]\nsetting = "Cora 30"\nrow = "Local GNN"\nwhy = "x"\n', ConfigError, "not a cell of this table"),
    ('[[gap]]\nsetting = "Cora 10"\nrow = "Local GNN"\nwhy = "x"\n' * 2, ConfigError, "a second time"),
    ('[[gap]]\nsetting = "Cora 10"\nrow = "Local GNN"\nwhy = "  "\n', InvalidInputError, "['why']"),
    ('[[gap]]\nsetting = "Cora 10"\n', InvalidInputError, "['row', 'why']"),
    ('gap = "Cora 10"\n', InvalidInputError, "array of tables"),
    ('[[gap]\n', InvalidInputError, "not a readable TOML"),
])
def test_a_bad_notes_file_names_its_problem(tmp_path: Path, text: str, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        load_gap_notes(_write(tmp_path, text), KNOWN)
    assert words in str(info.value)


def test_the_page_shows_the_note_beside_its_cell_and_escapes_pipes(tmp_path: Path) -> None:
    paper, source = FEDSTRUCT.paper()
    cells = plan(FEDSTRUCT, paper, settings=["Cora 10"], rows=["Local GNN"], seeds=[0])
    ledger = CellLedger(tmp_path / "cells.json")
    run_cells(cells, out_root=tmp_path / "runs", run_fn=FakeNodeRuns(), ledger=ledger, show_progress=False)
    page = tmp_path / "fedstruct.md"
    write_page(FEDSTRUCT, out_root=tmp_path / "runs", page=page, command="test", paper=paper, paper_source=source,
               ledger=ledger, gaps={("Cora 10", "Local GNN"): "the fake run scores 0.80 | always"})
    assert ("| Cora 10 | Local GNN | plaintext | 80.00 | 39.23 | +40.77 | 1/10 | the fake run scores 0.80 \\| always |"
            in page.read_text())


def test_report_only_refuses_a_notes_file_naming_an_unknown_cell(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "fedstruct.md"
    gap_notes_path(page).write_text('[[gap]]\nsetting = "Cora 7"\nrow = "Local GNN"\nwhy = "x"\n', encoding="utf-8")
    rc = main(["reproduce", "fedstruct", "--report-only", "--out", str(tmp_path / "runs"), "--page", str(page),
               "--ledger", "none"])
    assert rc != 0 and "ConfigError" in capsys.readouterr().err and not page.exists()
