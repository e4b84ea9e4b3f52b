"""``securefg partition``: partition a dataset and print the per-client statistics table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("partition", help="partition a dataset and print per-client statistics")
    p.add_argument("--dataset", required=True)
    p.add_argument("--partition", default=None, help="node: metis, metis_overlap, louvain, random, kmeans; graph: single, dirichlet, across_dataset, across_domain")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None)
    p.add_argument("--split", default=None)
    p.add_argument("--save", default=None, help="write the partition (JSON) to this path")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.commands.run_cmd import parse_split
    from securefg.data.partition import Partition, partition_statistics
    from securefg.experiment import RunConfig
    from securefg.experiment_data import build_task
    from securefg.methods.tasks import NodeTask

    cfg = RunConfig(method="fedavg", dataset=args.dataset, partition=args.partition, clients=args.clients,
                    seed=args.seed, data_root=args.data_root, split=parse_split(args.split))
    task, info = build_task(cfg)
    partition = task.extras["partition"]
    assert isinstance(partition, Partition)
    if isinstance(task, NodeTask):
        assert task.full_graph is not None
        print(f"{args.dataset}: {info['nodes']} nodes, {info['edges']} directed edges, partition {info['partition']}, "
              f"{len(task.clients)} clients, split {info['split']}, preprocessing {info['preprocessing']}")
        print(partition_statistics(task.full_graph, partition).to_text())
    else:
        print(json.dumps(info, indent=2))
    if args.save:
        partition.save(Path(args.save))
        print(f"saved {partition!r} to {args.save}")
    return 0
