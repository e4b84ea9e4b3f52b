"""FedStruct on Cora (random partition, 10/10/80): the table of issue 6, measured end to end.

Every row is ``securefg run`` through the real federation (``run_experiment``), one run at a
time on one thread; means and standard deviations over the seeds given. Writes a markdown
table (default ``runs/fedstruct_results.md``) and one JSON line per run next to it.

    SECUREFG_DATA=../shared/datasets python examples/fedstruct_cora.py --seeds 0 1 2 3 4
    python examples/fedstruct_cora.py --rows h2v-plain h2v-secure --clients 5 --seeds 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from securefg.experiment import RunConfig, run_experiment

#: row name -> (method, protocol, options, rounds)
ROWS: dict[str, tuple[str, str | None, dict[str, Any], int]] = {
    "h2v-plain": ("fedstruct", "plaintext", {"nsf": "hop2vec", "variant": "B"}, 40),
    "h2v-secure": ("fedstruct", "fedstruct_secure", {"nsf": "hop2vec", "variant": "B"}, 40),
    "n2v-plain": ("fedstruct", "plaintext", {"nsf": "node2vec", "variant": "B"}, 40),
    "n2v-secure": ("fedstruct", "fedstruct_secure", {"nsf": "node2vec", "variant": "B"}, 40),
    "deg-plain": ("fedstruct", "plaintext", {"nsf": "degree", "variant": "B"}, 40),
    "h2v-pruned-plain": ("fedstruct", "plaintext", {"nsf": "hop2vec", "variant": "B", "prune_p": 30}, 40),
    "h2v-pruned-secure": ("fedstruct", "fedstruct_secure", {"nsf": "hop2vec", "variant": "B", "prune_p": 30}, 40),
    "h2v-A-plain": ("fedstruct", "plaintext", {"nsf": "hop2vec", "variant": "A"}, 40),
    "h2v-A-secure": ("fedstruct", "fedstruct_secure", {"nsf": "hop2vec", "variant": "A"}, 40),
    "h2v-hardened-plain": ("fedstruct", "plaintext", {"nsf": "hop2vec", "variant": "B", "hardened": True}, 40),
    "h2v-hardened-secure": ("fedstruct", "fedstruct_secure", {"nsf": "hop2vec", "variant": "B", "hardened": True}, 40),
    "fl-gnn": ("fedavg", "plaintext", {}, 100),
    "fl-gnn-fedsgd": ("fedsgd", "plaintext", {}, 200),  # the paper's FL GNN: FedSGD, 3-layer GraphSage
    "local-gnn": ("local", "plaintext", {}, 100),
    "central-gnn": ("centralized", "plaintext", {}, 100),
}
DEFAULT_ROWS = ["h2v-plain", "h2v-secure", "n2v-plain", "n2v-secure", "fl-gnn-fedsgd", "fl-gnn", "local-gnn"]


def run_row(row: str, *, dataset: str, partition: str, clients: int, seed: int) -> dict[str, Any]:
    method, protocol, options, rounds = ROWS[row]
    if method == "fedstruct":  # the paper's fixed rounds (fedstruct stops early by default)
        options = {"patience": 0, **options}
    t = time.perf_counter()
    r = run_experiment(RunConfig(method=method, dataset=dataset, partition=partition, clients=clients, rounds=rounds,
                                 protocol=protocol, seed=seed, options=dict(options), progress=False, device="cpu"))
    off = r.get("offline", {})
    return {"row": row, "dataset": dataset, "partition": partition, "clients": clients, "seed": seed,
            "protocol": r["protocol"], "test_acc": r["metrics"].get("test_acc"), "best_round": r["metrics"].get("best_round"),
            "bytes_total": r["bytes_total"], "offline_abar_bytes": off.get("abar", {}).get("bytes"),
            "offline_abar_seconds": off.get("abar", {}).get("seconds"),
            "offline_abar_nonzeros": off.get("abar", {}).get("nonzeros_sent"),
            "nsf_share_bytes": off.get("nsf_share", {}).get("bytes"), "training_bytes": off.get("training_bytes"),
            "train_seconds": r["train_seconds"], "wall_seconds": time.perf_counter() - t}


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: one line per (setting, row) with mean ± std accuracy and the cost columns."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for res in results:
        groups.setdefault((res["dataset"], res["partition"], res["clients"], res["row"]), []).append(res)
    lines = [("| dataset | partition | K | row | stack | seeds | test acc % (mean ± std) | offline Ā bytes | offline Ā s | "
             "NSF share bytes | training bytes | train s |"), "|" + "---|" * 12]
    for (ds, part, k, row), rs in groups.items():
        accs = [100 * float(x["test_acc"]) for x in rs]
        std = statistics.stdev(accs) if len(accs) > 1 else 0.0

        def mean(key: str, rs: list[dict[str, Any]] = rs) -> str:
            vals = [x[key] for x in rs if x.get(key) is not None]
            return f"{statistics.mean(vals):,.0f}" if vals else "-"

        secs = [x["offline_abar_seconds"] for x in rs if x.get("offline_abar_seconds") is not None]
        lines.append(f"| {ds} | {part} | {k} | {row} | {rs[0]['protocol']} | {len(rs)} | {statistics.mean(accs):.2f} ± {std:.2f} | "
                     f"{mean('offline_abar_bytes')} | {f'{statistics.mean(secs):.1f}' if secs else '-'} | "
                     f"{mean('nsf_share_bytes')} | {mean('training_bytes')} | {statistics.mean(x['train_seconds'] for x in rs):.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", default=DEFAULT_ROWS, choices=sorted(ROWS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--partition", default="random")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--out", default="runs/fedstruct_results.md")
    args = p.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".jsonl")
    results = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    done = {(r["dataset"], r["partition"], r["clients"], r["row"], r["seed"]) for r in results}
    for seed in args.seeds:
        for row in args.rows:
            if (args.dataset, args.partition, args.clients, row, seed) in done:
                continue
            res = run_row(row, dataset=args.dataset, partition=args.partition, clients=args.clients, seed=seed)
            results.append(res)
            with log.open("a") as fh:
                fh.write(json.dumps(res) + "\n")
            print(f"{row:20s} seed {seed}: {100 * res['test_acc']:.2f}%  ({res['wall_seconds']:.0f} s)", flush=True)
            out.write_text("# FedStruct measurements\n\n" + table(results))
    print(table(results))


if __name__ == "__main__":
    main()
