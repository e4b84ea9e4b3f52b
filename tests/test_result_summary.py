"""``securefg summarize``: grouping runs by configuration and averaging over seeds."""

import json
from pathlib import Path

import pytest

from securefg.cli import main
from securefg.errors import InvalidInputError
from securefg.result_summary import config_label, find_results, load_result, summarize


def _write(root: Path, name: str, seed: int, auc: float, *, method: str = "cefgc", out: str = "x", **options) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    cfg = {"method": method, "dataset": "MUTAG", "clients": 3, "rounds": 1, "seed": seed, "out": out,
           "data_root": "/data", "device": "auto", "options": {"generator_cache": f"/c{seed}", **options}}
    res = {"config": cfg, "metrics": {"test_auc": auc, "final_test_auc": auc - 0.1}, "communication_rounds": 9,
           "bytes_total": 2_000_000, "wall_seconds": 10.0}
    (folder / "result.json").write_text(json.dumps(res))
    return folder / "result.json"


def test_seeds_of_one_configuration_form_one_row(tmp_path: Path) -> None:
    for seed, auc in enumerate((0.9, 0.8, 0.7)):
        _write(tmp_path, f"a{seed}", seed, auc, out=f"o{seed}")
    _write(tmp_path, "b0", 0, 0.5, synthetic_ratio=0.5)
    paths = find_results([tmp_path])
    rows = summarize([load_result(p) for p in paths], sources=paths)
    assert [r["runs"] for r in rows] == [3, 1]
    assert rows[0]["mean"] == pytest.approx(0.8) and rows[0]["std"] == pytest.approx(0.1)
    assert rows[0]["final_mean"] == pytest.approx(0.7) and rows[0]["mb_total"] == pytest.approx(2.0)
    assert rows[0]["config"] == "cefgc MUTAG clients=3 rounds=1"  # cache, out, seed, root left out
    assert rows[1]["config"].endswith("synthetic_ratio=0.5")


def test_duplicate_seeds_and_missing_metrics_name_the_files(tmp_path: Path) -> None:
    a = _write(tmp_path, "a", 0, 0.9)
    b = _write(tmp_path, "b", 0, 0.9)
    with pytest.raises(InvalidInputError, match="two runs .* seed 0"):
        summarize([load_result(a), load_result(b)], sources=[a, b])
    with pytest.raises(InvalidInputError, match="no numeric metric 'test_acc'"):
        summarize([load_result(a)], metric="test_acc", sources=[a])


def test_bad_paths_and_files_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such result"):
        find_results([tmp_path / "missing"])
    with pytest.raises(InvalidInputError, match="no result.json"):
        find_results([tmp_path])
    bad = tmp_path / "result.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="not a readable"):
        load_result(bad)
    bad.write_text(json.dumps({"metrics": {}}))
    with pytest.raises(InvalidInputError, match="lacks"):
        load_result(bad)


def test_cli_prints_a_markdown_table_and_exits_2_on_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "a", 0, 0.9)
    _write(tmp_path, "b", 1, 0.7)
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| cefgc MUTAG clients=3 rounds=1 | 2 | 0.800 ± 0.141 | 0.900, 0.700 |" in out
    assert main(["summarize", str(tmp_path / "nothing")]) == 2


def test_config_label_keeps_settings_that_change_the_run() -> None:
    label = config_label({"method": "fedavg", "dataset": "PROTEINS", "rounds": 200, "protocol": "plaintext",
                          "seed": 4, "options": {"pooling": "mean"}})
    assert label == "fedavg PROTEINS protocol=plaintext rounds=200 pooling=mean"


def test_a_non_default_zero_or_false_setting_still_splits_groups() -> None:
    # data_seed 0 fixes the split (default: None, i.e. the run seed): not the same configuration
    base = {"method": "fedavg", "dataset": "MUTAG", "rounds": 200, "seed": 1}
    assert config_label({**base, "data_seed": 0}) != config_label(base)
    assert "data_seed=0" in config_label({**base, "data_seed": 0})


def test_python_dash_m_runs_the_same_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "securefg", "summarize", str(tmp_path / "none")], cwd=root,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and "none" in out.stderr


def _node_result(root: Path, name: str, seed: int, acc: float) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    cfg = {"method": "fedavg", "dataset": "Cora", "rounds": 5, "seed": seed}
    res = {"config": cfg, "metrics": {"test_acc": acc, "final_test": acc - 0.1, "best_round": 2},
           "communication_rounds": 10, "bytes_total": 1_000_000, "wall_seconds": 2.0}
    (folder / "result.json").write_text(json.dumps(res))


def test_without_metric_each_run_is_judged_by_its_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Node runs report test_acc, graph runs test_auc: summarize picks each, and says which."""
    _node_result(tmp_path / "node", "s0", 0, 0.6)
    _node_result(tmp_path / "node", "s1", 1, 0.8)
    assert main(["summarize", str(tmp_path / "node")]) == 0
    out = capsys.readouterr().out
    assert "| config | runs | test_acc mean ± std |" in out
    assert "| fedavg Cora rounds=5 | 2 | 0.700 ± 0.141 | 0.600, 0.800 | 0.600 ± 0.141 |" in out  # final_test
    _write(tmp_path / "graph", "a", 0, 0.9)
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| config | metric | runs | score mean ± std |" in out
    assert "| fedavg Cora rounds=5 | test_acc | 2 |" in out and "| cefgc MUTAG clients=3 rounds=1 | test_auc | 1 |" in out
    assert main(["summarize", str(tmp_path / "node"), "--metric", "test_auc"]) == 2
    assert "has no numeric metric 'test_auc'; its metrics: ['best_round', 'final_test', 'test_acc']" in capsys.readouterr().err
