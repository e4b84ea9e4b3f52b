"""Run one Optuna study over a method's search space and record every trial.

The sampler is TPE with a fixed seed (the same study twice draws the same trials), the pruner
Optuna's median rule over the running validation score, reported per round and seed (step
``seed_index * rounds + round``). The first trial is the values a run uses today (the preset's,
else the method's defaults: the paper's or the reference code's), enqueued so every study
starts from them. The record (:meth:`TuneSpec` inputs, each trial's parameters, per-seed
validation scores, state and seconds, the choice) is plain JSON.
"""

from __future__ import annotations

import datetime
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from securefg.errors import ConfigError, InvalidInputError
from securefg.tuning.objective import SeedScore, round_key, run_seed, trial_config
from securefg.tuning.spaces import OPTION_PREFIX, Param

#: What the objective is, in the record's words.
OBJECTIVE = ("mean over seeds of the best per-round validation score (the round the method reports; "
             "client-mean validation accuracy, FedSage: the broadcast model's owner validation); every "
             "result is stripped of test keys before it is read")


@dataclass
class TuneSpec:
    """One study.

    Args:
        base: The :class:`~securefg.run_config.RunConfig` every trial starts from.
        space (tuple[Param, ...]): The searched parameters.
        seeds (list[int]): Run seeds of each trial (the data seed stays ``base.data_seed``).
        trials (int): Most trials.
        timeout (float, optional): Stop starting trials after this many seconds. (default: none)
        sampler_seed (int): TPE's seed. (default: ``0``)
        command (str): The command line, for the record. (default: ``""``)
        run (Callable, optional): The runner (tests pass a wrapped ``run_experiment``).
        baseline (dict, optional): The first trial's values (default: :func:`baseline_values`).
        progress (bool): One stderr line per finished trial. (default: :obj:`False`)
        min_gain (float): The best trial replaces the first (today's values) only when its mean
            validation score is higher by more than this; two seeds of a 10-client Cora run move
            by a few tenths of a point, so a smaller lead is noise and today's values stay.
            (default: ``0.005``, half a point of accuracy)
    """

    base: Any
    space: tuple[Param, ...]
    seeds: list[int]
    trials: int
    timeout: float | None = None
    sampler_seed: int = 0
    command: str = ""
    run: Any = None
    baseline: dict[str, Any] = field(default_factory=dict)
    progress: bool = False
    min_gain: float = 0.005


def baseline_values(base: Any, space: tuple[Param, ...]) -> dict[str, Any]:
    """The values a run of ``base`` uses today for each searched key (preset, else the method's
    defaults), read from the built method: the first trial of every study."""
    from securefg.experiment import build_method

    _, method, _, _ = build_method(base)
    out: dict[str, Any] = {}
    for p in space:
        if p.name.startswith(OPTION_PREFIX):
            value = method.options[p.name[len(OPTION_PREFIX):]]
        else:
            value = getattr(method.config.train, p.name)
        out[p.name] = int(value) if p.integer else float(value)
    return out


