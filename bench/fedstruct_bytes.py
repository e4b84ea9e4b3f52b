"""FedStruct's bytes as the graph grows: the Ā phase and a training round, per dataset and stack.

``python bench/fedstruct_bytes.py [--quick] [--datasets Cora CiteSeer Photo] [--stacks fedstruct_secure plaintext]
[--hops L] [--partition random] [--option KEY=VALUE ...] [--data-root DIR]``

Each run is FedStruct-B (Hop2Vec) as ``bench/protection_cost.py`` runs it (its ``SETTINGS``: the
random partition, 10 clients, the paper's fixed rounds), built in process and driven through its
communicating setup phase (Algorithm 3's Ā, the NSF sharing) and ``--rounds`` training rounds
(default 1: a round's bytes do not depend on the round). Bytes are the transcript's payload
bytes: ``abar`` is tag ``fedstruct/abar`` (plus ``fedstruct/boundary``, the layout it uses),
``setup`` everything before round 0, ``per_round`` the training rounds' bytes over their count,
and ``total`` = setup + ``--total-rounds`` (default 100) x per_round: the bytes of a run of the
paper's 100 rounds (``--option patience=0``).

Per dataset the table gives nodes, (undirected) edges, cut edges and boundary nodes (nodes with a
neighbour in another client, the rows the Ā layout keeps under ``abar_rows=boundary``). The last
lines are ``key=value``: per stack the Ā and total growth from the first dataset to the last, and
last ``fedstruct_bytes_growth=`` (total on the last dataset / total on the first, the first stack:
by default Photo / Cora under ``fedstruct_secure``). ``--quick`` runs 2 structure hops (one
round of peer sums instead of L_s - 1 = 9; Ā bytes are linear in the hops run).

Memory: a peer's ``[|R_i|, n]`` float64 message is held until its peer sum runs, so one hop holds
``K (K-1)`` of them at once (4.2 GB on Photo, n = 7,650, K = 10): the process peaks at 7.6 GB
RSS on Photo. Run one at a time. ``--quick`` took 2 min 12 s on the 2-core machine (load ~2).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ABAR_TAGS = ("fedstruct/abar", "fedstruct/boundary")
DATASETS = ("Cora", "CiteSeer", "Photo")
STACKS = ("fedstruct_secure", "plaintext")
QUICK_HOPS = 2


def graph_facts(task: Any) -> dict[str, int]:
    """Nodes, undirected edges, cut edges and boundary nodes of a FedStruct task's partition."""
    import torch

    g = task.full_graph
    n, ei = int(g.num_nodes), g.edge_index.cpu()
    owner = torch.full((n,), -1, dtype=torch.long)
    for k, c in enumerate(task.clients):
        owner[c.global_id.cpu()] = k
    cut = owner[ei[0]] != owner[ei[1]]
    boundary = torch.zeros(n, dtype=torch.bool)
    boundary[ei[0][cut]] = True
    return {"nodes": n, "edges": int(ei.size(1)) // 2, "cut_edges": int(cut.sum()) // 2,
            "boundary_nodes": int(boundary.sum())}


