"""``securefg audit --matrix --quick``: the whole matrix on synthetic data, as the CLI runs it.

Checks the shape of what a user gets (every method x threat model, no cell erroring, the
page and JSON, the curve of FedStruct-B's declared releases with epsilon at each DP point),
not the verdicts: two rounds on a synthetic graph say nothing about the real methods.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from securefg.audit.matrix.plan import THREAT_MODELS
from securefg.cli import main


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("matrix")
    code = main(["audit", "--matrix", "--quick", "--out", str(out)])
    return code, json.loads((out / "privacy-matrix.json").read_text()), out


def test_every_method_meets_every_threat_model_and_no_cell_errors(matrix: tuple[int, dict[str, Any], Path]) -> None:
    code, doc, _ = matrix
    assert code in (0, 1), "exit 3 = an audit errored"
    methods = {r["method"] for r in doc["rows"]}
    assert methods == {"fedavg", "fedpub", "fedsheafhn", "fedstruct", "fedsage_plus", "cefgc"}
    for m in methods:
        assert {r["threat_model"] for r in doc["rows"] if r["method"] == m} == set(THREAT_MODELS)
    errored = [(r["cell"], a["key"], a["reason"]) for r in doc["rows"] for a in r["attacks"] if a["verdict"] == "error"]
    assert not errored
    for r in doc["rows"]:
        assert r["accuracy"]["protected"] is not None, r["cell"]
        for a in r["attacks"]:
            if a["status"] == "ran" and a["margin"] is not None:  # every verdict judges the advantage
                assert (a["verdict"] == "pass") == (a["advantage"] <= a["margin"] + 1e-9), (r["cell"], a)


def test_fedstruct_releases_carry_their_epsilon_utility_curve(matrix: tuple[int, dict[str, Any], Path]) -> None:
    _, doc, _ = matrix
    row = next(r for r in doc["rows"] if r["method"] == "fedstruct" and r["threat_model"] == "curious_clients")
    exceeded = {a["release"] for a in row["attacks"] if a["verdict"] == "release"}
    # measured on the quick settings: structure_link and nsf_link exceed their margin on the csbm graph
    assert exceeded, [(a["key"], a["verdict"], a["advantage"]) for a in row["attacks"]]
    curve = next(c for c in doc["curves"] if c["cell"] == row["cell"])
    assert exceeded <= set(curve["tags"])
    assert [p["value"] for p in curve["points"]] == [None, 2.0, 4.0, 8.0]
    assert all(p["epsilon"] is not None and p["accuracy"] is not None for p in curve["points"][1:])


def test_the_page_and_each_cells_audit_are_written(matrix: tuple[int, dict[str, Any], Path]) -> None:
    _, doc, out = matrix
    text = (out / "privacy-matrix.md").read_text()
    assert text.startswith("# Privacy matrix") and "Verdict counts (cells):" in text
    for r in doc["rows"]:
        assert (out / "cells" / r["cell"] / "audit.json").exists()
        assert f"| {r['label']} |" in text
