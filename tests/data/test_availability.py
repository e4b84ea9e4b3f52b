from pathlib import Path

import pytest

from securefg.data import available_datasets, format_available


def _tiny_tu(root: Path, name: str, labels: str = "0\n1\n") -> None:
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    (raw / f"{name}_A.txt").write_text("1, 2\n2, 1\n3, 4\n4, 3\n")
    (raw / f"{name}_graph_indicator.txt").write_text("1\n1\n2\n2\n")
    (raw / f"{name}_graph_labels.txt").write_text(labels)


def test_available_datasets_reports_ok_missing_and_error(tmp_path: Path) -> None:
    _tiny_tu(tmp_path, "MUTAG")
    _tiny_tu(tmp_path, "BZR", labels="not-a-number\n")
    status = {s.name: s for s in available_datasets(tmp_path)}
    assert status["MUTAG"].status == "ok"
    assert status["MUTAG"].counts == {"graphs": 2, "nodes": 4, "edges": 4, "features": 0, "classes": 2}
    assert status["BZR"].status == "error" and "ValueError" in status["BZR"].detail
    assert status["Cora"].status == "missing" and "ind.cora.x" in status["Cora"].detail
    assert len(status) == 24
    table = format_available(list(status.values()))
    assert "MUTAG" in table and "graphs=2" in table


def test_available_datasets_without_verification_only_checks_files(tmp_path: Path) -> None:
    _tiny_tu(tmp_path, "MUTAG", labels="garbage\n")
    (s,) = available_datasets(tmp_path, verify=False, names=["MUTAG"])
    assert s.status == "ok" and s.counts == {}


@pytest.mark.realdata
def test_real_root_lists_pubmed_and_amazon_ratings_as_missing(data_root: Path) -> None:
    status = {s.name: s.status for s in available_datasets(data_root, verify=False)}
    assert status["PubMed"] == "missing" and status["Amazon-ratings"] == "missing"
    assert sum(v == "ok" for v in status.values()) == 22


def test_available_datasets_filters_by_kind_and_the_cli_accepts_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from securefg.cli import main
    from securefg.errors import ConfigError

    _tiny_tu(tmp_path, "MUTAG")
    graph = available_datasets(tmp_path, verify=False, kind="graph")
    assert graph and {s.kind for s in graph} == {"graph"}
    assert {s.kind for s in available_datasets(tmp_path, verify=False, kind="node")} == {"node"}
    with pytest.raises(ConfigError, match="kind"):
        available_datasets(tmp_path, kind="edge")
    assert main(["datasets", "--data-root", str(tmp_path), "--kind", "graph"]) == 0
    out = capsys.readouterr().out
    assert "MUTAG" in out and "Cora" not in out


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["Cora", "MUTAG"])
def test_catalog_sizes_are_what_loading_finds(data_root: Path, name: str) -> None:
    """``securefg datasets`` prints the catalog's sizes without loading; they must be the loaded ones."""
    from securefg.data.catalog import STATS

    (status,) = available_datasets(data_root, names=[name])
    assert status.status == "ok" and status.counts == STATS[name]
