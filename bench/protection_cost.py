"""The price of protection, per method: its default (protected) stack against ``plaintext``, in one run.

``python bench/protection_cost.py [--quick] [--methods fedavg fedsgd ...] [--rounds 4] [--data-root DIR]``

For each method, two in-process runs of the same configuration and seed are built, one under the
method's default stack and one under ``protocols/plaintext.toml``, and driven round by round,
interleaved (protected round r, plaintext round r, ...), so machine load falls on both alike
(:class:`~securefg.federation.program.session.InProcessRun`). Round 0 is a warm-up (CKKS key
setup, first allocations) and is reported apart, as is the communicating setup phase
(FedStruct's Ā, FedSage+'s generators). ``round_ratio_<method>`` is the median protected round
time over the median plaintext one, ``bytes_ratio_<method>`` protected payload bytes over
plaintext ones for the whole run (setup included). CeFGC is one-shot: its single round is
compared whole (``--quick`` shrinks its generators so that the protocol, not diffusion training,
is what is timed).

Node methods run on Cora (their usual partition, 10 clients), CeFGC on MUTAG (3 clients, its
paper setting). ``--quick`` uses 3 rounds and smaller models. The last lines are ``key=value``;
``max_round_ratio`` over the secure-sum stacks (every method but FED-PUB, whose stack is CKKS)
comes last.

Not yet measured here (issue 42): the split of protected time by mechanism stage, the
deployment's critical path, and the raw-TenSEAL floor of the CKKS stacks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: method -> (dataset, partition, clients, extra RunConfig fields, options)
SETTINGS: dict[str, tuple[str, str | None, int, dict[str, Any], dict[str, Any]]] = {
    "fedavg": ("Cora", "metis", 10, {}, {}),
    "fedsgd": ("Cora", "metis", 10, {}, {}),
    "fedstruct": ("Cora", "random", 10, {}, {"patience": 0}),
    "fedsage_plus": ("Cora", "louvain", 10, {}, {"gen_local_steps": 20, "gen_fed_steps": 2}),
    "fedsheafhn": ("Cora", "metis", 10, {}, {}),
    "fedpub": ("Cora", "metis", 10, {}, {}),
    "cefgc": ("MUTAG", None, 3, {}, {}),
}
QUICK_OPTIONS: dict[str, dict[str, Any]] = {
    "cefgc": {"diffusion_epochs": 1, "langevin_steps": 1, "tune_samples": 4, "gnn_epochs": 20, "max_nodes": 28},
    "fedstruct": {"structure_hops": 2},
}
CKKS_STACKS = {"fedpub"}


def build(method: str, protocol: str | None, rounds: int, seed: int, data_root: str | None, quick: bool) -> Any:
    from securefg.device import seed_everything
    from securefg.experiment import RunConfig, build_method
    from securefg.federation.federation import Federation
    from securefg.federation.program.session import InProcessRun

    dataset, partition, clients, extra, options = SETTINGS[method]
    options = {**options, **(QUICK_OPTIONS.get(method, {}) if quick else {})}
    seed_everything(seed)
    cfg = RunConfig(method=method, dataset=dataset, partition=partition, clients=clients, rounds=rounds,
                    protocol=protocol, seed=seed, data_root=data_root, device="cpu", progress=False,
                    options=options, **extra)
    cfg, m, stack, _ = build_method(cfg)
    fed = Federation(m.num_clients, stack, seed=seed, extra_parties=m.extra_parties)
    return InProcessRun(m, fed, rounds=cfg.rounds), fed, cfg.rounds, stack.name


def measure(method: str, rounds: int, seed: int, data_root: str | None, quick: bool) -> dict[str, Any]:
    """Both runs of ``method``, interleaved; per-round seconds, setup seconds and bytes."""
    runs = {name: build(method, proto, rounds, seed, data_root, quick) for name, proto in
            (("protected", None), ("plaintext", "plaintext"))}
    out: dict[str, Any] = {name: {"rounds": [], "setup": 0.0, "stack": r[3]} for name, r in runs.items()}
    for name, (run, _, _, _) in runs.items():
        t0 = time.perf_counter()
        run.prepare()
        out[name]["setup"] = time.perf_counter() - t0
    n = min(r[2] for r in runs.values())
    for r in range(n):
        for name, (run, _, _, _) in runs.items():
            t0 = time.perf_counter()
            run.play_round(r)
            out[name]["rounds"].append(time.perf_counter() - t0)
    for name, (run, fed, _, _) in runs.items():
        out[name]["bytes"] = fed.transcript.summary()["bytes_total"]
        out[name]["test"] = run.row(n - 1).get("mean_test")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--rounds", type=int, default=0, help="rounds per run (default: 4, or 3 with --quick)")
    p.add_argument("--quick", action="store_true", help="fewer rounds, smaller generators (minutes, not an hour)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=os.environ.get("SECUREFG_DATA"))
    a = p.parse_args()
    rounds = a.rounds or (3 if a.quick else 4)
    figures: dict[str, float] = {}
    for method in a.methods:
        res = measure(method, rounds, a.seed, a.data_root, a.quick)
        prot, plain = res["protected"], res["plaintext"]
        # CeFGC is one-shot (one round): compare it whole; the others after their warm-up round
        later = slice(1, None) if len(prot["rounds"]) > 1 else slice(None)
        rp, rq = statistics.median(prot["rounds"][later]), statistics.median(plain["rounds"][later])
        figures[f"round_ratio_{method}"] = rp / rq
        figures[f"bytes_ratio_{method}"] = prot["bytes"] / max(plain["bytes"], 1)
        print(f"{method}: {prot['stack']} vs plaintext | round 0 {prot['rounds'][0]:.2f} / {plain['rounds'][0]:.2f} s | "
              f"later rounds median {rp:.3f} / {rq:.3f} s | setup phase {prot['setup']:.2f} / {plain['setup']:.2f} s | "
              f"bytes {prot['bytes']:,} / {plain['bytes']:,} | mean test {prot['test']} / {plain['test']}", flush=True)
    secure = [figures[f"round_ratio_{m}"] for m in a.methods if m not in CKKS_STACKS]
    for key, value in figures.items():
        print(f"{key}={value:.2f}")
    if secure:
        print(f"max_round_ratio={max(secure):.2f}")


if __name__ == "__main__":
    main()
