"""Node structure features (NSFs) per owner, and their sharing in FedStruct-B (Algorithm 4/5).

* ``degree``: each client one-hot encodes its own nodes' degrees (intra + inter edges), which it
  knows locally;
* ``hop2vec``: random rows, learned during training. Every party draws the table from the run
  seed, so A, B and the hardened variant start from the same S (a deployment would draw each
  owner's rows privately; initial noise carries no data);
* ``node2vec``: needs walks over the *global* graph. FedStruct-A's server computes it; in B no
  party can, so the method computes it from the full graph as the paper's own B results did
  (notes B2, B6) and hands each owner its rows. result.json marks this ``nsf_source``.
"""

from __future__ import annotations

import hashlib
import os

import torch
import torch.nn.functional as F
from torch import Tensor

from securefg.data.root import cache_root
from securefg.federation.codec import encode_tensors
from securefg.methods.fedstruct.settings import FedStructSettings
from securefg.methods.tasks import NodeTask
from securefg.models.fedstruct import ClientGraphView, degree_features, train_node2vec

TAG_NSF = "fedstruct/nsf"

NSF_SOURCE = {
    "degree": "each owner, from its own edges",
    "hop2vec": "random, learned through the aggregated gradient",
    "node2vec": "global graph (simulation: no FedStruct-B party can run Node2Vec, as in the paper's B results)",
}


def hop2vec_table(num_nodes: int, settings: FedStructSettings, seed: int) -> Tensor:
    """The initial Hop2Vec S (``N(0, init_std^2)``) from the run seed."""
    gen = torch.Generator().manual_seed(seed + 7919)
    return torch.randn(num_nodes, settings.config.structure_dim, generator=gen) * settings.config.hop2vec_init_std


def node2vec_table(task: NodeTask, settings: FedStructSettings, seed: int, device: torch.device) -> Tensor:
    """Node2Vec NSFs of the global graph (FedStruct-A's server; B's simulation oracle).

    Pre-training dominates a Cora run (minutes on one thread) and is deterministic in the graph,
    the settings and the seed, so the table is cached under ``$SECUREFG_CACHE/fedstruct``
    keyed by a hash of exactly those inputs.
    """
    assert task.full_graph is not None
    g = task.full_graph
    ei = g.edge_index.cpu().contiguous()
    key = hashlib.sha256(ei.numpy().tobytes() + repr(
        (int(g.num_nodes), settings.config.structure_dim, settings.config.node2vec_epochs, seed)).encode()).hexdigest()[:20]
    path = cache_root() / "fedstruct" / f"node2vec_{key}.pt"
    if path.is_file():
        cached = torch.load(path, weights_only=True)
        if isinstance(cached, Tensor) and cached.shape == (int(g.num_nodes), settings.config.structure_dim):
            return cached
    with torch.random.fork_rng(devices=[]):  # a cache hit and a fresh table leave the global RNG alike
        table = train_node2vec(ei, int(g.num_nodes), embedding_dim=settings.config.structure_dim,
                               epochs=settings.config.node2vec_epochs, generator=torch.Generator().manual_seed(seed),
                               device=device).cpu()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parties in their own processes may write it at once
    torch.save(table, tmp)
    tmp.replace(path)
    return table


def global_table(task: NodeTask, settings: FedStructSettings, seed: int, device: torch.device) -> Tensor:
    """All of S computed by a party that holds the global graph (FedStruct-A's server)."""
    assert task.full_graph is not None
    n = int(task.full_graph.num_nodes)
    if settings.nsf == "hop2vec":
        return hop2vec_table(n, settings, seed)
    if settings.nsf == "degree":
        return degree_features(task.full_graph.edge_index.cpu(), n, num_features=settings.config.structure_dim)
    return node2vec_table(task, settings, seed, device)


def own_rows(view: ClientGraphView, settings: FedStructSettings, *, num_nodes: int, seed: int,
             oracle: Tensor | None) -> Tensor:
    """Owner k's NSF rows ``[n_k, d_s]`` (``oracle`` is the node2vec table, else unused)."""
    if settings.nsf == "degree":
        deg = view.degree() - 1 if settings.degree_edges == "all" else view.intra_degree()
        deg = deg.clamp_max(settings.config.structure_dim - 1)
        return F.one_hot(deg, settings.config.structure_dim).float()
    if settings.nsf == "hop2vec":
        return hop2vec_table(num_nodes, settings, seed)[view.nodes]
    assert oracle is not None
    return oracle[view.nodes].float()


def nsf_item(ids: Tensor, rows: Tensor) -> bytes:
    """Owner k's item in Algorithm 4/5's NSF sharing (``fedstruct/nsf`` relay): its ids and rows."""
    return encode_tensors({"ids": ids, "s": rows.float()})
