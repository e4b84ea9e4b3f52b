"""How much faster GraphSage's sampled mini-batch step is when it reads a sparse feature matrix's rows as sparse.

Run: ``python bench/sampled_sparse_rows.py [--steps 30] [--repeats 2]``. A graph of Coauthor-CS's
size (18,333 nodes, about 163,800 directed edges, 6,805 bag-of-words features with 0.9% non-zero,
15 classes); one step of ``securefg.methods.training.train_node_sampled_epochs`` (64 target nodes,
5 + 5 sampled neighbours, forward, backward, Adam) on ``securefg.models.sage.GraphSage``, timed two
ways on the same batches in one process, alternating ``--repeats`` times: reading the block's rows
as CSR rows of the cached sparse view (``GraphSage.batch_features``, what training does) and as
dense rows ``x[nodes]`` (what it did before). Median seconds per step of each; the last line,
``sparse_rows_step_speedup``, is dense over sparse. Why: docs/performance.md, "Training on large
graphs".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NODES, EDGES, FEATURES, CLASSES, DENSITY = 18_333, 81_894, 6_805, 15, 0.009


def _graph():
    import torch
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(NODES, FEATURES, generator=gen) < DENSITY).float()
    src = torch.randint(0, NODES, (EDGES,), generator=gen)
    dst = torch.randint(0, NODES, (EDGES,), generator=gen)
    edge_index = torch.unique(torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]), dim=1)
    return Data(x=x, edge_index=edge_index, y=torch.randint(0, CLASSES, (NODES,), generator=gen),
                train_mask=torch.rand(NODES, generator=gen) < 0.6, num_nodes=NODES)


def _median_step(data, *, sparse_rows: bool, steps: int) -> float:
    """Median seconds of one sampled step (batch 64, fanouts 5,5), after two warm-up steps."""
    import torch

    from securefg.methods.optim import adam
    from securefg.methods.training import train_node_sampled_epochs
    from securefg.models.sage import GraphSage

    torch.manual_seed(0)
    model = GraphSage(FEATURES, 64, 2, CLASSES, dropout=0.5)
    if not sparse_rows:
        model.batch_features = lambda x, nodes: x[nodes]  # the dense rows training read before
    opt = adam(model.parameters(), lr=0.001)
    one_batch = data.clone()
    train_idx = data.train_mask.nonzero().view(-1)
    times = []
    for i in range(steps + 2):
        mask = torch.zeros(NODES, dtype=torch.bool)
        mask[train_idx[64 * i: 64 * (i + 1)]] = True
        one_batch.train_mask = mask
        start = time.perf_counter()
        train_node_sampled_epochs(model, opt, one_batch, 1, batch_size=64, fanouts=(5, 5),
                                  generator=torch.Generator().manual_seed(i))
        if i >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement")
    parser.add_argument("--repeats", type=int, default=2, help="alternating measurements of each way")
    args = parser.parse_args()
    data = _graph()
    sparse, dense = [], []
    for _ in range(args.repeats):
        sparse.append(_median_step(data, sparse_rows=True, steps=args.steps))
        dense.append(_median_step(data, sparse_rows=False, steps=args.steps))
    print(f"sparse rows: {', '.join(f'{t * 1e3:.1f}' for t in sparse)} ms per step")
    print(f"dense rows:  {', '.join(f'{t * 1e3:.1f}' for t in dense)} ms per step")
    print(f"sparse_rows_step_ms={statistics.median(sparse) * 1e3:.1f}")
    print(f"dense_rows_step_ms={statistics.median(dense) * 1e3:.1f}")
    print(f"sparse_rows_step_speedup={statistics.median(dense) / statistics.median(sparse):.2f}")


if __name__ == "__main__":
    main()