def measure_bytes(dataset: str, *, stack: str, hops: int | None = None, partition: str | None = None,
                  clients: int | None = None, rounds: int = 1, total_rounds: int = 100, seed: int = 0,
                  data_root: str | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One FedStruct run on ``dataset`` under ``stack``: its setup phase and ``rounds`` rounds.

    Args:
        dataset (str): Dataset name (``Cora``, ``CiteSeer``, ``Photo``, ...).
        stack (str): Protocol stack (``fedstruct_secure``, ``plaintext`` or a TOML path).
        hops (int, optional): Structure hops L_s (default: the method's, 10).
        partition (str, optional): Partitioner (default: FedStruct's in ``protection_cost.SETTINGS``, random).
        clients (int, optional): Clients (default: ``protection_cost.SETTINGS``'s, 10).
        rounds (int): Training rounds run and measured. (default: ``1``)
        total_rounds (int): Rounds that ``total_bytes`` counts. (default: ``100``)
        seed (int): Run and partition seed. (default: ``0``)
        data_root (str, optional): Dataset root (default: ``$SECUREFG_DATA``).
        options (dict, optional): More method options (e.g. ``{"abar_rows": "all"}``).

    Returns:
        dict: ``nodes``, ``edges``, ``cut_edges``, ``boundary_nodes``, ``hops``, ``abar_bytes``,
        ``setup_bytes``, ``per_round_bytes``, ``total_bytes``, ``round_bytes`` (per round),
        ``run_bytes`` (what the run moved), ``setup_seconds``, ``round_seconds`` and ``bytes_by_tag``.
    """
    from protection_cost import SETTINGS

    from securefg.device import seed_everything
    from securefg.experiment import RunConfig, build_method
    from securefg.federation.federation import Federation
    from securefg.federation.program.session import InProcessRun

    _, usual_partition, usual_clients, extra, usual_options = SETTINGS["fedstruct"]
    opts = {**usual_options, **(options or {})}
    if hops is not None:
        opts["structure_hops"] = hops
    seed_everything(seed)
    cfg = RunConfig(method="fedstruct", dataset=dataset, partition=partition or usual_partition,
                    clients=clients or usual_clients, rounds=rounds, protocol=stack, seed=seed,
                    data_root=data_root or os.environ.get("SECUREFG_DATA"), device="cpu", progress=False,
                    options=opts, **extra)
    cfg, method, st, _ = build_method(cfg)
    facts = graph_facts(method.task)
    fed = Federation(method.num_clients, st, seed=seed, extra_parties=method.extra_parties)
    run = InProcessRun(method, fed, rounds=cfg.rounds)
    t0 = time.perf_counter()
    run.prepare()
    setup_s = time.perf_counter() - t0
    round_s = []
    for r in range(rounds):
        t0 = time.perf_counter()
        run.play_round(r)
        round_s.append(time.perf_counter() - t0)
    tr = fed.transcript
    by_tag = tr.bytes_by_tag()
    setup_b = sum(rec.payload_bytes for rec in tr if rec.round < 0)
    train_b = tr.bytes_total() - setup_b
    per_round = train_b / max(rounds, 1)
    round_b = [sum(rec.payload_bytes for rec in tr if rec.round == r) for r in range(rounds)]
    out = {"dataset": dataset, "stack": st.name, "partition": cfg.partition, "clients": cfg.clients, **facts,
           "hops": int(method.settings.config.structure_hops), "options": dict(opts),
           "abar_bytes": sum(by_tag.get(t, 0) for t in ABAR_TAGS), "setup_bytes": setup_b,
           "per_round_bytes": per_round, "round_bytes": round_b, "total_rounds": total_rounds,
           "total_bytes": setup_b + total_rounds * per_round, "run_bytes": tr.bytes_total(),
           "setup_seconds": setup_s, "round_seconds": round_s, "bytes_by_tag": by_tag,
           "test": run.row(rounds - 1).get("mean_test") if rounds else None}
    del run, fed, method
    gc.collect()
    return out


def _option(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    low = value.lower()
    if low in ("true", "false"):
        return key, low == "true"
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS))
    p.add_argument("--stacks", nargs="+", default=list(STACKS))
    p.add_argument("--hops", type=int, default=None, help=f"structure hops L_s (default: the method's; --quick: {QUICK_HOPS})")
    p.add_argument("--partition", default=None, help="default: FedStruct's usual (random)")
    p.add_argument("--clients", type=int, default=None)
    p.add_argument("--rounds", type=int, default=1, help="training rounds measured (default: 1)")
    p.add_argument("--total-rounds", type=int, default=100, help="rounds counted in total (default: 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="method option")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_HOPS} structure hops (minutes, not an hour)")
    p.add_argument("--data-root", default=os.environ.get("SECUREFG_DATA"))
    a = p.parse_args()
    hops = a.hops if a.hops is not None else (QUICK_HOPS if a.quick else None)
    options = dict(_option(o) for o in a.option)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    print("dataset stack partition nodes edges cut_edges boundary_nodes hops abar_bytes setup_bytes per_round_bytes "
          "total_bytes setup_s round_s", flush=True)
    for ds in a.datasets:
        for stack in a.stacks:
            res = measure_bytes(ds, stack=stack, hops=hops, partition=a.partition, clients=a.clients, rounds=a.rounds,
                                total_rounds=a.total_rounds, seed=a.seed, data_root=a.data_root, options=options)
            results[(ds, stack)] = res
            print(f"{ds} {res['stack']} {res['partition']} {res['nodes']} {res['edges']} {res['cut_edges']} "
                  f"{res['boundary_nodes']} {res['hops']} {res['abar_bytes']:,} {res['setup_bytes']:,} "
                  f"{res['per_round_bytes']:,.0f} {res['total_bytes']:,.0f} {res['setup_seconds']:.1f} "
                  f"{sum(res['round_seconds']) / max(len(res['round_seconds']), 1):.2f}", flush=True)
    first, last = a.datasets[0], a.datasets[-1]
    for stack in reversed(a.stacks):  # the first stack's growth comes last
        lo, hi = results[(first, stack)], results[(last, stack)]
        name = "" if stack == a.stacks[0] else f"_{Path(stack).stem}"
        print(f"fedstruct_abar_growth{name}={hi['abar_bytes'] / max(lo['abar_bytes'], 1):.2f}")
        print(f"fedstruct_bytes_growth{name}={hi['total_bytes'] / max(lo['total_bytes'], 1):.2f}")


if __name__ == "__main__":
    main()
