"""The cost of distribution: one FedAvg + SecAgg+ run in process and over Flower, in one run.

``python bench/flower_overhead.py [--dataset Cora] [--clients 10] [--rounds 10] [--seed 0]``

Both runs are ``securefg run --method fedavg`` on the METIS partition under the default
``fedavg_secure_sum`` stack, end to end (data loading, partitioning, setup, rounds, result):
the in-process backend first, then ``--backend flower`` (one OS process per party, Flower's
gRPC on loopback). Both run with ``OMP_NUM_THREADS=1`` per party (as the Flower launcher sets
it), so the ratio compares the backends, not thread counts. The two runs must agree (same
metrics, envelopes and payload bytes): the bench refuses to print a ratio otherwise.

The breakdown comes from each party's own timing file (``SECUREFG_TIMING``, see
:mod:`securefg.federation.program.timing`): ``start`` is the seconds from launch to a party's
first step (process start, imports, data, setup), ``protocol`` the seconds inside step handlers
(the method and our mechanisms; CPU seconds, summed over parties and spread over the cores they
share) plus the server's own program time, ``serialization`` Flower message (de)serialization
(CPU seconds summed over parties), ``grpc`` the server's
step wait minus what the clients spent handling and (de)serializing, spread over the cores they
share (an estimate of transport and scheduling: the clients of a step run in parallel).

The last lines are ``key=value``; ``flower_overhead_ratio`` (Flower wall / in-process wall) last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=os.environ.get("SECUREFG_DATA"))
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from securefg.experiment import RunConfig, run_experiment
    from securefg.federation.program import timing
    from securefg.integrations.flower.launcher import run_flower_experiment

    cfg = RunConfig(method="fedavg", dataset=a.dataset, partition="metis", clients=a.clients, rounds=a.rounds,
                    seed=a.seed, data_root=a.data_root, progress=False)
    t0 = time.perf_counter()
    ip = run_experiment(cfg)
    ip_wall = time.perf_counter() - t0

    tdir = Path(tempfile.mkdtemp(prefix="securefg-timing-"))
    os.environ[timing.ENV] = str(tdir)
    os.environ[timing.SPAWN_ENV] = repr(time.time())
    t0 = time.perf_counter()
    fl = run_flower_experiment(cfg)
    fl_wall = time.perf_counter() - t0
    del os.environ[timing.ENV]

    same = (fl["metrics"].get("test_acc") == ip["metrics"].get("test_acc") and fl["envelopes"] == ip["envelopes"]
            and fl["bytes_total"] == ip["bytes_total"])
    if not same:
        raise SystemExit(f"the backends disagree: test_acc {fl['metrics'].get('test_acc')} vs {ip['metrics'].get('test_acc')}, "
                         f"envelopes {fl['envelopes']} vs {ip['envelopes']}, bytes {fl['bytes_total']} vs {ip['bytes_total']}")
    parties = {f.stem: json.loads(f.read_text()) for f in sorted(tdir.glob("*.json"))}
    server = parties.get("server", {"seconds": {}})["seconds"]
    clients = [v["seconds"] for k, v in parties.items() if k != "server"]
    start = max([server.get("ready", 0.0), *(c.get("ready", 0.0) for c in clients)])
    handler = sum(c.get("handler_cpu", 0.0) for c in clients)
    serialize = server.get("serialize_cpu", 0.0) + sum(c.get("serialize_cpu", 0.0) for c in clients)
    exchange = server.get("exchange", 0.0)
    train = fl["train_seconds"]
    server_own = max(train - exchange, 0.0)
    lanes = max(1, min(len(clients), os.cpu_count() or 1))  # clients run in parallel on this many cores
    client_serialize = sum(c.get("serialize_cpu", 0.0) for c in clients)
    grpc = max(exchange - (handler + client_serialize) / lanes, 0.0)
    rounds = max(fl["rounds_run"], 1)
    print(f"dataset={a.dataset} clients={a.clients} rounds={a.rounds} seed={a.seed} stack={fl['protocol']}")
    print(f"in-process: wall {ip_wall:.2f} s (train {ip['train_seconds']:.2f} s)")
    print(f"flower:     wall {fl_wall:.2f} s (train {train:.2f} s, {len(parties)} timed parties)")
    print(f"test_acc {fl['metrics'].get('test_acc')} on both; envelopes {fl['envelopes']}; payload bytes {fl['bytes_total']}")
    print("per round on Flower (seconds):")
    print(f"  server program outside steps {server_own / rounds:.3f}; server waiting on steps {exchange / rounds:.3f}")
    print(f"  client handlers (method + protocol), CPU seconds summed over clients {handler / rounds:.3f} "
          f"(on {lanes} cores: {handler / lanes / rounds:.3f})")
    print(f"  serialization, CPU seconds summed over parties {serialize / rounds:.3f}")
    print(f"  gRPC and scheduling (step wait beyond the clients' work spread over {lanes} cores) {grpc / rounds:.3f}")
    print(f"process start (launch to last party's first step) {start:.2f} s")
    print(f"inprocess_wall_s={ip_wall:.2f}")
    print(f"flower_wall_s={fl_wall:.2f}")
    print(f"process_start_s={start:.2f}")
    print(f"serialization_s_per_round={serialize / rounds:.3f}")
    print(f"grpc_s_per_round={grpc / rounds:.3f}")
    print(f"protocol_s_per_round={(server_own + handler / lanes) / rounds:.3f}")
    print(f"flower_overhead_ratio={fl_wall / ip_wall:.2f}")


if __name__ == "__main__":
    main()
