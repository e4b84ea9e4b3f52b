"""FedStruct (Aliakbari et al.): decoupled GCN over interconnected client subgraphs.

``variant=B`` (default): nobody holds the global graph. Offline, every client obtains its rows
of Ā through Algorithm 3 over ``peer_sum`` (``fedstruct/abar``, masked under the secure
stack), then NSFs are shared (``fedstruct/nsf``, sealed relay) and training is FedSGD with the
gradients summed by a secure ``aggregate`` (``fedstruct/update``). ``hardened=true`` replaces
NSF sharing with App. L.1's aggregated answers. For Hop2Vec, the summed NSF gradient every
client needs to step its copy of S goes through ``shared_sum`` (``fedstruct/nsf_grad``): under
the secure stack (``blind_sum``) the server relays it blinded and never reads it. ``variant=A``: the server holds the global
graph and serves NSEs (``fedstruct/nse``). Metric reports use ``fedstruct/metrics``.

Round ``r`` scores the model received in round ``r`` (θ after ``r`` server steps), so a run of
``R`` rounds scores θ_0..θ_{R-1}; selection is by pooled validation accuracy. Training stops
``patience`` (default 20) rounds after the best pooled validation accuracy, which the server
learns from ``fedstruct/metrics`` anyway (``--option patience=0`` runs all ``R`` rounds).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.federation.federation import Federation
from securefg.federation.party import client_index
from securefg.methods.base import Method, MethodConfig, Task, register_method, select_best_round
from securefg.methods.fedstruct import hardened, variant_a, variant_b
from securefg.methods.fedstruct.edge_dp import TAG_EDGE_RR, EdgeDPCounts, privacy_block, report_views
from securefg.methods.fedstruct.offline import TAG_ABAR, OfflineCost, offline_round, run_algorithm3
from securefg.methods.fedstruct.parties import client_data, client_views, directory_of, make_model
from securefg.methods.fedstruct.server import ServerOptimizer, structure_optimizer
from securefg.methods.fedstruct.settings import OPTION_DEFAULTS, FedStructSettings, parse_settings
from securefg.methods.fedstruct.structure import (
    NSF_SOURCE,
    TAG_NSF,
    global_table,
    node2vec_table,
    own_rows,
    share_rows,
)
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig
from securefg.models.fedstruct import multi_hop_adjacency, rw_normalized_adjacency
from securefg.protocol.mechanism import ExchangeKind

TAG_MODEL = "fedstruct/model"
TAG_UPDATE = "fedstruct/update"
TAG_METRICS = "fedstruct/metrics"
TAG_COUNT = "fedstruct/count"
TAG_NSE = "fedstruct/nse"
TAG_NSF_GRAD = variant_b.TAG_NSF_GRAD


@register_method
class FedStruct(Method):
    """FedStruct-A/B with degree, Node2Vec or Hop2Vec NSFs (options in :mod:`.settings`)."""

    name = "fedstruct"
    tasks = frozenset({"node"})
    default_stack = "fedstruct_secure"
    option_defaults = OPTION_DEFAULTS
    server_val_key = "server_val_acc"
    #: Stop 20 rounds after the best pooled validation accuracy (securely summed counts the
    #: server already learns): the reported round is the same best-validation round, and the
    #: training traffic ends with it (``--option patience=0``: the paper's fixed rounds).
    default_patience = 20
    ROBUST_TAGS = (TAG_UPDATE, TAG_NSF_GRAD)
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        TAG_ABAR: ExchangeKind.PEER_SUM,
        TAG_EDGE_RR: ExchangeKind.PEER_SUM,
        TAG_NSF: ExchangeKind.RELAY,
        TAG_COUNT: ExchangeKind.AGGREGATE,
        TAG_MODEL: ExchangeKind.BROADCAST,
        TAG_UPDATE: ExchangeKind.AGGREGATE,
        TAG_NSF_GRAD: ExchangeKind.SHARED_SUM,
        TAG_METRICS: ExchangeKind.AGGREGATE,
        TAG_NSE: ExchangeKind.SEND,
        hardened.TAG_H0: ExchangeKind.SEND,
        hardened.TAG_NSE: ExchangeKind.PEER_SUM,
        hardened.TAG_NSE_GRAD: ExchangeKind.PEER_SUM,
    }

    @staticmethod
    def train_defaults(task: Task) -> TrainConfig:
        """Table 4 (Cora): λ = 0.002, weight decay 5e-4; one full-batch step per round."""
        return TrainConfig(lr=0.002, weight_decay=5e-4, local_epochs=1)

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        self.settings: FedStructSettings = parse_settings(self.options, lr=config.train.lr,
                                                         weight_decay=config.train.weight_decay)
        self.offline: OfflineCost | None = None
        self.nsf_cost: dict[str, str | float | int] = {}
        self.edge_dp_counts: EdgeDPCounts | None = None
        self._fed: Federation | None = None

    @property
    def hop2vec(self) -> bool:
        return self.settings.nsf == "hop2vec"

    # ------------------------------------------------------------------------- setup
    def setup(self, fed: Federation) -> None:
        assert isinstance(self.task, NodeTask)
        self._fed = fed
        dev, seed = self.config.device, self.config.seed
        directory = directory_of(self.task)
        views = client_views(self.task, directory)
        used = views
        if self.settings.edge_dp is not None:  # every party computes on its reported view from here on
            used, self.edge_dp_counts = report_views(
                fed, views, directory, self.settings.edge_dp, seed=seed if self.settings.edge_dp_seeded else None,
                at_round=offline_round(1, len(self.settings.betas)))
        for k, (pid, view, mine) in enumerate(zip(fed.client_ids, views, used, strict=True)):
            st = fed.parties[pid].state
            st.update(graph_view=view, structure_view=mine, directory=directory,
                      data=client_data(self.task, k, view if self.settings.edge_dp_local_graph else mine,
                                       self.settings, dev),
                      model=make_model(self.task, self.settings, seed, dev), betas=list(self.settings.betas),
                      num_nodes=directory.num_nodes, global_ids=view.nodes)
        fed.server.state["server_opt"] = ServerOptimizer(make_model(self.task, self.settings, seed, dev), self.settings.config)
        fed.server.state["directory"] = directory  # public id/owner agreement (notes B0)
        fed.set_round(-1)
        counts = {pid: {"n": torch.tensor([float(fed.parties[pid].state["data"].num_labeled)])} for pid in fed.client_ids}
        fed.server.state["num_labeled"] = round(float(fed.exchange.aggregate(TAG_COUNT, counts, mean=False)["n"]))
        if self.settings.variant == "A":
            self._setup_a(fed)
        else:
            self._setup_b(fed, used)

    def _setup_a(self, fed: Federation) -> None:
        """The server holds the global graph (edges only), Ā and S."""
        task = self.task
        assert isinstance(task, NodeTask) and task.full_graph is not None
        st, cfg = fed.server.state, self.settings.config
        n = int(task.full_graph.num_nodes)
        a_hat = rw_normalized_adjacency(task.full_graph.edge_index.cpu(), n)
        st["abar_global"] = multi_hop_adjacency(a_hat, self.settings.betas).to(self.config.device)
        table = global_table(task, self.settings, self.config.seed, self.config.device).to(self.config.device)
        if self.hop2vec:
            st["structure"], st["structure_opt"] = structure_optimizer(table, cfg)
        else:
            st["structure"] = table

    def _setup_b(self, fed: Federation, views: list[Any]) -> None:
        """Algorithm 3, then NSFs shared (B) or kept by their owners (hardened)."""
        self.offline = run_algorithm3(fed, betas=self.settings.betas, prune_p=self.settings.prune_p)
        seed, dev, cfg = self.config.seed, self.config.device, self.settings.config
        num_nodes = fed.server.state["directory"].num_nodes
        oracle = node2vec_table(self.task, self.settings, seed, dev) if self.settings.nsf == "node2vec" else None  # type: ignore[arg-type]
        rows = {pid: own_rows(v, self.settings, num_nodes=num_nodes, seed=seed, oracle=oracle)
                for pid, v in zip(fed.client_ids, views, strict=True)}
        fed.set_round(-1)
        start, before = time.perf_counter(), len(fed.transcript)
        if self.settings.hardened:
            hardened.share_columns(fed)
            tables = rows
            tag = hardened.TAG_H0
        else:
            tables = share_rows(fed, {pid: (v.nodes, rows[pid]) for pid, v in zip(fed.client_ids, views, strict=True)},
                                num_nodes)
            tag = TAG_NSF
        recs = [r for r in list(fed.transcript)[before:] if r.tag == tag]
        self.nsf_cost = {"tag": tag, "bytes": sum(r.payload_bytes for r in recs),
                         "wire_bytes": sum(r.wire_bytes for r in recs), "seconds": time.perf_counter() - start}
        for pid in fed.client_ids:
            st = fed.parties[pid].state
            table = tables[pid].to(dev)
            if self.hop2vec:
                st["structure"], st["structure_opt"] = structure_optimizer(table, cfg)
            else:
                st["structure"] = table
            if not self.settings.hardened:
                st["batch"] = variant_b.client_batch(st["data"], st["abar"])

    # ------------------------------------------------------------------------- rounds
    def run_round(self, fed: Federation, r: int) -> dict[str, float]:
        ex, server = fed.exchange, fed.server
        opt: ServerOptimizer = server.state["server_opt"]
        count = {"num_labeled": torch.tensor([float(server.state["num_labeled"])])}
        if self.settings.variant == "A":
            nse_train, nse_eval = variant_a.server_nse(server)
            received = ex.broadcast(TAG_MODEL, {**opt.theta("f."), **count})
            updates = {}
            directory = server.state["directory"]
            for cid, theta_f in received.items():
                rows = directory.nodes_of(client_index(cid))
                nse = ex.send(TAG_NSE, {"nse": nse_train[rows].detach(), "nse_eval": nse_eval[rows]},
                              sender=server.pid, receiver=cid)
                updates[cid] = variant_a.handle_round(fed.parties[cid], theta_f, nse)
            total = ex.aggregate(TAG_UPDATE, updates, mean=False)
            g_grads = self._server_backward_a(server, nse_train, total[variant_a.NSE_GRAD])
            opt.step(total, extra=g_grads)
        else:
            received = ex.broadcast(TAG_MODEL, {**opt.theta(), **count})
            if self.settings.hardened:
                updates = hardened.run_round(fed, received, self.settings.query_budget)
            else:
                updates = {cid: variant_b.handle_round(fed.parties[cid], msg, hop2vec=self.hop2vec)
                           for cid, msg in received.items()}
                nsf_grads = {cid: {variant_b.NSF_GRAD: u.pop(variant_b.NSF_GRAD)} for cid, u in updates.items()
                             if variant_b.NSF_GRAD in u}
                if nsf_grads:  # Hop2Vec: the summed ∇S is for the clients (B5); the server relays it
                    for cid, got in ex.shared_sum(TAG_NSF_GRAD, nsf_grads).items():
                        variant_b.keep_nsf_grad(fed.parties[cid], got[variant_b.NSF_GRAD])
            total = ex.aggregate(TAG_UPDATE, updates, mean=False)
            opt.step(total)
        reports = {cid: {"counts": fed.parties[cid].state["counts"]} for cid in fed.client_ids}
        c = ex.aggregate(TAG_METRICS, reports, mean=False)["counts"]
        return {"server_val_acc": float(c[0] / c[1]) if c[1] else float("nan"),
                "server_test_acc": float(c[2] / c[3]) if c[3] else float("nan")}

    def _server_backward_a(self, server: Any, nse_train: torch.Tensor, nse_grad: torch.Tensor) -> dict[str, torch.Tensor]:
        """A's server: the summed NSE gradient through ``g`` (returns ∇θ_s) and S (steps Hop2Vec)."""
        st = server.state
        model = st["server_opt"].model
        g_params = dict(model.g.named_parameters(prefix="g"))
        table = st["structure"]
        inputs = list(g_params.values()) + ([table] if table.requires_grad else [])
        grads = torch.autograd.grad(nse_train, inputs, grad_outputs=nse_grad.to(nse_train.dtype), allow_unused=True)
        if table.requires_grad:
            st["structure_opt"].zero_grad(set_to_none=True)
            table.grad = grads[-1]
            st["structure_opt"].step()
        return {k: (g if g is not None else torch.zeros_like(p))
                for (k, p), g in zip(g_params.items(), grads[: len(g_params)], strict=True)}

    # ---------------------------------------------------------------------- checkpoints
    def checkpoint(self, fed: Federation) -> dict[str, dict[str, Any]]:
        """Modules and optimisers, plus the plain tensors that change during training (S, ∇S)."""
        out = super().checkpoint(fed)
        for pid, party in fed.parties.items():
            tensors = {k: party.state[k].detach().clone() for k in _TRAINED_TENSORS
                       if isinstance(party.state.get(k), torch.Tensor)}
            if tensors:
                out.setdefault(pid, {})[_TENSORS] = tensors
        return out

    def restore(self, fed: Federation, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Load a checkpoint; S is copied in place so its optimiser keeps the same tensor."""
        plain = {pid: {k: v for k, v in items.items() if k != _TENSORS} for pid, items in state.items()}
        super().restore(fed, plain)
        for pid, items in state.items():
            for k, t in items.get(_TENSORS, {}).items():
                current = fed.parties[pid].state.get(k)
                if isinstance(current, torch.Tensor) and current.shape == t.shape:
                    with torch.no_grad():
                        current.copy_(t)
                else:
                    fed.parties[pid].state[k] = t

    # ------------------------------------------------------------------------ measuring
    def measure(self, fed: Federation) -> dict[str, Any]:
        """Pooled accuracy over all clients' nodes (the reference trainer's metric), per client too."""
        per_client, tot = {}, torch.zeros(4, dtype=torch.float64)
        for pid in fed.client_ids:
            c = fed.parties[pid].state["counts"]
            tot += c
            per_client[pid] = {"val_acc": _ratio(c[0], c[1]), "test_acc": _ratio(c[2], c[3])}
        return {"per_client": per_client, "mean_val": _ratio(tot[0], tot[1]), "mean_test": _ratio(tot[2], tot[3])}

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        best = select_best_round(history)
        if not best:
            return {}
        return {"test_acc": best.pop("test"), **best, "pooled": True}

    def report(self) -> dict[str, Any]:
        """result.json extras: settings and the offline phase's cost apart from training."""
        out: dict[str, Any] = {"fedstruct": {
            "variant": self.settings.variant, "nsf": self.settings.nsf, "hardened": self.settings.hardened,
            "prune_p": self.settings.prune_p, "nsf_source": NSF_SOURCE[self.settings.nsf]
            if self.settings.variant == "B" else "server (holds the global graph)",
            "structure_hops": self.settings.config.structure_hops, "label": self.settings.label,
        }}
        fed = self._fed
        offline: dict[str, Any] = {}
        if self.offline is not None:
            offline["abar"] = self.offline.to_dict()
        if self.nsf_cost:
            offline["nsf_share"] = dict(self.nsf_cost)
        if offline and fed is not None:
            off_bytes = sum(v["bytes"] for v in offline.values())
            offline["bytes_total"] = off_bytes
            offline["seconds_total"] = sum(float(v["seconds"]) for v in offline.values() if isinstance(v, dict))
            offline["training_bytes"] = fed.transcript.bytes_total() - off_bytes
        if offline:
            out["offline"] = offline
        if self.settings.edge_dp is not None and self.edge_dp_counts is not None:
            out["privacy"] = privacy_block(self.settings.edge_dp, self.edge_dp_counts, seeded=self.settings.edge_dp_seeded,
                                           local_graph=self.settings.edge_dp_local_graph)
        if self.settings.hardened and fed is not None:
            out["fedstruct"]["queries_answered"] = {
                pid: dict(fed.parties[pid].state.get("queries", {})) for pid in fed.client_ids}
        return out


_TENSORS = "fedstruct/tensors"
_TRAINED_TENSORS = ("structure", "nsf_grad")


def _ratio(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a / b) if float(b) > 0 else float("nan")
