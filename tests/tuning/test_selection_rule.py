"""The tuner keeps today's values (trial 0) unless a trial beats them by more than ``--min-gain``."""

from __future__ import annotations

import pytest

from securefg.errors import ConfigError
from securefg.tuning.study import select


def _trials(*values: float | None) -> list[dict]:
    return [{"number": i, "state": "PRUNED" if v is None else "COMPLETE", "params": {"lr": i}, "value": v}
            for i, v in enumerate(values)]


def test_a_lead_within_the_noise_keeps_the_first_trial() -> None:
    chosen, sel = select(_trials(0.7915, 0.7934, 0.7934, None), 0.005)
    assert chosen["number"] == 0 and sel["kept_first"] and sel["best_trial"] == 1
    assert sel["gain_over_first"] == pytest.approx(0.0019)


def test_a_clear_lead_replaces_the_first_trial() -> None:
    chosen, sel = select(_trials(0.70, 0.72, 0.71), 0.005)
    assert chosen["number"] == 1 and not sel["kept_first"]
    chosen, _ = select(_trials(0.7915, 0.7934), 0.0)  # --min-gain 0: the plain best
    assert chosen["number"] == 1


def test_a_pruned_first_trial_or_bad_threshold() -> None:
    chosen, sel = select(_trials(None, 0.70, 0.72), 0.005)
    assert chosen["number"] == 2 and not sel["kept_first"]
    with pytest.raises(ConfigError, match="min-gain"):
        select(_trials(0.7), -0.1)
    with pytest.raises(ConfigError, match="no trial"):
        select(_trials(None), 0.005)