def run_study(spec: TuneSpec) -> dict[str, Any]:
    """Run the study; return its record (JSON-ready). Imports Optuna."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rounds = int(spec.base.rounds)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=max(1, rounds // 2))
    sampler = optuna.samplers.TPESampler(seed=spec.sampler_seed)
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    baseline = spec.baseline or baseline_values(spec.base, spec.space)
    study.enqueue_trial(baseline)
    records: list[dict[str, Any]] = []

    def objective(trial: Any) -> float:
        params = {p.name: p.suggest(trial) for p in spec.space}
        rec: dict[str, Any] = {"number": trial.number, "params": params, "val_scores": [], "state": "RUNNING"}
        records.append(rec)
        t0 = time.perf_counter()
        done: list[SeedScore] = []
        try:
            for i, seed in enumerate(spec.seeds):
                def report(r: int, best: float, i: int = i) -> None:
                    trial.report((sum(s.best_val for s in done) + best) / (i + 1), step=i * rounds + r)
                    if trial.should_prune():
                        raise optuna.TrialPruned()

                done.append(run_seed(trial_config(spec.base, params, seed), report=report, run=spec.run))
                rec["val_scores"].append({"seed": seed, "best_val": done[-1].best_val,
                                          "rounds_run": done[-1].rounds_run})
        except optuna.TrialPruned:
            rec["state"] = "PRUNED"
            raise
        except InvalidInputError as exc:  # a diverging setting (NaN scores or messages): a failed trial
            rec["state"], rec["error"] = "FAIL", str(exc)
            raise
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 3)
            if spec.progress:
                print(f"trial {trial.number}: {rec['state'] if rec['state'] != 'RUNNING' else 'COMPLETE'} "
                      f"{[round(v['best_val'], 4) for v in rec['val_scores']]} {rec['seconds']:.0f} s {params}",
                      file=sys.stderr, flush=True)
        rec["state"] = "COMPLETE"
        rec["value"] = sum(s.best_val for s in done) / len(done)
        return float(rec["value"])

    t_start = time.perf_counter()
    study.optimize(objective, n_trials=spec.trials, timeout=spec.timeout, catch=(InvalidInputError,))
    complete = [r for r in records if r["state"] == "COMPLETE"]
    if not complete:
        raise ConfigError("no trial of the study completed; raise --trials or --timeout")
    best, selection = select(records, spec.min_gain)
    return {
        "method": spec.base.method, "dataset": spec.base.dataset, "partition": spec.base.partition,
        "clients": spec.base.clients, "rounds": rounds, "protocol": spec.base.protocol,
        "seeds": list(spec.seeds), "data_seed": spec.base.data_seed, "hidden": spec.base.hidden,
        "fixed_options": dict(spec.base.options),
        "objective": OBJECTIVE, "round_key": round_key(spec.base.method),
        "sampler": {"name": "TPESampler", "seed": spec.sampler_seed},
        "pruner": {"name": "MedianPruner", "n_startup_trials": 3, "n_warmup_steps": max(1, rounds // 2),
                   "step": "seed_index * rounds + round"},
        "search_space": [p.to_json() for p in spec.space],
        "baseline": baseline,
        "command": spec.command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "optuna_version": optuna.__version__,
        "seconds_total": round(time.perf_counter() - t_start, 1),
        "trials": records,
        "selection": selection,
        "chosen_trial": best["number"],
        "chosen": dict(best["params"]),
        "chosen_value": best["value"],
        "baseline_value": next((r.get("value") for r in records if r["number"] == 0), None),
    }


def select(records: list[dict[str, Any]], min_gain: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chosen trial and the rule's record: the best complete trial (ties: the earliest), unless
    it beats the first trial (today's values) by no more than ``min_gain``; then the first.

    Raises:
        ConfigError: No trial completed, or ``min_gain`` is negative or not finite.
    """
    if not (min_gain >= 0 and min_gain != float("inf")):
        raise ConfigError(f"--min-gain must be a finite number >= 0, got {min_gain!r}")
    complete = [r for r in records if r["state"] == "COMPLETE"]
    if not complete:
        raise ConfigError("no trial of the study completed; raise --trials or --timeout")
    best = max(complete, key=lambda r: (r["value"], -r["number"]))  # ties: the earliest trial
    first = next((r for r in complete if r["number"] == 0), None)
    gain = None if first is None else best["value"] - first["value"]
    kept = first is not None and best is not first and gain is not None and gain <= min_gain
    rule = (f"the best trial by mean validation, unless it beats trial 0 (today's values) by no more than "
            f"{min_gain}; then trial 0")
    selection = {"rule": rule, "min_gain": min_gain, "best_trial": best["number"], "gain_over_first": gain,
                 "kept_first": kept}
    return (first if kept else best), selection


__all__ = ["OBJECTIVE", "TuneSpec", "baseline_values", "run_study", "select"]
