"""Several graph datasets in one run get one head per dataset unless told otherwise."""

from pathlib import Path

import pytest

from securefg.errors import ConfigError
from securefg.experiment import RunConfig, run_experiment
from securefg.experiment_data import build_task


def _cfg(root: Path, tmp_path: Path, **kw) -> RunConfig:
    base = {"method": "fedavg", "dataset": "MUTAG+PTC_MR", "clients": 2, "rounds": 3, "seed": 0, "data_root": str(root),
                "protocol": "plaintext", "progress": False, "device": "cpu", "out": str(tmp_path)}
    return RunConfig(**{**base, **kw})


@pytest.mark.realdata
def test_multi_dataset_task_has_per_dataset_heads_by_default(data_root: Path, tmp_path: Path) -> None:
    task, info = build_task(_cfg(data_root, tmp_path))
    assert task.label_groups is not None and task.label_groups.bounds == ((0, 2), (2, 4))
    assert info["heads"] == "dataset" and info["head_average"] == "owners" and task.label_groups.owner_average
    everyone, info = build_task(_cfg(data_root, tmp_path, options={"head_average": "all"}))
    assert everyone.label_groups is not None and not everyone.label_groups.owner_average and info["head_average"] == "all"
    with pytest.raises(ConfigError, match="unknown head_average"):
        build_task(_cfg(data_root, tmp_path, options={"head_average": "some"}))
    with pytest.raises(ConfigError, match="per-dataset heads only"):
        build_task(_cfg(data_root, tmp_path, dataset="MUTAG", options={"head_average": "all"}))
    shared, info = build_task(_cfg(data_root, tmp_path, options={"heads": "shared"}))
    assert shared.label_groups is None and info["heads"] == "shared"
    single, info = build_task(_cfg(data_root, tmp_path, dataset="MUTAG"))
    assert single.label_groups is None and info["heads"] == "single"
    with pytest.raises(ConfigError, match="unknown heads mode"):
        build_task(_cfg(data_root, tmp_path, options={"heads": "per-client"}))


@pytest.mark.realdata
def test_fedavg_runs_across_datasets_with_per_dataset_heads(data_root: Path, tmp_path: Path) -> None:
    res = run_experiment(_cfg(data_root, tmp_path))
    assert res["data"]["heads"] == "dataset"
    by_dataset = res["metrics"]["test_auc_by_dataset"]
    assert set(by_dataset) == {"MUTAG", "PTC_MR"}
    assert res["metrics"]["test_auc"] == pytest.approx(sum(by_dataset.values()) / 2)


@pytest.mark.realdata
def test_cefgc_trains_other_datasets_heads_on_their_synthetic_graphs(data_root: Path, tmp_path: Path) -> None:
    res = run_experiment(_cfg(data_root, tmp_path, method="cefgc", rounds=1, options={
        "diffusion_epochs": 2, "langevin_steps": 2, "gnn_epochs": 3, "max_nodes": 20}))
    assert set(res["metrics"]["test_auc_by_dataset"]) == {"MUTAG", "PTC_MR"}
    # every client draws synthetic graphs of both datasets (MUTAG classes 0-1, PTC_MR 2-3)
    for info in res["cefgc"]["clients"].values():
        drawn = {u["class"] for u in info["units"] if u["graphs"] > 0}
        assert drawn & {0, 1} and drawn & {2, 3}
        assert info["heads_trained"] == ["MUTAG", "PTC_MR"]  # so R3 averages both heads over every client
