"""``securefg datasets`` answers from the files and the catalog in a second; ``--verify`` loads, quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from securefg.cli import main
from securefg.data.catalog import CATALOG, STATS

REPO = Path(__file__).resolve().parents[2]


def _tiny_tu(root: Path, name: str) -> None:
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    (raw / f"{name}_A.txt").write_text("1, 2\n2, 1\n3, 4\n4, 3\n")
    (raw / f"{name}_graph_indicator.txt").write_text("1\n1\n2\n2\n")
    (raw / f"{name}_graph_labels.txt").write_text("0\n1\n")


def test_the_listing_loads_nothing_and_prints_catalog_sizes(tmp_path: Path) -> None:
    _tiny_tu(tmp_path, "MUTAG")
    probe = ("import sys; from securefg.cli import main; code = main(sys.argv[1:]); "
             "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe, "datasets", "--data-root", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "no torch" and f"data root: {tmp_path}" in lines[0]
    mutag = next(x for x in lines if x.startswith("MUTAG "))
    assert "present" in mutag and "188 graphs, 3,371 nodes" in mutag  # the catalog's, not the tiny files'
    assert any(x.startswith("Cora ") and "missing" in x and "ind.cora.x" in x for x in lines)
    assert "1 of 24 present" in done.stdout and done.stderr == ""


def test_verify_loads_and_counts_without_pygs_progress_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    _tiny_tu(tmp_path / "root", "MUTAG")
    assert main(["datasets", "--data-root", str(tmp_path / "root"), "--kind", "graph", "--verify"]) == 0
    out, err = capfd.readouterr()
    mutag = next(x for x in out.splitlines() if x.startswith("MUTAG "))
    assert "loaded" in mutag and "2 graphs, 4 nodes, 4 edges" in mutag and "Cora" not in out
    assert "Processing" not in out + err and "Done!" not in out + err


def test_the_catalog_has_a_size_for_every_dataset() -> None:
    assert set(STATS) == set(CATALOG)
    for name, stats in STATS.items():
        keys = {"nodes", "edges", "features", "classes"} | ({"graphs"} if CATALOG[name].kind == "graph" else set())
        assert set(stats) == keys, name
