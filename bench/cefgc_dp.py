"""CeFGC's graph-level DP option: utility and membership-attack AUC per epsilon (docs/privacy.md).

Run: ``python bench/cefgc_dp.py [--method cefgc] [--dataset MUTAG] [--clients 3] [--seed 0]
[--epsilons 0,16,4,1] [--out DIR]``. For every epsilon (0 = DP off) it runs the method on its
default (protected) stack with ``--option dp_epsilon=<eps>`` and plays the curious-clients
threat model's ``diffusion_membership`` attack (client 0 against the other clients' relayed
generators, reference model on the public auxiliary graphs) on that run. Prints one markdown row
per epsilon: the accountant's epsilon (``result.json``'s ``privacy``), global test AUC and
accuracy, their drop against DP off, and the attack's AUC (and its side-knowledge-only
baseline, the reference model alone, when the attack reports one).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.attacks.harness import AttackHarness
from securefg.audit.auditor import prepare
from securefg.audit.threat_model import ThreatModel
from securefg.experiment import RunConfig, resolve_stack, run_experiment
from securefg.experiment_data import build_task

ATTACK = "diffusion_membership"


def membership_threat_model() -> ThreatModel:
    """``curious_clients`` with only the membership attack, without the auditor's DP counterfactual."""
    tm = ThreatModel.load("curious_clients")
    spec = next(a for a in tm.attacks if a.attack == ATTACK)
    params = {k: v for k, v in spec.params.items() if k not in ("dp_noise_multipliers", "dp_histogram_sigma")}
    return ThreatModel.from_dict({
        "name": "curious_clients_membership", "description": tm.description,
        "adversary": {"parties": list(tm.adversary.parties), "behaviour": tm.adversary.behaviour.value},
        "side_knowledge": {"target_features": tm.side_knowledge.target_features, "aux_graphs": tm.side_knowledge.aux_graphs},
        "attacks": {ATTACK: {**params, "budget": {"max_auc": spec.budget}}},
    })


def measure(args: argparse.Namespace, epsilon: float, tm: ThreatModel) -> dict[str, Any]:
    """One run at ``epsilon`` and the attack on it."""
    out = Path(args.out) / f"eps{epsilon:g}"
    options = {"dp_epsilon": epsilon} if epsilon > 0 else {"dp_epsilon": 0.0}
    cfg = RunConfig(method=args.method, dataset=args.dataset, clients=args.clients, seed=args.seed, options=options,
                    progress=False, out=str(out / "run"))
    cfg = prepare(cfg, tm, out)
    task, _ = build_task(cfg)
    result = run_experiment(cfg)
    harness = AttackHarness(tm, seed=cfg.seed, workdir=out / "stacks")
    (res,) = harness.run(harness.context(result, task, stack=resolve_stack(cfg)))
    if res.outcome is None:
        raise RuntimeError(f"{ATTACK} did not run: {res.status} {res.reason}")
    metrics, privacy = result["metrics"], result.get("privacy", {})
    row = {"epsilon_target": epsilon, "epsilon": privacy.get("epsilon"), "delta": privacy.get("delta"),
           "test_auc": metrics["test_auc"], "test_acc": metrics["test_acc"], "attack_auc": res.outcome.value,
           "attack_baseline": res.outcome.details.get("side_knowledge_baseline"),
           "dsm_only_auc": res.outcome.details.get("dsm_only_auc"), "size_only_auc": res.outcome.details.get("size_only_auc"),
           "wall_seconds": result["wall_seconds"]}
    del result
    gc.collect()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", default="cefgc")
    p.add_argument("--dataset", default="MUTAG")
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epsilons", default="0,16,4,1", help="comma-separated; 0 = DP off")
    p.add_argument("--out", default="runs/bench_cefgc_dp")
    args = p.parse_args()
    tm = membership_threat_model()
    rows = []
    for eps in (float(e) for e in args.epsilons.split(",")):
        rows.append(measure(args, eps, tm))
        print(json.dumps(rows[-1]), flush=True)
    base = next((r for r in rows if r["epsilon_target"] == 0), rows[0])
    print(f"\n{args.method} on {args.dataset}, {args.clients} clients, seed {args.seed}, delta 1e-5, unit: one training graph")
    print("| dp_epsilon | accountant epsilon | test AUC (drop) | test acc (drop) | membership AUC | dsm-only / size-only AUC |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        eps = "off" if r["epsilon_target"] == 0 else f"{r['epsilon_target']:g}"
        acc_eps = "-" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
        print(f"| {eps} | {acc_eps} | {r['test_auc']:.4f} ({base['test_auc'] - r['test_auc']:+.4f}) | "
              f"{r['test_acc']:.4f} ({base['test_acc'] - r['test_acc']:+.4f}) | {r['attack_auc']:.3f} | "
              f"{r['dsm_only_auc']:.3f} / {r['size_only_auc']:.3f} |")


if __name__ == "__main__":
    main()
