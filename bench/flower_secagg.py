"""Our secure sum vs Flower's own SecAgg+ (``SecAggPlusWorkflow`` + ``secaggplus_mod``), side by side.

``python bench/flower_secagg.py [--n 50] [--m 1000000] [--drop 0.1]``

Both protocols run in this one process on the same n, vector length m and dropout rate, in the
same fixed-point regime (values clipped to [-8, 8], a 2^32 ring: Flower's defaults), with
the same neighbour count and threshold (ours from the Harary helper; Flower's ``num_shares`` =
k + 1 because it counts the client itself, ``reconstruction_threshold`` = t). Dropped clients
vanish before sending their masked input in both.

* Ours: ``SecureSum.run_aggregate`` over the in-process transport (``bench/secure_sum.py``'s
  ``end_to_end``): server seconds = time in the aggregator's stage handlers, client seconds = mean
  time in a live client's stage handlers, bytes per client from the transcript (sealed payloads).
* Times are this thread's CPU seconds by default (``--clock cpu``: everything runs in the main
  thread; robust when other jobs share the cores), or wall seconds (``--clock wall``).
* Flower: the real ``SecAggPlusWorkflow`` against ClientApps wrapped by ``secaggplus_mod``,
  through a ``Grid`` that calls each ClientApp directly (no network for either side): client
  seconds = mean time inside a live client's ClientApp, server seconds = the workflow's wall time
  minus the time inside ClientApps and minus this grid's own size bookkeeping; bytes per client
  = serialized ``RecordDict`` protobuf sizes of every request and reply of that client.

The last lines are the headline ``key=value`` figures, ``server_speedup_vs_flower`` last.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from secure_sum import end_to_end


def flower_secaggplus(n: int, m: int, *, drop: int, num_shares: int, threshold: int,
                      clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Flower's SecAgg+ on n clients holding m-vectors; ``drop`` clients vanish before masking."""
    from flwr.app import ConfigRecord, Context, Message, RecordDict
    from flwr.client.mod import secaggplus_mod
    from flwr.clientapp import ClientApp
    from flwr.common import ndarrays_to_parameters
    from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
    from flwr.compat.client.numpy_client import NumPyClient
    from flwr.compat.common.recorddict_compat import arrayrecord_to_parameters, parameters_to_arrayrecord
    from flwr.server import ServerConfig
    from flwr.server.client_manager import SimpleClientManager
    from flwr.server.compat.grid_client_proxy import GridClientProxy
    from flwr.server.compat.legacy_context import LegacyContext
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import SecAggPlusWorkflow
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
    from flwr.serverapp.grid import Grid
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 0
    rng = np.random.default_rng(n * 7919 + m)
    vectors = {nid: rng.normal(size=m).astype(np.float32) for nid in range(1, n + 1)}
    dropped = set(range(1, drop + 1))

    class VectorClient(NumPyClient):
        def __init__(self, vec: np.ndarray) -> None:
            self.vec = vec

        def fit(self, parameters, config):  # type: ignore[no-untyped-def]
            return [self.vec], 1, {}

    def client_fn_for(vec: np.ndarray):  # type: ignore[no-untyped-def]
        def client_fn(context: Context):  # type: ignore[no-untyped-def]
            return VectorClient(vec).to_client()

        return client_fn

    apps = {nid: ClientApp(client_fn=client_fn_for(vec), mods=[secaggplus_mod]) for nid, vec in vectors.items()}
    contexts = {nid: Context(run_id=1, node_id=nid, node_config={}, state=RecordDict(), run_config={})
                for nid in vectors}
    client_s: dict[int, float] = defaultdict(float)
    bytes_of: dict[int, int] = defaultdict(int)
    overhead = [0.0]

    class LocalGrid(Grid):
        """Calls each node's ClientApp in this process; a dropped node stops answering at masking."""

        def __init__(self) -> None:
            self._run = Run.create_empty(1)

        def set_run(self, run_id: int) -> None:  # type: ignore[override]
            self._run = Run.create_empty(run_id)

        @property
        def run(self) -> Run:
            return self._run

        def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):  # type: ignore[no-untyped-def]
            return Message(content, dst_node_id=dst_node_id, message_type=message_type, ttl=ttl, group_id=group_id)

        def get_node_ids(self) -> list[int]:
            return list(vectors)

        def push_messages(self, messages: Iterable[Message]) -> list[str]:
            raise NotImplementedError("LocalGrid answers in send_and_receive")

        def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
            raise NotImplementedError("LocalGrid answers in send_and_receive")

        def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
            out = []
            for msg in messages:
                nid = msg.metadata.dst_node_id
                msg.metadata.__dict__["_message_id"] = uuid.uuid4().hex
                stage = msg.content.config_records.get("secaggplus_configs", {}).get("stage")
                if nid in dropped and stage in ("collect_masked_vectors", "unmask"):
                    continue
                t0 = clock()  # serialize both ways, as a real transport would
                proto = recorddict_to_proto(msg.content)
                bytes_of[nid] += proto.ByteSize()
                delivered = Message(recorddict_from_proto(proto), dst_node_id=nid,
                                    message_type=msg.metadata.message_type)
                delivered.metadata.__dict__["_message_id"] = msg.metadata.message_id
                t1 = clock()
                reply = apps[nid](delivered, contexts[nid])
                t2 = clock()
                rproto = recorddict_to_proto(reply.content)
                bytes_of[nid] += rproto.ByteSize()
                reply = Message(recorddict_from_proto(rproto), reply_to=msg)
                t3 = clock()
                client_s[nid] += t2 - t1
                overhead[0] += (t1 - t0) + (t3 - t2)
                out.append(reply)
            return out

    grid = LocalGrid()
    cm = SimpleClientManager()
    for nid in vectors:
        cm.register(GridClientProxy(node_id=nid, grid=grid, run_id=1))
    base = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={})
    ctx = LegacyContext(base, config=ServerConfig(num_rounds=1),
                        strategy=FedAvg(fraction_fit=1.0, min_fit_clients=n, min_available_clients=n),
                        client_manager=cm)
    ctx.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({Key.CURRENT_ROUND: 1})
    ctx.state.array_records[MAIN_PARAMS_RECORD] = parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(m, dtype=np.float32)]), True)
    workflow = SecAggPlusWorkflow(num_shares=num_shares, reconstruction_threshold=threshold)
    t = clock()
    workflow(grid, ctx)
    wall = clock() - t
    live = [nid for nid in vectors if nid not in dropped]
    from flwr.common import parameters_to_ndarrays

    agg = parameters_to_ndarrays(arrayrecord_to_parameters(ctx.state.array_records[MAIN_PARAMS_RECORD], True))[0]
    expected = np.mean([vectors[nid] for nid in live], axis=0)
    err = float(np.abs(agg - expected).max())
    if not err < 1e-2:  # Flower quantizes [-8, 8] to 2^22 levels with stochastic rounding
        raise RuntimeError(f"Flower's SecAgg+ returned a wrong mean (max error {err})")
    return {
        "server_s": wall - sum(client_s.values()) - overhead[0],
        "client_s": statistics.mean(client_s[nid] for nid in live),
        "bytes_per_client": statistics.mean(bytes_of[nid] for nid in vectors),
        "max_err": err,
    }


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per-figure median over repeated runs of one side."""
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--m", type=int, default=10**6)
    parser.add_argument("--drop", type=float, default=0.1, help="dropout rate (default 0.1)")
    parser.add_argument("--bits", type=int, choices=(32, 64), default=32,
                        help="our ring Z_2^bits; 32 (default) is Flower's modulus_range 2^32")
    parser.add_argument("--repeat", type=int, default=3,
                        help="interleaved runs of both; each figure is the median over them (default 3)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this thread's CPU seconds (robust on a shared machine; default); wall: perf_counter")
    args = parser.parse_args()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    n, m = args.n, args.m
    drop = int(args.drop * n)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    # the same fixed-point regime as Flower's defaults: values clipped to [-8, 8] (clipping_range)
    # in a 2^32 ring (modulus_range); ours then has 2^-22..2^-23 resolution, theirs 16/2^22
    params = {"bits": args.bits, "clip": 8.0, "on_clip": "saturate"}
    warm = end_to_end(6, 1000, drop_fraction=0.2, clock=clock, params=params)  # warm-up: imports, first calls
    flower_secaggplus(6, 1000, drop=1, num_shares=int(warm["degree"]) + 1, threshold=int(warm["threshold"]), clock=clock)
    ours_runs, theirs_runs = [], []
    for _ in range(max(1, args.repeat)):  # interleaved, so a noisy neighbour hits both sides alike
        ours_runs.append(end_to_end(n, m, drop_fraction=args.drop, clock=clock, params=params))
        k, t = int(ours_runs[-1]["degree"]), int(ours_runs[-1]["threshold"])
        theirs_runs.append(flower_secaggplus(n, m, drop=drop, num_shares=k + 1, threshold=t, clock=clock))
    ours, theirs = _median_run(ours_runs), _median_run(theirs_runs)
    print(f"# n={n} clients, m={m} values, {drop} dropped before masking, k={k} neighbours, t={t}, "
          f"ours in Z_2^{args.bits} with clip 8, {args.clock} seconds, median of {len(ours_runs)} interleaved runs "
          f"(after a warm-up of both)")
    print(f"{'':>8} {'server s':>9} {'client s':>9} {'MB/client':>10} {'max err':>9}")
    for name, r in (("securefg", ours), ("flower", theirs)):
        print(f"{name:>8} {r['server_s']:>9.3f} {r['client_s']:>9.3f} {r['bytes_per_client'] / 1e6:>10.3f} {r['max_err']:>9.2e}")
    print(f"bytes_per_client_ours={ours['bytes_per_client']:.0f}")
    print(f"bytes_per_client_flower={theirs['bytes_per_client']:.0f}")
    print(f"server_time_ratio_ours_over_flower={ours['server_s'] / theirs['server_s']:.4f}")
    print(f"client_time_ratio_ours_over_flower={ours['client_s'] / theirs['client_s']:.4f}")
    print(f"client_speedup_vs_flower={theirs['client_s'] / ours['client_s']:.2f}")
    print(f"server_speedup_vs_flower={theirs['server_s'] / ours['server_s']:.2f}")


if __name__ == "__main__":
    main()
