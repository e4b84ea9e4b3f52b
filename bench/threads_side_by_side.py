"""How much a full-batch GCN step slows when jobs share the cores, with one thread or with torch's default.

Run: ``python bench/threads_side_by_side.py [--jobs 2] [--steps 30] [--repeats 2]``. It starts
``--jobs`` background processes that train the same GCN step forever with torch's default thread
count (what two reproduce lanes beside each other look like), then times the step in a fresh
process with ``OMP_NUM_THREADS=1`` and with the default, alternating, ``--repeats`` times each
(median of ``--steps`` steps per process). The graph has a Computers METIS-10 client's size
(1,335 nodes, about 23,400 directed edges, 767 features, 42% non-zero, 10 classes), propagated over a
CSR adjacency as ``securefg.methods.training`` does for that client. The last line,
``one_thread_speedup_under_load``, is the default-thread median over the one-thread median;
``--jobs 0`` measures an idle machine. Why: docs/performance.md, "Several jobs on few cores".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NODES, EDGES, FEATURES, CLASSES = 1335, 23410, 767, 10


def _step_times(steps: int) -> list[float]:
    """Seconds per full-batch training step (``train_node_epochs``, one epoch), after two warm-up
    steps (runs in the child)."""
    import torch
    from torch_geometric.data import Data

    from securefg.methods.optim import adam
    from securefg.methods.training import train_node_epochs, with_sparse_adjacency
    from securefg.models.gcn import GCN

    gen = torch.Generator().manual_seed(0)
    x = torch.rand(NODES, FEATURES, generator=gen) * (torch.rand(NODES, FEATURES, generator=gen) < 0.42)
    src = torch.randint(0, NODES, (EDGES // 2,), generator=gen)
    dst = torch.randint(0, NODES, (EDGES // 2,), generator=gen)
    edge_index = torch.unique(torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]), dim=1)
    data = Data(x=x, edge_index=edge_index, y=torch.randint(0, CLASSES, (NODES,), generator=gen),
                train_mask=torch.rand(NODES, generator=gen) < 0.4)
    data = with_sparse_adjacency(data, min_messages=0)
    model = GCN(FEATURES, CLASSES)
    opt = adam(model.parameters(), lr=0.01)
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        train_node_epochs(model, opt, data, 1)
        if i >= 2:
            times.append(time.perf_counter() - start)
    return times


def _child_median(steps: int, threads: int | None) -> float:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, __file__, "--child", str(steps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="background default-thread jobs (default: 2)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement (default: 30)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per thread setting (default: 2)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--forever", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.forever:
        while True:
            _step_times(1000)
    if args.child is not None:
        print(statistics.median(_step_times(args.child)))
        return
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    load = [subprocess.Popen([sys.executable, __file__, "--forever"], env=env) for _ in range(args.jobs)]
    try:
        time.sleep(5 if load else 0)  # let the load reach its steady state
        one, default = [], []
        for _ in range(args.repeats):
            one.append(_child_median(args.steps, 1))
            default.append(_child_median(args.steps, None))
    finally:
        for proc in load:
            proc.kill()
            proc.wait()
    print(f"background jobs: {args.jobs} (default threads); cores: {os.cpu_count()}")
    print("one thread, ms per step: " + ", ".join(f"{t * 1e3:.1f}" for t in one))
    print("default threads, ms per step: " + ", ".join(f"{t * 1e3:.1f}" for t in default))
    print(f"ms_per_step_one_thread={statistics.median(one) * 1e3:.1f}")
    print(f"ms_per_step_default_threads={statistics.median(default) * 1e3:.1f}")
    print(f"one_thread_speedup_under_load={statistics.median(default) / statistics.median(one):.2f}")


if __name__ == "__main__":
    main()
