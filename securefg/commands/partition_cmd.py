"""``securefg partition``: partition a dataset and print the per-client statistics table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from securefg.run_config import GRAPH_PARTITIONS, NODE_PARTITIONS

    p = sub.add_parser("partition", help="partition a dataset and print per-client statistics")
    p.add_argument("--dataset", required=True, help="a node or graph dataset (securefg datasets lists them)")
    p.add_argument("--partition", default=None,
                   help=f"node: {', '.join(NODE_PARTITIONS)} (default metis); graph: {', '.join(GRAPH_PARTITIONS)} "
                        "(default single)")
    p.add_argument("--clients", type=int, default=10, help="number of clients (default: 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and partition (default: 0)")
    p.add_argument("--data-root", default=None, metavar="DIR",
                   help="dataset root (default: $SECUREFG_DATA, else ~/.cache/securefg/datasets)")
    p.add_argument("--split", default=None, help="train,val,test ratios, e.g. 0.2,0.4,0.4 (default: the partition's)")
    p.add_argument("--save", default=None, metavar="FILE", help="write the partition (JSON) to this path")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from securefg.commands.preflight import check_run
    from securefg.commands.run_cmd import parse_split
    from securefg.run_config import RunConfig

    cfg = RunConfig(method="fedavg", dataset=args.dataset, partition=args.partition, clients=args.clients,
                    seed=args.seed, data_root=args.data_root, split=parse_split(args.split))
    check_run(cfg)  # names, kinds and files, before torch is imported
    from securefg.data.partition import Partition, partition_statistics
    from securefg.experiment_data import build_task
    from securefg.methods.tasks import NodeTask

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
