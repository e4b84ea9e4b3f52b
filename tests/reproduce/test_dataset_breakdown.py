"""The per-dataset table of the multi-dataset settings: a dataset the single average loses shows."""

from __future__ import annotations

from securefg.reproduce.cefgc_cells import METHODS, SETTINGS, Cell
from securefg.reproduce.dataset_breakdown import dataset_breakdown

BY_NAME = {s.name: s for s in SETTINGS}
METHOD = {m.name: m for m in METHODS}


def _result(by_dataset: dict[str, float], **extra: float) -> dict:
    return {"metrics": {"test_auc": sum(by_dataset.values()) / len(by_dataset), "test_auc_by_dataset": by_dataset,
                        **extra}}


def test_each_dataset_gets_its_column_and_below_chance_pairs_are_counted() -> None:
    social = BY_NAME["Social"]
    results = [
        (Cell(social, METHOD["cefgc"], 0), _result({"IMDB-BINARY": 0.45, "IMDB-MULTI": 0.66},
                                                    mean_client_test_auc=0.69, global_val_auc=0.58)),
        (Cell(social, METHOD["cefgc"], 1), _result({"IMDB-BINARY": 0.65, "IMDB-MULTI": 0.60},
                                                    mean_client_test_auc=0.71, global_val_auc=0.62)),
        (Cell(social, METHOD["fedavg"], 0), _result({"IMDB-BINARY": 0.81, "IMDB-MULTI": 0.63}, global_val_auc=0.74)),
        (Cell(social, METHOD["fedavg"], 1), {"metrics": {"test_auc": 0.8,  # a ledger's null: left out of the mean
                                                         "test_auc_by_dataset": {"IMDB-BINARY": None, "IMDB-MULTI": 0.63}}}),
        (Cell(social, METHOD["centralized"], 0), {"metrics": {"test_auc": 0.75}}),  # no per-dataset AUC
    ]
    text = dataset_breakdown(results, settings=SETTINGS, methods=METHODS)
    assert text.startswith("**Social**")
    assert "| method | seeds | IMDB-BINARY | IMDB-MULTI | below chance | clients' own models | global val AUC |" in text
    assert "| CeFGC | 2 | 0.550 ± 0.141 | 0.630 ± 0.042 | 1 | 0.700 ± 0.014 | 0.600 ± 0.028 |" in text
    assert "| FedAvg | 2 | 0.810 | 0.630 ± 0.000 | 0 | — | 0.740 |" in text
    assert "central GIN" not in text


def test_single_dataset_settings_and_no_results_give_no_table() -> None:
    mutag = BY_NAME["MUTAG"]
    one = [(Cell(mutag, METHOD["cefgc"], 0), _result({"MUTAG": 0.9}))]
    assert dataset_breakdown(one, settings=SETTINGS, methods=METHODS) == ""
    assert dataset_breakdown([], settings=SETTINGS, methods=METHODS) == ""
