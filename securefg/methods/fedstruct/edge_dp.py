r"""FedStruct-B's edge-level DP option: every party works on a randomized-response copy of the graph.

``--option edge_dp_epsilon=E`` (variant B, plain or hardened). Before Algorithm 3, every pair of
nodes gets one noisy bit (:mod:`securefg.models.fedstruct.edge_rr`), drawn by exactly one party:

* pairs inside client ``k``: by ``k``;
* pairs between clients ``k < l``: by ``k`` (both know the true inter-edges, FedStruct-B's
  assumption), who sends ``l`` its reported pairs as a dense ``[n_l, n]`` 0/1 block in one
  ``peer_sum`` to ``l`` (tag ``fedstruct/edge_rr``; every other client sends zeros, so the
  sum carries exactly ``l``'s reported edges to lower-id clients and, under a masked stack,
  nothing to the server).

From then on every client uses only its reported view: Algorithm 3 (its rows of Ā), its local
propagation matrix, its degree NSFs. Everything any other party receives is therefore computed
from the reported graph, features and labels, so each edge (present or absent) is
``E``-edge-DP against the server and every other client for the whole run (pure DP, one
release, the rest is post-processing). A client keeps its true view only as its own knowledge
(state ``graph_view``, what the audit's attacker knows); ``structure_view`` holds the reported one.
Not covered: node features and labels (what the edges are DP *given*). ``edge_dp_local_graph``
lets the feature branch keep the true intra-client edges (a sparse graph's reported copy buries
them under fake pairs); the epsilon then no longer covers those edges, which reach θ and ∇S.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from securefg.errors import InvalidInputError
from securefg.models.fedstruct import ClientGraphView, NodeDirectory
from securefg.models.fedstruct.edge_rr import EdgeRR, UniformSource, csprng_uniform, respond, seeded_uniform

TAG_EDGE_RR = "fedstruct/edge_rr"


@dataclass
class EdgeDPCounts:
    """What the reporting did (simulation figures for result.json; no party learns them all)."""

    true_pairs: int = 0
    kept: int = 0
    fake: int = 0

    def record(self, true: Tensor, reported: Tensor, cols: int) -> None:
        """Count one block: its true pairs, the ones the report kept, and the fakes it added."""
        kept = _count_common(true, reported, cols)
        self.true_pairs += true.size(1)
        self.kept += kept
        self.fake += reported.size(1) - kept


def uniform_source(seed: int | None, client: int) -> UniformSource:
    """The OS CSPRNG, or (``seed`` given: measurements only) a per-client seeded source."""
    return csprng_uniform if seed is None else seeded_uniform(seed * 1_000_003 + client)


def _local_pairs(view: ClientGraphView) -> Tensor:
    """Intra-edges as local rows ``(a, b)``, ``a < b`` (one per undirected edge)."""
    e = view.intra_edges
    e = e[:, e[0] < e[1]]
    return torch.stack([view.local_rows(e[0]), view.local_rows(e[1])])


def _inter_pairs(view: ClientGraphView, directory: NodeDirectory, other: int) -> Tensor:
    """Inter-edges to client ``other`` as ``(row in this client, row in other)``."""
    pick = view.inter_owner == other
    u, w = view.inter_edges[0, pick], view.inter_edges[1, pick]
    theirs = directory.nodes_of(other)
    return torch.stack([view.local_rows(u), torch.searchsorted(theirs, w)])


@dataclass
class ClientReports:
    """Client ``k``'s randomized responses: what it draws, computed from its own view only.

    Args:
        intra (Tensor): Its reported intra pairs, both directions, as global ids ``[2, *]``.
        inter (list[Tensor]): Its reported pairs to higher-id clients, ``(own id, other id)``.
        out (dict[int, Tensor]): Per higher-id receiver: ``(row at the receiver, own global id)``.
        counts (EdgeDPCounts): What its reporting did (simulation figures).
    """

    intra: Tensor
    inter: list[Tensor]
    out: dict[int, Tensor]
    counts: EdgeDPCounts


def client_reports(view: ClientGraphView, directory: NodeDirectory, rr: EdgeRR, *, seed: int | None = None
                   ) -> ClientReports:
    """As client ``view.client_id``: report its intra pairs and its pairs to every higher-id client.

    Args:
        view (ClientGraphView): The client's true view.
        directory (NodeDirectory): The public owner of every node.
        rr (EdgeRR): Reporting probabilities.
        seed (int, optional): Seeded noise for measurements; ``None`` = the OS CSPRNG.
    """
    k, m = view.client_id, directory.num_clients
    counts = EdgeDPCounts()
    uniform = uniform_source(seed, k)
    mine = view.nodes
    pairs = _local_pairs(view)
    got = respond(pairs, (view.num_nodes, view.num_nodes), rr, uniform, upper=True)
    counts.record(pairs, got, view.num_nodes)
    a, b = mine[got[0]], mine[got[1]]
    intra = torch.cat([torch.stack([a, b]), torch.stack([b, a])], 1)
    inter: list[Tensor] = []
    out: dict[int, Tensor] = {}
    for other in range(k + 1, m):
        theirs = directory.nodes_of(other)
        pairs = _inter_pairs(view, directory, other)
        got = respond(pairs, (view.num_nodes, theirs.numel()), rr, uniform, upper=False)
        counts.record(pairs, got, theirs.numel())
        inter.append(torch.stack([mine[got[0]], theirs[got[1]]]))
        out[other] = torch.stack([got[1], mine[got[0]]])
    return ClientReports(intra, inter, out, counts)


def report_block(reports: ClientReports, receiver: int, directory: NodeDirectory) -> Tensor:
    """The dense 0/1 block this client puts into ``receiver``'s ``fedstruct/edge_rr`` peer sum."""
    return _block(reports.out.get(receiver), directory.nodes_of(receiver).numel(), directory.num_nodes)


