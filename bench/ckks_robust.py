"""The price of a robust aggregate nobody reads behind: ``masked_robust``, ``ckks_robust``, ``ckks``, ``secure_sum``.

Run: ``python bench/ckks_robust.py [--quick] [--clients 10] [--params 184167]``. One
``Exchange.aggregate`` of ``clients`` weighted updates of ``params`` values (FedAvg's GCN on Cora:
1433 x 128 + 128 + 128 x 7 + 7 = 184,359 with biases), over the in-process transport (every
party's work in this process), under four stacks: SecAgg+ (``secure_sum``), a CKKS sum
(``ckks``) and the two robust aggregates (multi-Krum on encrypted sketches): ``ckks_robust``
(the updates CKKS-encrypted) and ``masked_robust`` (the kept updates summed by SecAgg+). CPU
time, the stacks interleaved per repeat (median), key setup excluded (one warm-up call each).
One client sends a sign-flipped x10 update; the last lines check that both robust stacks dropped it.

Headline figures last, as ``key=value``: ``robust_vs_ckks_sum`` and ``robust_vs_secure_sum``
(``ckks_robust``'s CPU-time ratios), ``robust_bytes_vs_ckks`` (bytes on the wire),
``masked_robust_vs_secure_sum`` and ``masked_robust_vs_ckks_robust``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transcript import Transcript
from securefg.federation.transport import InProcessTransport
from securefg.protocol.stack import ProtocolStack

TAG = "fedavg/update"
STACKS = {
    "secure_sum": {"mechanism": "secure_sum", "params": {"bits": 64, "clip": 16777216.0, "on_clip": "error",
                                                         "signatures": False}},
    "ckks": {"mechanism": "ckks", "params": {}},
    "ckks_robust": {"mechanism": "ckks_robust", "params": {}},
    "masked_robust": {"mechanism": "masked_robust", "params": {"inner_params": {"bits": 64, "clip": 16777216.0,
                                                                                "on_clip": "error", "signatures": False}}},
}


def federation(name: str, clients: int) -> tuple[Exchange, Transcript]:
    pids = [SERVER, *(client_id(k) for k in range(clients)), "keyholder"]
    transcript = Transcript()
    transport = InProcessTransport(pids, transcript=transcript)
    stack = ProtocolStack.from_dict({"name": name, "tags": {TAG: STACKS[name]}})
    return Exchange(transport=transport, stack=stack, parties={p: Party(p) for p in pids}), transcript


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="23,000 values, 1 repeat")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--params", type=int, default=184_359)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    params, repeats = (23_000, 1) if args.quick else (args.params, args.repeats)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(params, generator=g, dtype=torch.float64) * 0.01
    ids = [client_id(k) for k in range(args.clients)]
    xs = {c: {"w": base + 0.005 * torch.randn(params, generator=g, dtype=torch.float64)} for c in ids}
    xs[ids[0]] = {"w": -10 * xs[ids[0]]["w"]}
    weights = {c: float(100 + 10 * k) for k, c in enumerate(ids)}
    feds = {name: federation(name, args.clients) for name in STACKS}
    for ex, _ in feds.values():  # warm-up: key setup, contexts
        ex.aggregate(TAG, xs, weights=weights)
    times: dict[str, list[float]] = {name: [] for name in STACKS}
    sent: dict[str, int] = {}
    outs: dict[str, torch.Tensor] = {}
    for rep in range(repeats):
        names = list(STACKS) if rep % 2 == 0 else list(reversed(STACKS))
        for name in names:
            ex, transcript = feds[name]
            before = transcript.summary()["wire_bytes_total"]
            t0 = time.process_time()
            outs[name] = ex.aggregate(TAG, xs, weights=weights)["w"]
            times[name].append(time.process_time() - t0)
            sent[name] = transcript.summary()["wire_bytes_total"] - before
    med = {name: statistics.median(v) for name, v in times.items()}
    for name in STACKS:
        print(f"{name}: {med[name]:.2f} s CPU per aggregate of {args.clients} x {params:,} values, "
              f"{sent[name] / 1e6:.1f} MB on the wire")
    honest = ids[1:]
    for name in ("ckks_robust", "masked_robust"):
        rel = feds[name][0].parties[SERVER].state[f"mech/{name}"]["released"]
        kept = next(reversed(rel.values())).kept
        print(f"{name} kept {len(kept)} of {args.clients}; the sign-flipped client dropped: {ids[0] not in kept}")
        mean_honest = sum(xs[c]["w"] * weights[c] for c in kept) / sum(weights[c] for c in kept)
        print(f"{name} result vs the kept clients' plaintext mean: max error "
              f"{float((outs[name] - mean_honest).abs().max()):.2e}; plain mean with the attacker is off by "
              f"{float((outs['secure_sum'] - mean_honest).abs().max()):.2e}")
        assert all(c in honest for c in kept)
    print(f"robust_vs_ckks_sum={med['ckks_robust'] / med['ckks']:.2f}")
    print(f"robust_vs_secure_sum={med['ckks_robust'] / med['secure_sum']:.1f}")
    print(f"robust_bytes_vs_ckks={sent['ckks_robust'] / sent['ckks']:.2f}")
    print(f"masked_robust_vs_secure_sum={med['masked_robust'] / med['secure_sum']:.1f}")
    print(f"masked_robust_vs_ckks_robust={med['masked_robust'] / med['ckks_robust']:.2f}")


if __name__ == "__main__":
    main()
