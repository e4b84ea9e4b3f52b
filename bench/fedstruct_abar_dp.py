"""Epsilon-utility tables of FedStruct-B's by-design release: edge-level DP on the graph, or noise on Ā.

``--edge-epsilons 4,6,8`` (the recommended knob): the method option ``edge_dp_epsilon``, randomized
response on every node pair before Algorithm 3, so every release is post-processing of one
pure-epsilon edge-DP report (``securefg/methods/fedstruct/edge_dp.py``). One row per epsilon.

``--sigmas`` (the older knob, kept for comparison):

Each client i receives, by design, its rows of Ā (``fedstruct/abar``: for each peer k the sum
of B_ik over the peers). The knob is ``dp_gaussian`` in ``distributed`` mode on that tag: every
peer clips its whole message B_ik to L2 norm ``clip`` and adds its share of Gaussian noise
inside the masked peer sum, so i receives Ā rows with noise of std sigma * clip. Adding or
removing any set of edges between a peer and i moves that peer's message by at most ``clip``,
so the accountant's client-level epsilon also bounds edge-level leakage (it is conservative).

For each noise multiplier (0 = no DP) it runs ``fedstruct_secure`` plus the noise, then plays
the curious-clients link attacks on client 0 (structure_link, nsf_link) and prints one row:
sigma, epsilon (delta 1e-5, the run's accountant), test accuracy, each attack's AUC and its
side-knowledge baseline. Markdown on stdout, JSON with ``--json``.

Run: ``OMP_NUM_THREADS=1 SECUREFG_DATA=... python bench/fedstruct_abar_dp.py --rounds 20``.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import tomllib

from securefg.toml_files import toml_value

ATTACKS = ("structure_link", "nsf_link")


def noisy_stack(sigma: float, clip: float, folder: Path, *, secure_rng: bool = True) -> str:
    """``fedstruct_secure`` with distributed Gaussian noise on ``fedstruct/abar`` (path of the TOML)."""
    from securefg.protocol.stack import protocols_dir

    if sigma <= 0:
        return "fedstruct_secure"
    text = (protocols_dir() / "fedstruct_secure.toml").read_text()
    data = tomllib.loads(text)
    abar = data["tags"]["fedstruct/abar"]
    abar["transforms"] = [{"name": "dp_gaussian", "mode": "distributed", "noise_multiplier": sigma, "clip": clip,
                           "secure_rng": secure_rng}]
    # noisy sums leave the [0, 16] range of exact B_ik: widen the ring's clip, saturate beyond it
    abar["params"] = {**abar["params"], "clip": max(16.0, 16.0 * sigma * clip), "on_clip": "saturate"}
    if not secure_rng:  # reproducible noise voids the DP guarantee: the stack must say so (issue 38)
        abar["unsafe"] = "--seeded-noise: reproducible noise for a controlled comparison; the epsilon does not hold"
    lines = [f'name = "fedstruct_secure_abar_dp_{sigma:g}"', "", f"description = {json.dumps(data['description'])}", ""]
    for tag, table in data["tags"].items():
        lines.append(f'[tags."{tag}"]')
        for k, v in table.items():
            lines.append(f"{k} = {toml_value(v)}")
        lines.append("")
    path = folder / f"abar_dp_{sigma:g}.toml"
    path.write_text("\n".join(lines))
    return str(path)



def measure(cfg: Any, sigma: float, clip: float, folder: Path, *, secure_rng: bool = True,
            edge_epsilon: float = 0.0, local_graph: bool = False) -> dict[str, Any]:
    """One row: run under the noisy stack (or the edge-DP option), play the curious-clients link attacks."""
    from securefg.attacks.harness import AttackHarness
    from securefg.audit.auditor import prepare
    from securefg.audit.threat_model import ThreatModel
    from securefg.experiment import resolve_stack, run_experiment
    from securefg.experiment_data import build_task

    tm = ThreatModel.load("curious_clients")
    tm = replace(tm, attacks=tuple(a for a in tm.attacks if a.key in ATTACKS))
    if edge_epsilon > 0:
        cfg = replace(cfg, options={**cfg.options, "edge_dp_epsilon": edge_epsilon, "edge_dp_seeded": not secure_rng,
                                    "edge_dp_local_graph": local_graph})
    c = prepare(replace(cfg, protocol=noisy_stack(sigma, clip, folder, secure_rng=secure_rng)), tm, folder)
    task, _ = build_task(c)
    result = run_experiment(c)
    ctx = AttackHarness(tm, seed=c.seed).context(result, task, stack=resolve_stack(c))
    row: dict[str, Any] = {"sigma": sigma, "clip": clip, "edge_epsilon": edge_epsilon,
                           "test_acc": result["metrics"].get("test_acc"),
                           "epsilon": (result.get("privacy") or {}).get("epsilon")}
    for r in AttackHarness(tm, seed=c.seed).run(ctx):
        row[r.key] = r.outcome.value if r.outcome is not None else r.status
        row[f"{r.key}_baseline"] = r.baseline
    del result, ctx
    gc.collect()
    return row


def main() -> None:
    from securefg.experiment import RunConfig

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--sigmas", default="0,0.5,2,8", help="noise multipliers, comma-separated (0 = no DP)")
    p.add_argument("--edge-epsilons", default="",
                   help="edge_dp_epsilon values, comma-separated (randomized response; replaces --sigmas)")
    p.add_argument("--local-graph", action="store_true",
                   help="with --edge-epsilons: option edge_dp_local_graph (feature branch on the true intra-client edges)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--seeded-noise", action="store_true",
                   help="draw the noise from the run's seeded generator instead of the OS CSPRNG (same "
                        "distribution, much faster; for measuring only, never for deployment)")
    args = p.parse_args()
    cfg = RunConfig(method="fedstruct", dataset=args.dataset, partition="random", clients=args.clients,
                    rounds=args.rounds, seed=args.seed, options={"nsf": "hop2vec", "variant": "B"}, progress=False)
    rows = []
    edge = [float(e) for e in args.edge_epsilons.split(",") if e.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        for eps in edge:
            rows.append(measure(cfg, 0.0, args.clip, Path(tmp), secure_rng=not args.seeded_noise, edge_epsilon=eps,
                                local_graph=args.local_graph))
            print(json.dumps(rows[-1]), flush=True)
        for sigma in ([] if edge else (float(s) for s in args.sigmas.split(","))):
            rows.append(measure(cfg, sigma, args.clip, Path(tmp), secure_rng=not args.seeded_noise))
            print(json.dumps(rows[-1]), flush=True)
    if edge:
        print("\n| edge epsilon (pure, delta 0) | test acc | structure_link AUC (baseline) | nsf_link AUC (baseline) |"
              "\n|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['edge_epsilon']:g} | {r['test_acc']:.4f} | "
                  + " | ".join(f"{r[k]:.3f} ({r[k + '_baseline']:.3f})" if isinstance(r[k], float) else str(r[k])
                               for k in ATTACKS) + " |")
        for r in rows:
            print(f"acc_at_edge_eps_{r['edge_epsilon']:g}={r['test_acc']:.4f}")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return
    print("\n| noise multiplier | epsilon (delta 1e-5) | test acc | structure_link AUC (baseline) | "
          "nsf_link AUC (baseline) |\n|---:|---:|---:|---:|---:|")
    for r in rows:
        eps = "∞ (no DP)" if r["sigma"] <= 0 else f"{r['epsilon']:.3g}" if isinstance(r["epsilon"], float) else str(r["epsilon"])
        print(f"| {r['sigma']:g} | {eps} | {r['test_acc']:.4f} | "
              + " | ".join(f"{r[k]:.3f} ({r[k + '_baseline']:.3f})" if isinstance(r[k], float) else str(r[k])
                           for k in ATTACKS) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
