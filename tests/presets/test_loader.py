"""Preset files: the shipped ones validate, bad ones fail with every problem named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from securefg.errors import ConfigError
from securefg.presets import load_presets, preset_for
from securefg.presets.loader import presets_dir

SHIPPED = Path(__file__).resolve().parents[2] / "securefg" / "presets"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SECUREFG_PRESETS", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", ["fedpub", "fedsheafhn", "fedstruct", "fedsage"])
def test_every_shipped_file_validates_and_names_its_source(name: str) -> None:
    tables = load_presets(SHIPPED / f"{name}.toml", method=name)
    assert tables
    for preset in tables.values():
        assert preset.source in ("paper", "reference code") or preset.study is not None
        if preset.study is not None:
            assert (SHIPPED / preset.study).is_file()
        else:
            assert preset.reference


def test_lookup_uses_the_default_partition_the_catalog_spelling_and_the_alias() -> None:
    assert presets_dir() == SHIPPED or presets_dir().name  # SECUREFG_PRESETS unset in CI
    assert preset_for("fedpub", "computers", None).local_epochs == 3  # metis, the node default; paper E = 3
    assert preset_for("fedpub", "Photo", "metis_overlap").local_epochs == 2
    assert preset_for("fedsage_plus", "coauthor-cs", "louvain").table == "CS.louvain"  # fedsage's file
    assert preset_for("fedstruct", "Cora", None) is None  # FedStruct's tables are for its random/kmeans splits
    assert preset_for("fedavg", "Cora", None) is None  # no file


def test_fedsheafhn_computers_comes_from_its_validation_study_not_the_test_picked_values() -> None:
    p = preset_for("fedsheafhn", "Computers", "metis")
    # local epochs from the second study (searched past the first one's edge), the rest from the first
    assert p.source == "study:studies/fedsheafhn_Computers_metis_epochs.json"
    assert "not searched, kept from study:studies/fedsheafhn_Computers_metis.json" in p.reference
    epochs = json.loads((SHIPPED / "studies" / "fedsheafhn_Computers_metis_epochs.json").read_text())
    assert [s["name"] for s in epochs["search_space"]] == ["local_epochs"]
    assert epochs["chosen"]["local_epochs"] == p.local_epochs
    study = json.loads((SHIPPED / "studies" / "fedsheafhn_Computers_metis.json").read_text())
    best = max((t for t in study["trials"] if t["state"] == "COMPLETE"), key=lambda t: t["value"])
    assert best["params"]["local_epochs"] == epochs["baseline"]["local_epochs"]  # the second study started there
    assert (best["params"]["lr"], best["params"]["weight_decay"], best["params"]["options.hn_lr"]) == (
        p.lr, p.weight_decay, p.options["hn_lr"])
    assert (p.weight_decay, p.options["generated_wd"], p.options["hn_lr"]) != (1e-4, 1e-4, 0.003)  # the test-picked ones
    overlap = preset_for("fedsheafhn", "Computers", "metis_overlap")  # no study yet: the code's values
    assert (overlap.lr, overlap.weight_decay, overlap.local_epochs) == (0.02, 5e-4, 5)
    assert overlap.source == "reference code" and "test scores" in (overlap.note or "")


def test_a_bad_file_lists_every_problem(folder: Path) -> None:
    (folder / "fedstruct.toml").write_text(
        '[Cora.random]\nsource = "paper"\nlr = "fast"\nlocal_epochs = 0\nbatch = 3\n'
        '[Cora.random.options]\nnope = 1\ndropout = "high"\n'
        '[Cora.kmeans]\nsource = "study:studies/missing.json"\n'
        '[Cora.louvain]\nsource = "blog"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        preset_for("fedstruct", "Cora", "random")
    text = str(err.value)
    for part in ("unknown key 'batch'", "'lr' must be a finite number > 0, got 'fast'",
                 "'local_epochs' must be an integer >= 1, got 0", "unknown option 'nope'",
                 "option 'dropout' must be a float", "needs 'reference'",
                 "study file 'studies/missing.json' not found", "'source' must be one of"):
        assert part in text, part
    assert str(folder / "fedstruct.toml") in text


def test_a_dataset_key_that_is_not_a_table_of_partitions_is_refused(folder: Path) -> None:
    (folder / "fedpub.toml").write_text('[Cora]\nsource = "paper"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[Cora\]: must hold one table per partition"):
        preset_for("fedpub", "Cora", None)


def test_a_study_source_reads_when_the_study_file_exists(folder: Path) -> None:
    (folder / "studies").mkdir()
    (folder / "studies" / "s.json").write_text("{}", encoding="utf-8")
    (folder / "fedpub.toml").write_text('[Cora.metis]\nsource = "study:studies/s.json"\nlr = 0.005\n', encoding="utf-8")
    p = preset_for("fedpub", "cora", "metis")
    assert (p.lr, p.study, p.table) == (0.005, "studies/s.json", "Cora.metis")
