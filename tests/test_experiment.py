"""The ``securefg run`` contract: result.json keys, data seed vs run seed, typed config errors."""

import json

import pytest
import torch

from securefg.errors import ConfigError
from securefg.experiment import RunConfig, run_experiment
from securefg.experiment_data import build_task


def _cfg(tmp_path, **kw):
    base = {"method": "fedavg", "dataset": "csbm", "partition": "metis", "clients": 3, "rounds": 2, "protocol": "plaintext",
                "seed": 0, "out": str(tmp_path), "progress": False, "device": "cpu"}
    return RunConfig(**{**base, **kw})


def test_result_json_has_the_cli_contract(tmp_path):
    run_experiment(_cfg(tmp_path))
    res = json.loads((tmp_path / "result.json").read_text())
    for key in ("method", "dataset", "partition", "clients", "protocol", "seed", "data_seed", "rounds",
                "metrics", "bytes_total", "bytes_by_tag", "wall_seconds"):
        assert key in res, key
    assert res["clients"] == 3 and res["rounds"] == 2 and res["data_seed"] == 0
    assert 0.0 <= res["metrics"]["test_acc"] <= 1.0 and len(res["metrics"]["per_client"]) == 3
    assert set(res["bytes_by_tag"]) == {"fedavg/model", "fedavg/update", "fedavg/metrics"}
    assert res["bytes_total"] == sum(res["bytes_by_tag"].values())


def test_data_seed_fixes_split_and_partition_independently_of_the_run_seed(tmp_path):
    fixed = [build_task(_cfg(tmp_path, seed=s, data_seed=7))[0] for s in (0, 1)]
    own = build_task(_cfg(tmp_path, seed=7))[0]
    other = build_task(_cfg(tmp_path, seed=0))[0]
    parts = [t.extras["partition"].index for t in (*fixed, own, other)]
    assert torch.equal(parts[0], parts[1]) and torch.equal(parts[0], parts[2])
    masks = [torch.cat([c.train_mask for c in t.clients]) for t in (*fixed, own, other)]
    assert torch.equal(masks[0], masks[2])
    assert not torch.equal(parts[0], parts[3]) and not torch.equal(masks[0], masks[3])


def test_unknown_partition_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown node partition"):
        run_experiment(_cfg(tmp_path, partition="stripes"))


def test_unknown_pooling_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="pooling must be one of"):
        run_experiment(_cfg(tmp_path, dataset="synthetic-graphs", partition=None, options={"pooling": "max"}))


def test_partition_command_parses_the_split_like_run(capsys):
    from securefg.cli import main

    assert main(["partition", "--dataset", "csbm", "--clients", "3", "--split", "0.2,0.4,0.4"]) == 0
    assert "clients" in capsys.readouterr().out
    assert main(["partition", "--dataset", "csbm", "--split", "0.5,0.5"]) == 2
    assert "three non-negative ratios" in capsys.readouterr().err


@pytest.mark.parametrize(("field", "value"), [
    ("rounds", 0), ("clients", 0), ("batch_size", 0), ("local_epochs", 0), ("hidden", -1),
    ("checkpoint_every", -2), ("lr", 0.0), ("lr", float("nan")), ("weight_decay", -1e-4), ("prox_mu", float("inf")),
])
def test_settings_that_would_run_nothing_are_refused_before_any_data_loads(field, value):
    with pytest.raises(ConfigError, match=field):
        RunConfig(method="fedavg", dataset="synthetic-graphs", **{field: value})


@pytest.mark.parametrize("text", ["0.5,nan,0.5", "inf,0,0", "0.5,0.6,-0.1", "a,b,c", "0.5,0.5"])
def test_split_ratios_must_be_three_finite_non_negative_numbers_summing_to_one(text):
    from securefg.commands.run_cmd import parse_split

    with pytest.raises(ConfigError, match="--split"):
        parse_split(text)
    assert parse_split("0.2,0.4,0.4") == (0.2, 0.4, 0.4)
