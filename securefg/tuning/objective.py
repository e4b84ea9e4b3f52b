"""Score one trial from validation data alone.

Why a module of its own: the guarantee ``securefg tune`` makes (no test score steers a search) is
kept in one place. Every result or history row the objective looks at first passes through
:func:`validation_only`, which drops every key naming a test score, recursively; the score is
then read from what is left. ``tests/tuning`` poisons the test labels and checks the study does
not move.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from securefg.errors import InvalidInputError
from securefg.tuning.spaces import OPTION_PREFIX

#: The per-round validation score each method selects its reported round by (``summarize``):
#: FedSage(+) picks the broadcast model the owners validate best; the others the client mean.
ROUND_KEYS: dict[str, str] = {"fedsage": "mean_global_val", "fedsage_plus": "mean_global_val"}
DEFAULT_ROUND_KEY = "mean_val"


def validation_only(obj: Any) -> Any:
    """``obj`` without any mapping key that names a test score (``test_acc``, ``mean_test``,
    ``global_graph_test_acc``, ``majority_baseline_test_acc``, ...), at any depth."""
    if isinstance(obj, Mapping):
        return {k: validation_only(v) for k, v in obj.items() if "test" not in str(k).lower()}
    if isinstance(obj, (list, tuple)):
        return [validation_only(v) for v in obj]
    return obj


def round_key(method: str) -> str:
    """The history key holding ``method``'s per-round validation score."""
    return ROUND_KEYS.get(method.lower().replace("-", "_"), DEFAULT_ROUND_KEY)


def trial_config(base: Any, params: Mapping[str, Any], seed: int) -> Any:
    """``base`` (a :class:`~securefg.run_config.RunConfig`) with every tuned key set explicitly and
    the run seed ``seed``: explicit values beat any preset, so a trial runs exactly its values."""
    fields = {k: v for k, v in params.items() if not k.startswith(OPTION_PREFIX)}
    options = {**base.options, **{k[len(OPTION_PREFIX):]: v for k, v in params.items() if k.startswith(OPTION_PREFIX)}}
    return replace(base, seed=seed, options=options, out=None, progress=False, **fields)


@dataclass
class SeedScore:
    """One seed's validation outcome of a trial."""

    seed: int
    best_val: float
    rounds_run: int
    seconds: float


def run_seed(cfg: Any, *, report: Callable[[int, float], None] | None = None,
             run: Callable[..., dict[str, Any]] | None = None) -> SeedScore:
    """Run ``cfg`` once; its score is the best per-round validation score (the round the method
    reports), read from validation-only rows.

    Args:
        cfg: The trial's :class:`~securefg.run_config.RunConfig`.
        report (Callable[[int, float], None], optional): Called after each round with the round
            and the best validation score so far (a pruner raises from here). (default: :obj:`None`)
        run (Callable, optional): The runner (default: :func:`securefg.experiment.run_experiment`).

    Raises:
        InvalidInputError: No round produced a finite validation score.
    """
    if run is None:
        from securefg.experiment import run_experiment as run
    key = round_key(cfg.method)
    best = -math.inf
    seen = 0

    def on_round(r: int, row: dict[str, Any]) -> None:
        nonlocal best, seen
        value = validation_only(row).get(key)
        seen += 1
        if isinstance(value, float) and math.isfinite(value):
            best = max(best, value)
        if report is not None and math.isfinite(best):
            report(r, best)

    t0 = time.perf_counter()
    result = validation_only(run(cfg, on_round=on_round))
    summary_best = result.get("metrics", {}).get("best_val")
    if isinstance(summary_best, float) and math.isfinite(summary_best):
        best = max(best, summary_best)  # the same round's score; kept in case a method scores after the loop
    if not math.isfinite(best):
        raise InvalidInputError(f"{cfg.method} on {cfg.dataset} (seed {cfg.seed}) produced no finite validation "
                                f"score ({key!r} per round); nothing to tune on")
    return SeedScore(seed=cfg.seed, best_val=float(best), rounds_run=seen, seconds=time.perf_counter() - t0)


__all__ = ["DEFAULT_ROUND_KEY", "ROUND_KEYS", "SeedScore", "round_key", "run_seed", "trial_config", "validation_only"]