def reported_view(view: ClientGraphView, directory: NodeDirectory, reports: ClientReports,
                  summed: Tensor | None) -> ClientGraphView:
    """As client ``view.client_id``: its reported view from its own reports and the summed block
    its lower-id peers sent it (``None`` for client 0, which has none).

    Raises:
        InvalidInputError: A received block that is not the 0/1 report of lower-id clients' pairs.
    """
    k = view.client_id
    inter = list(reports.inter)
    if summed is not None:
        inter.append(_received_pairs(summed.double(), directory.nodes_of(k), directory, k))
    e = _sorted(torch.cat(inter, 1) if inter else torch.zeros(2, 0, dtype=torch.long))
    return ClientGraphView(client_id=k, nodes=view.nodes, intra_edges=_sorted(reports.intra),
                           inter_edges=e, inter_owner=directory.owner[e[1]])


def _block(pairs: Tensor | None, rows: int, n: int) -> Tensor:
    """The dense ``[rows, n]`` 0/1 report a sender puts into the receiver's peer sum (zeros if none)."""
    block = torch.zeros(rows, n)
    if pairs is not None:
        block[pairs[0], pairs[1]] = 1.0
    return block


def _received_pairs(summed: Tensor, theirs: Tensor, directory: NodeDirectory, recv: int) -> Tensor:
    """``(own global id, other global id)`` from a summed report block, checked."""
    if not torch.isfinite(summed).all() or bool(((summed != 0) & (summed != 1)).any()):
        raise InvalidInputError(f"{TAG_EDGE_RR}: client {recv} received a report block with entries other than 0/1 "
                                "(each pair is reported by one peer only)")
    rows, cols = summed.nonzero(as_tuple=True)
    if bool((directory.owner[cols] >= recv).any()):
        raise InvalidInputError(f"{TAG_EDGE_RR}: client {recv} received reports for pairs it draws itself or that "
                                "lie inside its own node set")
    return torch.stack([theirs[rows], cols])


def _count_common(true: Tensor, got: Tensor, cols: int) -> int:
    return int(torch.isin(true[0] * cols + true[1], got[0] * cols + got[1]).sum())


def _sorted(e: Tensor) -> Tensor:
    if e.numel() == 0:
        return e.long().reshape(2, 0)
    order = torch.argsort(e[0] * (int(e.max()) + 1) + e[1])
    return e[:, order].long()


def privacy_block(rr: EdgeRR, counts: EdgeDPCounts, *, seeded: bool, local_graph: bool = False) -> dict[str, Any]:
    """``result.json``'s ``privacy`` for the option."""
    covered = ("not covered: node features and labels; and (edge_dp_local_graph) each client's true intra-client "
               "edges, which its feature branch propagates over, so theta updates and the NSF gradient depend on them."
               if local_graph else "not covered: node features and labels.")
    return {
        "epsilon": rr.epsilon, "delta": 0.0, "unit": "edge", "accountant": "pure (randomized response, one release)",
        "mechanism": "fedstruct edge_dp_epsilon", "keep_p": rr.keep, "fake_p": rr.fake,
        "true_pairs": counts.true_pairs, "kept": counts.kept, "fake": counts.fake, "noise": "seeded" if seeded else "csprng",
        "local_graph": "true intra-client edges" if local_graph else "reported",
        "notes": [
            ("unit 'edge': neighbouring graphs differ in one node pair; every pair is reported once by one party and "
             "everything any other party receives (A-bar rows, NSF gradients, theta, degree NSFs) is computed from the "
             "reported graph: no composition over hops or rounds."),
            covered,
            "counts (true pairs, kept, fake) are simulation figures: no single party learns them.",
        ],
    }


__all__ = ["TAG_EDGE_RR", "ClientReports", "EdgeDPCounts", "client_reports", "privacy_block", "report_block",
           "reported_view", "uniform_source"]
