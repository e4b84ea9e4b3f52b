"""The search spaces, the validation-only view and a trial's configuration."""

from __future__ import annotations

import pytest

from securefg.errors import ConfigError, InvalidInputError
from securefg.run_config import RunConfig
from securefg.tuning.objective import round_key, run_seed, trial_config, validation_only
from securefg.tuning.spaces import SPACES, space_for


def test_validation_only_drops_every_test_key_at_any_depth() -> None:
    row = {"mean_val": 0.5, "mean_test": 0.9, "per_client": {"c0": {"val_acc": 0.4, "test_acc": 1.0}},
           "global_graph_test_acc": 0.8, "majority_baseline_test_acc": 0.3, "history": [{"mean_test": 1, "round": 0}]}
    assert validation_only(row) == {"mean_val": 0.5, "per_client": {"c0": {"val_acc": 0.4}}, "history": [{"round": 0}]}


def test_trial_config_sets_every_tuned_key_explicitly() -> None:
    base = RunConfig(method="fedstruct", dataset="csbm", options={"nsf": "degree"})
    cfg = trial_config(base, {"lr": 0.01, "weight_decay": 1e-4, "options.dropout": 0.2}, seed=3)
    assert (cfg.lr, cfg.weight_decay, cfg.seed, cfg.out, cfg.progress) == (0.01, 1e-4, 3, None, False)
    assert cfg.options == {"nsf": "degree", "dropout": 0.2} and base.options == {"nsf": "degree"}


def test_spaces_cover_the_tuned_methods_and_their_options_exist() -> None:
    from securefg.methods.base import method_class

    assert set(SPACES) == {"fedpub", "fedsheafhn", "fedstruct", "fedsage", "fedsage_plus"}
    for method, space in SPACES.items():
        options = method_class(method).option_defaults
        for p in space:
            assert p.low < p.high
            if p.name.startswith("options."):
                assert p.name[len("options."):] in options, (method, p.name)
    assert [p.name for p in space_for("fedstruct", ["lr"])] == ["lr"]
    with pytest.raises(ConfigError, match="not in fedstruct's search space"):
        space_for("fedstruct", ["options.tau"])
    with pytest.raises(ConfigError, match="no search space for 'fedavg'"):
        space_for("fedavg")
    assert round_key("fedsage_plus") == "mean_global_val" and round_key("fedpub") == "mean_val"


def test_a_run_without_a_finite_validation_score_is_refused() -> None:
    def run(cfg: RunConfig, *, on_round) -> dict:  # type: ignore[no-untyped-def]
        on_round(0, {"mean_val": float("nan"), "mean_test": 0.9})
        return {"metrics": {"test_acc": 0.9}}

    with pytest.raises(InvalidInputError, match="no finite validation score"):
        run_seed(RunConfig(method="fedpub", dataset="csbm"), run=run)


def test_run_seed_reads_the_best_round_of_validation_rows_only() -> None:
    seen: list[tuple[int, float]] = []

    def run(cfg: RunConfig, *, on_round) -> dict:  # type: ignore[no-untyped-def]
        for r, (v, t) in enumerate([(0.2, 0.9), (0.5, 0.1), (0.4, 0.99)]):
            on_round(r, {"mean_val": v, "mean_test": t})
        return {"metrics": {"best_val": 0.5, "test_acc": 0.1}}

    score = run_seed(RunConfig(method="fedpub", dataset="csbm", seed=4), run=run, report=lambda r, b: seen.append((r, b)))
    assert (score.seed, score.best_val, score.rounds_run) == (4, 0.5, 3)
    assert seen == [(0, 0.2), (1, 0.5), (2, 0.5)]
