"""FED-PUB round time under CKKS vs plaintext, measured in one run: ``python bench/fedpub_rounds.py``.

Builds the same FED-PUB federation twice (same data, seed and model), one under ``plaintext`` and
one under ``fedpub_ckks``, and runs their rounds interleaved (plaintext round r, CKKS round r,
...), so machine load falls on both alike. Round 0 of the CKKS run includes the one-time key setup
(contexts, Galois keys, sealed secret contexts) and is reported apart; the ratio is over the
remaining rounds (median wall time per round). Also prints payload bytes per client per round.

Options: ``--dataset`` (default Cora; ``csbm`` needs no files), ``--clients`` (10), ``--rounds`` (6),
``--data-root`` (else ``$SECUREFG_DATA``). Last line: ``ckks_round_ratio=<ratio>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.device import seed_everything
from securefg.experiment import RunConfig, build_method
from securefg.federation.federation import Federation
from securefg.federation.program.session import InProcessRun


def build(dataset: str, clients: int, rounds: int, protocol: str, data_root: str | None):
    seed_everything(42)
    cfg = RunConfig(method="fedpub", dataset=dataset, partition="metis", clients=clients, rounds=rounds,
                    protocol=protocol, seed=42, data_seed=1234, data_root=data_root, device="cpu", progress=False)
    _, method, stack, _ = build_method(cfg)
    fed = Federation(method.num_clients, stack, seed=42, extra_parties=method.extra_parties)
    run = InProcessRun(method, fed, rounds=rounds)
    run.prepare()
    return run, fed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--data-root", default=None)
    args = p.parse_args()
    if args.rounds < 2:
        p.error("--rounds must be >= 2 (round 0 holds the key setup)")
    runs = {name: build(args.dataset, args.clients, args.rounds, name, args.data_root) for name in ("plaintext", "fedpub_ckks")}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (run, fed) in runs.items():
            t0 = time.perf_counter()
            run.play_round(r)  # the round and its measurement step (no envelopes)
            times[name].append(time.perf_counter() - t0)
        print(f"round {r}: plaintext {times['plaintext'][-1]:.2f} s, ckks {times['fedpub_ckks'][-1]:.2f} s", flush=True)
    print(f"{args.dataset}, {args.clients} clients, {args.rounds} rounds (interleaved), wall seconds per round:")
    for name, (run, fed) in runs.items():
        later = statistics.median(times[name][1:])
        by_round = fed.transcript.bytes_by_round()
        steady = [sum(v.values()) for r, v in by_round.items() if r >= 1]
        per_client = statistics.median(steady) / args.clients if steady else float("nan")
        print(f"  {name:12s} round 0 {times[name][0]:7.2f} s (ckks: incl. key setup), later rounds median {later:6.2f} s, "
              f"{per_client / 1e6:8.2f} MB payload per client per round")
    acc = {name: run.row(args.rounds - 1)["mean_test"] for name, (run, fed) in runs.items()}
    print(f"  mean client test accuracy after {args.rounds} rounds: plaintext {acc['plaintext']:.4f}, ckks {acc['fedpub_ckks']:.4f}")
    ratio = statistics.median(times["fedpub_ckks"][1:]) / statistics.median(times["plaintext"][1:])
    print(f"ckks_round_ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
