"""Reproduce FedStruct's Cora row (Table 1, random partition) with the reference trainer.

Usage::

    python -m securefg.models.fedstruct.reproduce_cora [--root DATA] --clients 10 --seeds 0 1 2

``--root`` (default ``$SECUREFG_DATA``) holds ``Cora/raw``; like every securefg loader it is only
read, and PyG processes a copy in the cache. Partition seed = ``1000 + seed``; split, NSF and
model seeds = ``seed``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

import torch

from securefg.data.node_datasets import load_node_pyg_dataset
from securefg.models.fedstruct.baselines import train_central_gnn, train_fl_gnn, train_local_gnn
from securefg.models.fedstruct.central_trainer import FedStructConfig, train_fedstruct_central
from securefg.models.fedstruct.partition import random_node_partition, random_node_split
from securefg.models.fedstruct.run_result import RunResult

METHODS = ("hop2vec", "node2vec", "degree", "local", "fl", "central")


def run(
    root: str | None, *, clients: int, seeds: Sequence[int], methods: Sequence[str] = METHODS,
    config: FedStructConfig | None = None,
) -> dict[str, list[RunResult]]:
    """Run every method for every seed; returns ``{method: [RunResult per seed]}``."""
    config = config or FedStructConfig()
    data = load_node_pyg_dataset("Cora", root)[0]
    out: dict[str, list[RunResult]] = {m: [] for m in methods}
    for seed in seeds:
        owner = random_node_partition(data.num_nodes, clients,
                                      generator=torch.Generator().manual_seed(1000 + seed))
        # the trainer draws the same split from `seed` internally; baselines get it explicitly
        split = random_node_split(owner, generator=torch.Generator().manual_seed(seed))
        for m in methods:
            if m in ("hop2vec", "node2vec", "degree"):
                r = train_fedstruct_central(data, owner, nsf=m, config=config, seed=seed)
            elif m == "local":
                r = train_local_gnn(data, owner, split, seed=seed)
            elif m == "fl":
                r = train_fl_gnn(data, owner, split, seed=seed)
            else:
                r = train_central_gnn(data, split, seed=seed)
            out[m].append(r)
            print(f"seed {seed} {r}", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point; prints mean ± std test accuracy per method."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=None, help="data root holding Cora/raw (default: $SECUREFG_DATA)")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--epochs", type=int, default=FedStructConfig.epochs)
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (1 is fastest on a shared 2-core box)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = run(args.root, clients=args.clients, seeds=args.seeds, methods=args.methods,
              config=FedStructConfig(epochs=args.epochs))
    for m, rs in res.items():
        accs = [100 * r.test_acc for r in rs]
        std = statistics.stdev(accs) if len(accs) > 1 else 0.0
        secs = statistics.mean(r.seconds for r in rs)
        print(f"{m:9s} {statistics.mean(accs):6.2f} ± {std:4.2f}  (n={len(accs)}, {secs:.1f}s/run)")


if __name__ == "__main__":
    main()
