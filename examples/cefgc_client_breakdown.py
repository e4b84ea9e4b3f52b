"""Which clients' models decide a dataset's score under CeFGC's single average (multi-dataset settings).

In the across-domain setting every client trains every dataset's head, most of them only on
synthetic graphs of that dataset. This script runs one CeFGC-family cell in-process (the code path
of ``securefg run``), then scores on the global test set, per dataset: each client's own model
(before the average), the average of the clients holding real graphs of each dataset, the average
of the others, the average of all (the run's global model), and the average whose heads take only
the clients holding real graphs of their dataset (trunk over all). It is an experimenter's audit:
it reads every client's model, which no party of the protocol sees.

    python examples/cefgc_client_breakdown.py --method cefgc_star --dataset Mix --seed 1 \
        --generator-cache /work/runs/repro/reproduce_cefgc/generators
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from securefg.commands.run_cmd import parse_options
from securefg.experiment import RunConfig, build_method, run_experiment
from securefg.methods.head_owners import OWNERS_KEY, owned_groups, owner_mean, owner_payload
from securefg.methods.label_groups import LabelGroups
from securefg.methods.training import load_state, state_of

State = dict[str, torch.Tensor]


def uniform_mean(states: Mapping[str, State], ids: Sequence[str]) -> State:
    """The plain mean of the listed clients' states (CeFGC's uniform FedAvg weights)."""
    if not ids:
        raise ValueError("no client to average")
    first = states[ids[0]]
    return {k: (sum(states[c][k].double() for c in ids) / len(ids)).to(first[k].dtype) for k in first}


def real_owner_mean(states: Mapping[str, State], real: Mapping[str, torch.Tensor], groups: LabelGroups) -> State:
    """Trunk over every client; each dataset head over the clients holding real graphs of it."""
    total: dict[str, torch.Tensor] | None = None
    for c, st in states.items():
        payload, side = owner_payload(st, groups, real[c])
        payload[OWNERS_KEY] = side[OWNERS_KEY]
        total = payload if total is None else {k: total[k] + payload[k] for k in total}
    assert total is not None
    like = next(iter(states.values()))  # owner_mean works in float64; give back the models' dtypes
    return {k: v.to(like[k].dtype) for k, v in owner_mean(total, groups).items()}


def breakdown(method: Any, fed: Any) -> dict[str, Any]:
    """Per-dataset test AUCs of every client's model and of the subset averages (see the module doc)."""
    groups = method.task.label_groups
    if groups is None or len(groups.names) < 2:
        raise ValueError("the breakdown needs a setting of several datasets, one head each (Mix, Protein, A+B)")
    ids = list(fed.client_ids)
    states = {c: state_of(fed.parties[c].state["model"]) for c in ids}
    real = {c: owned_groups(groups, fed.parties[c].state["data"]["train"]) for c in ids}

    def score(state: State) -> dict[str, float]:
        model = method.make_model()
        load_state(model, state)
        return {k: round(float(v), 4) for k, v in method.score_graphs(model, method.task.global_test)["auc_by_dataset"].items()}

    out: dict[str, Any] = {"clients": {}, "averages": {}}
    for c in ids:
        out["clients"][c] = {"real_data_of": [n for n, o in zip(groups.names, real[c].tolist()) if o], "auc": score(states[c])}
    holders = {name: [c for c in ids if bool(real[c][g])] for g, name in enumerate(groups.names)}
    subsets = [(f"holders of {n}", h) for n, h in holders.items()]
    subsets += [(f"all but holders of {n}", [c for c in ids if c not in h]) for n, h in holders.items()]
    seen: set[frozenset[str]] = set()
    for label, subset in subsets:
        if subset and frozenset(subset) not in seen:  # with two datasets, "all but A" is "holders of B"
            seen.add(frozenset(subset))
            out["averages"][label] = score(uniform_mean(states, subset))
    out["averages"]["all clients (the run's global model)"] = score(uniform_mean(states, ids))
    out["averages"]["heads over real-data holders, trunk over all"] = score(real_owner_mean(states, real, groups))
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="cefgc_star", help="cefgc, cefgc_star, cefgc_plus or cefgc_star_plus")
    p.add_argument("--dataset", default="Mix", help="a multi-dataset setting (Mix, Protein, Social, A+B)")
    p.add_argument("--clients", type=int, default=3, help="clients per dataset")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None, help="dataset root (default: $SECUREFG_DATA)")
    p.add_argument("--generator-cache", default=None, help="folder of cached CeFGC generators (reused, filled)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a method option, as securefg run")
    p.add_argument("--out", default=None, help="write the run's result.json and breakdown.json here")
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv)
    options = parse_options(args.option)
    if args.generator_cache:
        options["generator_cache"] = args.generator_cache
    cfg = RunConfig(method=args.method, dataset=args.dataset, clients=args.clients, rounds=1, seed=args.seed,
                    data_root=args.data_root, device=args.device, out=args.out, options=options, progress=False)
    result = run_experiment(cfg)
    _, method, _, _ = build_method(cfg)  # same seed, same task: its scorer and global test set
    report = {"run_auc_by_dataset": result["metrics"].get("test_auc_by_dataset"), **breakdown(method, result["_federation"])}
    for c, row in report["clients"].items():
        print(f"{c} (real graphs of {', '.join(row['real_data_of'])}): {row['auc']}")
    for name, auc in report["averages"].items():
        print(f"{name}: {auc}")
    if args.out:
        Path(args.out, "breakdown.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
