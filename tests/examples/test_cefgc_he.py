"""``examples/cefgc_he.py``, the README's main job: its fallback, its table and its files."""

import json

import pytest


@pytest.mark.slow
def test_without_mutag_it_says_so_and_reports_the_synthetic_run(load_example, tmp_path, capsys, monkeypatch) -> None:
    example = load_example("cefgc_he")
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    empty, out = tmp_path / "no_data", tmp_path / "out"
    empty.mkdir()
    code = example.main(["--data-root", str(empty), "--out", str(out), "--sequential",
                         "--diffusion-epochs", "3", "--fedavg-rounds", "3"])
    printed = capsys.readouterr().out

    assert code == 0  # HE and plaintext twin agree within 0.01
    assert "MUTAG is not available" in printed and "NOT MUTAG results" in printed
    report = json.loads((out / "results.json").read_text())
    assert "SYNTHETIC" in report["data"]
    rows = {r["run"]: r for r in report["rows"]}
    assert list(rows) == ["CeFGC+ (HE)", "CeFGC+ (plaintext)", "FedAvg (plaintext)"]
    assert rows["CeFGC+ (HE)"]["stack"] == "cefgc_plus" and rows["CeFGC+ (plaintext)"]["stack"] == "plaintext"
    for cefgc in ("CeFGC+ (HE)", "CeFGC+ (plaintext)"):
        assert rows[cefgc]["rounds"] == rows[cefgc]["flights"] == 3  # the paper's three rounds, one flight each
    assert rows["FedAvg (plaintext)"]["rounds"] == 3  # --fedavg-rounds, as asked
    assert rows["FedAvg (plaintext)"]["flights"] == 2 * 3  # a broadcast and an upload per round
    assert abs(rows["CeFGC+ (HE)"]["auc"] - rows["CeFGC+ (plaintext)"]["auc"]) == pytest.approx(
        report["he_vs_plaintext_auc_diff"])
    assert rows["CeFGC+ (HE)"]["MB_total"] > rows["CeFGC+ (plaintext)"]["MB_total"]  # ciphertexts are larger
    assert rows["CeFGC+ (HE)"]["MB_per_round"].startswith("R1 ")
    # Every run reports its own finish, so parallel progress lines can be told apart.
    for label in rows:
        assert f"   {label} done in " in printed
    # The partner-recovery attempt is measured from each client's own view of the HE run.
    leak = report["runs"][0]["leak"]
    assert set(leak) == {"client/0", "client/1", "client/2"}
    # A client paired with its mutual nearest peer gets that peer's model back up to CKKS noise.
    # groups of >= 3 (mix_peers=2, the default): no client recovers a peer (CKKS noise is ~1e-6)
    assert min(v["relative_error"] for v in leak.values()) > 1e-3
    table = (out / "table.md").read_text()
    assert "| CeFGC+ (HE) |" in table and "SYNTHETIC" in table
    assert (out / "auc.png").stat().st_size > 0


def test_a_misspelled_dataset_is_an_error_not_a_synthetic_stand_in(load_example, tmp_path, capsys) -> None:
    example = load_example("cefgc_he")
    code = example.main(["--dataset", "MUTAGG", "--data-root", str(tmp_path), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2
    assert "ConfigError" in captured.err and "MUTAGG" in captured.err
    assert "SYNTHETIC" not in captured.out and not (tmp_path / "out" / "results.json").exists()


@pytest.mark.parametrize("flags", [["--fedavg-rounds", "0"], ["--clients", "-1"], ["--diffusion-epochs", "x"]])
def test_bad_counts_are_refused_before_any_run(load_example, tmp_path, flags) -> None:
    example = load_example("cefgc_he")
    with pytest.raises(SystemExit) as stop:
        example.main([*flags, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert not any(tmp_path.iterdir())  # nothing was started


def test_a_single_client_is_refused_before_phase_one(load_example, tmp_path, capsys, monkeypatch) -> None:
    example = load_example("cefgc_he")
    monkeypatch.setenv("SECUREFG_CACHE", str(tmp_path / "cache"))
    code = example.main(["--dataset", "synthetic", "--clients", "1", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and "at least 2 clients" in captured.err
    assert "phase 1" not in captured.out
