"""The dry run's summary: counts, the runs left per setting/row/stack, timed only by finished runs."""

from __future__ import annotations

from securefg.reproduce.cells import Cell, MethodSpec, Setting
from securefg.reproduce.runs_left import (
    FINISHED,
    RECORDED,
    STALE,
    TO_RUN,
    groups_left,
    state_of,
    summary_lines,
)

CORA = Setting("Cora 10", "disjoint", "Cora", clients=10)
PLAIN = MethodSpec("fedpub", "FED-PUB", stack="plaintext")
PROT = MethodSpec("fedpub", "FED-PUB", stack="protected")


def test_a_group_is_timed_by_the_median_of_its_current_runs_only() -> None:
    states = [
        state_of(Cell(CORA, PLAIN, 42), FINISHED, {"wall_seconds": 100.0}),
        state_of(Cell(CORA, PLAIN, 43), RECORDED, {"wall_seconds": 300.0}),
        state_of(Cell(CORA, PLAIN, 44), RECORDED, {"wall_seconds": 200.0}),
        state_of(Cell(CORA, PLAIN, 45), STALE, {"wall_seconds": 9999.0}),  # an old preset's run: not a guide
        state_of(Cell(CORA, PLAIN, 46), TO_RUN, None),
    ]
    (group,) = groups_left(states)
    assert group.name == "Cora 10 / FED-PUB [plaintext]" and group.seeds == [45, 46]
    assert sorted(group.recorded_seconds) == [100.0, 200.0, 300.0]
    assert group.estimate_seconds == 400.0  # median 200 s times two runs left


def test_summary_counts_every_state_and_never_guesses_a_cell_that_never_ran() -> None:
    states = [
        state_of(Cell(CORA, PLAIN, 42), FINISHED, {"wall_seconds": 1800.0}),
        state_of(Cell(CORA, PLAIN, 43), STALE, {"wall_seconds": 60.0}),
        state_of(Cell(CORA, PLAIN, 44), TO_RUN, None),
        state_of(Cell(CORA, PROT, 42), TO_RUN, None),
        state_of(Cell(CORA, PROT, 43), RECORDED, {"metrics": {}}),  # a record without a time
    ]
    lines = summary_lines(states, "docs/results/fedpub_cells.json")
    assert lines[0] == ("5 cells: 1 finished here, 1 recorded in docs/results/fedpub_cells.json, 3 to run "
                        "(1 of them again: the preset changed)")
    assert lines[2] == "  Cora 10 / FED-PUB [plaintext]: seeds 43 44; about 1.0 h (1 finished: 1800 s)"
    assert lines[3] == "  Cora 10 / FED-PUB [protected]: seeds 42; no finished run of it to time"
    assert lines[4] == "about 1.0 h for the 2 runs timed this way; 1 run of cells that never finished anywhere not timed"


def test_a_finished_table_prints_only_its_counts() -> None:
    states = [state_of(Cell(CORA, PLAIN, 42), FINISHED, {"wall_seconds": 5.0})]
    assert summary_lines(states, None) == ["1 cell: 1 finished here, 0 to run"]
