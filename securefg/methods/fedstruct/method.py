"""FedStruct (Aliakbari et al.): decoupled GCN over interconnected client subgraphs.

``variant=B`` (default): nobody holds the global graph. Offline, every client obtains its rows
of Ā through Algorithm 3 over ``peer_sum`` (``fedstruct/abar``, masked under the secure
stack; by default only each receiver's boundary rows travel, in a layout it first relays to the
other clients, ``fedstruct/boundary``), then NSFs are shared (``fedstruct/nsf``, sealed relay) and training is FedSGD with the
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

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import torch

from securefg.federation.federation import Federation
from securefg.federation.party import SERVER, Party, client_id, client_index
from securefg.federation.program.context import ClientAction, ClientContext, ServerContext
from securefg.federation.program.step import InfoValue
from securefg.methods.base import Method, MethodConfig, Task, register_method, select_best_round
from securefg.methods.fedstruct import hardened, variant_a, variant_b
from securefg.methods.fedstruct.boundary import (
    DENSE_KEY,
    SALT_BYTES,
    TAG_BOUNDARY,
    BoundaryLayout,
    read_layouts,
)
from securefg.methods.fedstruct.edge_dp import (
    TAG_EDGE_RR,
    EdgeDPCounts,
    client_reports,
    privacy_block,
    report_block,
    reported_view,
)
from securefg.methods.fedstruct.nsf_screen import screened_table
from securefg.methods.fedstruct.offline import TAG_ABAR, OfflineCost, offline_round, structure_view
from securefg.methods.fedstruct.parties import (
    client_data,
    client_views,
    directory_of,
    load_parameters,
    make_model,
)
from securefg.methods.fedstruct.server import ServerOptimizer, prefixed, structure_optimizer
from securefg.methods.fedstruct.settings import OPTION_DEFAULTS, FedStructSettings, parse_settings
from securefg.methods.fedstruct.structure import (
    NSF_SOURCE,
    TAG_NSF,
    global_table,
    node2vec_table,
    nsf_item,
    own_rows,
)
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig, party_rng
from securefg.models.fedstruct import (
    ClientGraphView,
    assemble,
    init_abar_state,
    multi_hop_adjacency,
    rw_normalized_adjacency,
)
from securefg.models.fedstruct.abar_protocol import contribution
from securefg.protocol.mechanism import ExchangeKind

TAG_MODEL = "fedstruct/model"
TAG_UPDATE = "fedstruct/update"
TAG_METRICS = "fedstruct/metrics"
TAG_COUNT = "fedstruct/count"
TAG_NSE = "fedstruct/nse"
TAG_NSF_GRAD = variant_b.TAG_NSF_GRAD

ACTION_EDGE_RR = "fedstruct/edge_rr/offer"
ACTION_EDGE_RR_RECEIVE = "fedstruct/edge_rr/receive"
ACTION_COUNT = "fedstruct/count"
ACTION_ABAR_INIT = "fedstruct/abar/init"
ACTION_BOUNDARY = "fedstruct/boundary/keep"
ACTION_ABAR_OFFER = "fedstruct/abar/offer"
ACTION_ABAR_ASSEMBLE = "fedstruct/abar/assemble"
ACTION_NSF_OFFER = "fedstruct/nsf/offer"
ACTION_NSF_ASSEMBLE = "fedstruct/nsf/assemble"
ACTION_H0_SEND = "fedstruct/h0/send"
ACTION_H0_RECEIVE = "fedstruct/h0/receive"
ACTION_ROUND = "fedstruct/round"
ACTION_KEEP_NSF_GRAD = "fedstruct/nsf_grad/keep"
ACTION_H_ANSWER = "fedstruct/hardened/answer"
ACTION_H_RECEIVE = "fedstruct/hardened/receive"
ACTION_H_BACKWARD = "fedstruct/hardened/backward"


@register_method
class FedStruct(Method):
    """FedStruct-A/B with degree, Node2Vec or Hop2Vec NSFs (options in :mod:`.settings`)."""

    name = "fedstruct"
    tasks = frozenset({"node"})
    #: fedstruct_secure plus the norm filter on the gradient sums (issue 43: it passes the malicious-client
    #: audit at no accuracy cost; ∇S stays server-blind under blind_robust). The paper's table keeps
    #: fedstruct_secure, the stack its protected column was measured under.
    default_stack = "fedstruct_secure_robust"
    option_defaults = OPTION_DEFAULTS
    server_val_key = "server_val_acc"
    #: Stop 20 rounds after the best pooled validation accuracy (securely summed counts the
    #: server already learns): the reported round is the same best-validation round, and the
    #: training traffic ends with it (``--option patience=0``: the paper's fixed rounds).
    default_patience = 20
    ROBUST_TAGS = (TAG_UPDATE, TAG_NSF_GRAD)
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        TAG_ABAR: ExchangeKind.PEER_SUM,
        TAG_BOUNDARY: ExchangeKind.RELAY,
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
        self._offline_facts: dict[str, Any] = {}
        """What the server saw of the setup phase (its measurement), for :meth:`report`."""
        self.edge_dp_counts: EdgeDPCounts | None = None
        self._transcript: Any = None
        """The run's (merged) transcript (``observe_run``), for the offline phase's bytes."""
        self._queries: dict[str, dict[str, int]] = {}
        assert isinstance(task, NodeTask)
        # What the server knows by design, kept before a backend strips the server's task of the
        # clients' data (the Flower server process): the public id/owner directory (notes B0) and,
        # in variant A only, the global graph (edges) the server holds.
        self._directory = directory_of(task) if task.full_graph is not None else None
        self._server_graph = task.full_graph if self.settings.variant == "A" else None

    @property
    def hop2vec(self) -> bool:
        return self.settings.nsf == "hop2vec"

    # ------------------------------------------------------------------------- setup
    def setup_server(self, party: Party) -> None:
        """θ and its optimiser, the public directory; variant A also the global graph's Ā and S."""
        assert isinstance(self.task, NodeTask)
        dev, seed = self.config.device, self.config.seed
        party.state["server_opt"] = ServerOptimizer(make_model(self.task, self.settings, seed, dev), self.settings.config)
        party.state["directory"] = self._directory  # public id/owner agreement (notes B0)
        if self.settings.variant == "A":
            self._setup_a(party)

    def setup_client(self, party: Party, index: int) -> None:
        """Client ``index``'s own view of the graph (its edges and its inter-edges' owners), data
        and model; under edge DP the view it computes on is replaced in ``server_prepare``."""
        assert isinstance(self.task, NodeTask)
        dev, seed = self.config.device, self.config.seed
        directory = directory_of(self.task)
        view = client_views(self.task, directory)[index]  # simulation: read from the task, own rows only
        party.state.update(graph_view=view, structure_view=view, directory=directory,
                           data=client_data(self.task, index, view, self.settings, dev),
                           model=make_model(self.task, self.settings, seed, dev), betas=list(self.settings.betas),
                           num_nodes=directory.num_nodes, global_ids=view.nodes)
        if self.settings.variant == "B" and self.settings.nsf == "node2vec":  # the simulation oracle (notes B2)
            party.state["node2vec_rows"] = node2vec_table(self.task, self.settings, seed, dev)[view.nodes].float()

    def _setup_a(self, server: Party) -> None:
        """The server holds the global graph (edges only), Ā and S."""
        assert isinstance(self.task, NodeTask) and self._server_graph is not None
        task = replace(self.task, full_graph=self._server_graph)
        st, cfg = server.state, self.settings.config
        n = int(task.full_graph.num_nodes)
        a_hat = rw_normalized_adjacency(task.full_graph.edge_index.cpu(), n)
        st["abar_global"] = multi_hop_adjacency(a_hat, self.settings.betas).to(self.config.device)
        table = global_table(task, self.settings, self.config.seed, self.config.device).to(self.config.device)
        if self.hop2vec:
            st["structure"], st["structure_opt"] = structure_optimizer(table, cfg)
        else:
            st["structure"] = table

    def server_prepare(self, srv: ServerContext) -> None:
        """The setup phase with communication (rounds -L_s .. -1): the labelled count, then (B)
        edge-DP reports, Algorithm 3 and the NSF sharing (or the hardened H0 blocks)."""
        ex = srv.exchange
        hops = len(self.settings.betas)
        if self.settings.variant == "B" and self.settings.edge_dp is not None:
            ex.round = offline_round(1, hops)
            srv.ask(ACTION_EDGE_RR)
            for recv in srv.clients[1:]:
                srv.peer_sum(TAG_EDGE_RR, recv)
            srv.ask(ACTION_EDGE_RR_RECEIVE)
            ex.round = -1
        srv.ask(ACTION_COUNT)
        srv.state["num_labeled"] = round(float(srv.aggregate(TAG_COUNT, mean=False)["n"]))
        if self.settings.variant == "B":
            self._prepare_b(srv)

    def _prepare_b(self, srv: ServerContext) -> None:
        """Algorithm 3 (every client gets its rows of Ā through peer sums), then NSFs shared (B)
        or column blocks sent to their owners (hardened). The server keeps what it saw of the
        phase (``fedstruct/offline``: hops, peer sums, time, non-zeros the clients reported)."""
        ex = srv.exchange
        hops = len(self.settings.betas)
        start = time.perf_counter()
        srv.ask(ACTION_ABAR_INIT)
        if hops > 1 and self._boundary_rows(len(srv.clients)):  # each receiver's row layout, to the others
            srv.relay(TAG_BOUNDARY, exclude_self=True, shuffle=True)
            srv.ask(ACTION_BOUNDARY)
        sums = nnz = 0
        hop = 1
        for hop in range(2, hops + 1):
            ex.round = offline_round(hop, hops)
            nnz += sum(int(v.get("nnz", 0)) for v in srv.ask(ACTION_ABAR_OFFER).values())
            if len(srv.clients) > 1:
                for target in srv.clients:
                    srv.peer_sum(TAG_ABAR, target)
                    sums += 1
            srv.ask(ACTION_ABAR_ASSEMBLE)
        ex.round = -1
        abar = {"hops": hop, "peer_sums": sums, "seconds": time.perf_counter() - start,
                "prune_p": self.settings.prune_p, "nonzeros": nnz}
        start = time.perf_counter()
        if self.settings.hardened:
            srv.ask(ACTION_H0_SEND)
            srv.ask(ACTION_H0_RECEIVE)
            tag = hardened.TAG_H0
        else:
            srv.ask(ACTION_NSF_OFFER)
            srv.relay(TAG_NSF, exclude_self=True, shuffle=True)
            srv.ask(ACTION_NSF_ASSEMBLE)
            tag = TAG_NSF
        srv.state[_OFFLINE] = {"abar": abar, "nsf_share": {"tag": tag, "seconds": time.perf_counter() - start}}

    # ------------------------------------------------------------------------- rounds
    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        opt: ServerOptimizer = srv.state["server_opt"]
        count = {"num_labeled": torch.tensor([float(srv.state["num_labeled"])])}
        if self.settings.variant == "A":
            with party_rng(self.config.seed, SERVER, r):
                nse_train, nse_eval = variant_a.server_nse(srv.party)
            srv.broadcast(TAG_MODEL, {**opt.theta("f."), **count})
            directory = srv.state["directory"]
            for cid in srv.clients:
                rows = directory.nodes_of(client_index(cid))
                srv.send(TAG_NSE, {"nse": nse_train[rows].detach(), "nse_eval": nse_eval[rows]}, to=cid)
            srv.ask(ACTION_ROUND)
            total = srv.aggregate(TAG_UPDATE, mean=False)
            g_grads = self._server_backward_a(srv.party, nse_train, total[variant_a.NSE_GRAD])
            opt.step(total, extra=g_grads)
        elif self.settings.hardened:
            srv.broadcast(TAG_MODEL, {**opt.theta(), **count})
            srv.ask(ACTION_H_ANSWER)
            for target in srv.clients if len(srv.clients) > 1 else ():
                srv.peer_sum(hardened.TAG_NSE, target)
            srv.ask(ACTION_H_RECEIVE)
            for owner in srv.clients if len(srv.clients) > 1 else ():
                srv.peer_sum(hardened.TAG_NSE_GRAD, owner)
            srv.ask(ACTION_H_BACKWARD)
            opt.step(srv.aggregate(TAG_UPDATE, mean=False))
        else:
            srv.broadcast(TAG_MODEL, {**opt.theta(), **count})
            srv.ask(ACTION_ROUND)
            if self.hop2vec:  # the summed ∇S is for the clients (B5); the server relays it
                srv.shared_sum(TAG_NSF_GRAD)
                srv.ask(ACTION_KEEP_NSF_GRAD)
            opt.step(srv.aggregate(TAG_UPDATE, mean=False))
        c = srv.aggregate(TAG_METRICS, mean=False)["counts"]
        return {"server_val_acc": float(c[0] / c[1]) if c[1] else float("nan"),
                "server_test_acc": float(c[2] / c[3]) if c[3] else float("nan")}

    # ------------------------------------------------------------------ client half
    def client_actions(self) -> Mapping[str, ClientAction]:
        return {
            ACTION_EDGE_RR: self.on_edge_rr, ACTION_EDGE_RR_RECEIVE: self.on_edge_rr_receive,
            ACTION_COUNT: self.on_count, ACTION_ABAR_INIT: self.on_abar_init, ACTION_BOUNDARY: self.on_boundary,
            ACTION_ABAR_OFFER: self.on_abar_offer,
            ACTION_ABAR_ASSEMBLE: self.on_abar_assemble, ACTION_NSF_OFFER: self.on_nsf_offer,
            ACTION_NSF_ASSEMBLE: self.on_nsf_assemble, ACTION_H0_SEND: self.on_h0_send,
            ACTION_H0_RECEIVE: self.on_h0_receive, ACTION_ROUND: self.on_round,
            ACTION_KEEP_NSF_GRAD: self.on_keep_nsf_grad, ACTION_H_ANSWER: self.on_h_answer,
            ACTION_H_RECEIVE: self.on_h_receive, ACTION_H_BACKWARD: self.on_h_backward,
        }

    def on_edge_rr(self, cli: ClientContext) -> None:
        """Edge DP: draw this client's reports; send each higher-id client its block (every
        other peer of that client sends zeros) through that client's peer sum."""
        st = cli.state
        rr = self.settings.edge_dp
        assert rr is not None
        directory = st["directory"]
        reports = client_reports(st["graph_view"], directory, rr,
                                 seed=self.config.seed if self.settings.edge_dp_seeded else None)
        st["edge_dp_reports"] = reports
        me = client_index(cli.pid)
        for recv in range(1, directory.num_clients):
            if recv != me:
                cli.offer_peer(TAG_EDGE_RR, client_id(recv), {"b": report_block(reports, recv, directory)})

    def on_edge_rr_receive(self, cli: ClientContext) -> None:
        """Edge DP: this client's reported view, which it computes on from here on."""
        st = cli.state
        me = client_index(cli.pid)
        reports = st.pop("edge_dp_reports")
        summed = cli.peer_summed(TAG_EDGE_RR)["b"] if me > 0 else None
        view = reported_view(st["graph_view"], st["directory"], reports, summed)
        st["structure_view"] = view
        st["edge_dp_counts"] = reports.counts
        if not self.settings.edge_dp_local_graph:
            assert isinstance(self.task, NodeTask)
            st["data"] = client_data(self.task, me, view, self.settings, self.config.device)

    def on_count(self, cli: ClientContext) -> None:
        cli.contribute(TAG_COUNT, {"n": torch.tensor([float(cli.state["data"].num_labeled)])})

    def _boundary_rows(self, clients: int) -> bool:
        """Whether Algorithm 3's peer sums use the receivers' boundary rows (``abar_rows``)."""
        return self.settings.abar_rows == "boundary" and clients > 1

    def on_abar_init(self, cli: ClientContext) -> None:
        """Hop 1 (local); with ``abar_rows=boundary`` also offer this client's row layout."""
        st = cli.state
        st["abar_state"] = init_abar_state(structure_view(st), st["directory"], betas=self.settings.betas,
                                           dtype=torch.float64)
        if self._boundary_rows(st["directory"].num_clients) and not st["abar_state"].done:
            mine = BoundaryLayout.own(structure_view(st), salt=os.urandom(SALT_BYTES))
            st["abar_layouts"] = {client_index(cli.pid): mine}
            st["abar_boundary"] = mine.rows  # its own public layout (what the attacks decode with)
            cli.offer_relay(TAG_BOUNDARY, mine.item())
        self._abar_done(st)

    def on_boundary(self, cli: ClientContext) -> None:
        """Keep every other receiver's row layout, refusing one that drops a row this client sends."""
        st = cli.state
        me, directory = client_index(cli.pid), st["directory"]
        layouts = read_layouts(cli.relayed(TAG_BOUNDARY), directory, me=me)
        for layout in layouts.values():
            layout.check_covers(structure_view(st), directory)
        st["abar_layouts"].update(layouts)

    def on_abar_offer(self, cli: ClientContext) -> dict[str, InfoValue]:
        """Algorithm 3, one hop: this client's message B_ik to every receiver i (its own kept)."""
        st = cli.state
        state, layouts = st["abar_state"], st.get("abar_layouts", {})
        me, nnz = client_index(cli.pid), 0
        for i in range(st["directory"].num_clients):
            msg = contribution(structure_view(st), state, directory=st["directory"], receiver=i,
                               prune_p=self.settings.prune_p or None)
            if i == me:
                st["abar_own"] = msg
            else:
                nnz += int(msg.count_nonzero())
                cli.offer_peer(TAG_ABAR, client_id(i), layouts[i].restrict(msg) if i in layouts else {DENSE_KEY: msg})
        return {"nnz": nnz}

    def on_abar_assemble(self, cli: ClientContext) -> None:
        st = cli.state
        own = st.pop("abar_own")
        mine = st.get("abar_layouts", {}).get(client_index(cli.pid))
        if st["directory"].num_clients == 1:
            summed = own
        elif mine is not None:
            summed = mine.expand(cli.peer_summed(TAG_ABAR), own)
        else:
            summed = cli.peer_summed(TAG_ABAR)[DENSE_KEY].to(torch.float64) + own
        st["abar_state"] = assemble(structure_view(st), st["abar_state"], summed=summed)
        self._abar_done(st)

    def _abar_done(self, st: dict[str, Any]) -> None:
        if st["abar_state"].done:
            st.update(abar=st.pop("abar_state").abar, betas=list(self.settings.betas))
            st.pop("abar_layouts", None)

    def _own_rows(self, st: dict[str, Any]) -> torch.Tensor:
        if self.settings.nsf == "node2vec":
            return st["node2vec_rows"]
        return own_rows(structure_view(st), self.settings, num_nodes=st["num_nodes"], seed=self.config.seed,
                        oracle=None)

    def _keep_structure(self, st: dict[str, Any], table: torch.Tensor) -> None:
        table = table.to(self.config.device)
        if self.hop2vec:
            st["structure"], st["structure_opt"] = structure_optimizer(table, self.settings.config)
        else:
            st["structure"] = table

    def on_nsf_offer(self, cli: ClientContext) -> None:
        st = cli.state
        st["own_nsf"] = self._own_rows(st)
        cli.offer_relay(TAG_NSF, nsf_item(structure_view(st).nodes, st["own_nsf"]))

    def on_nsf_assemble(self, cli: ClientContext) -> None:
        st = cli.state
        # screened: no relayed item may claim this owner's nodes, contested ids are taken from
        # no one, rows are clipped to the honest scale (nsf_screen; crafted_nsf audits it)
        table, screen = screened_table(structure_view(st).nodes, st.pop("own_nsf"), cli.relayed(TAG_NSF),
                                       st["num_nodes"])
        st["nsf_screen"] = screen.as_dict()
        self._keep_structure(st, table)
        st["batch"] = variant_b.client_batch(st["data"], st["abar"])

    def on_h0_send(self, cli: ClientContext) -> None:
        blocks = hardened.column_blocks(cli.party, list(cli.clients))
        for receiver, block in blocks.items():
            if receiver != cli.pid:
                cli.send(hardened.TAG_H0, {"a": block}, to=receiver)

    def on_h0_receive(self, cli: ClientContext) -> None:
        st = cli.state
        for sender, got in sorted(cli.sent(hardened.TAG_H0).items()):
            st["abar_cols"][sender] = got["a"].float()
        self._keep_structure(st, self._own_rows(st))

    def _received_model(self, cli: ClientContext, prefix: str = "") -> dict[str, torch.Tensor]:
        like = {k: p.detach() for k, p in cli.state["model"].named_parameters() if k.startswith(prefix)}
        return cli.received(TAG_MODEL, like={**like, "num_labeled": torch.zeros(1)})

    def on_round(self, cli: ClientContext) -> None:
        """Variants A and B: score the received model, contribute the gradients (and ∇S)."""
        party = cli.party
        if self.settings.variant == "A":
            theta_f = self._received_model(cli, "f.")
            nse = cli.sent(TAG_NSE, sender=SERVER)
            with party_rng(self.config.seed, cli.pid, cli.round):
                update = variant_a.handle_round(party, theta_f, nse)
        else:
            msg = self._received_model(cli)
            with party_rng(self.config.seed, cli.pid, cli.round):
                update = variant_b.handle_round(party, msg, hop2vec=self.hop2vec)
            if variant_b.NSF_GRAD in update:
                cli.offer_shared(TAG_NSF_GRAD, {variant_b.NSF_GRAD: update.pop(variant_b.NSF_GRAD)})
        cli.contribute(TAG_UPDATE, update)
        cli.contribute(TAG_METRICS, {"counts": party.state["counts"]})

    def on_keep_nsf_grad(self, cli: ClientContext) -> None:
        got = cli.shared(TAG_NSF_GRAD)
        if got is not None:
            variant_b.keep_nsf_grad(cli.party, got[variant_b.NSF_GRAD])

    def on_h_answer(self, cli: ClientContext) -> None:
        """Hardened H1 as owner j: load θ, transform S_j, answer every receiver's NSE query."""
        party, st = cli.party, cli.state
        msg = self._received_model(cli)
        load_parameters(st["model"], {k: v for k, v in msg.items() if k != "num_labeled"})
        st["num_labeled_total"] = int(msg["num_labeled"].item())
        with party_rng(self.config.seed, cli.pid, cli.round):
            st["transformed"] = hardened.owner_transform(party)
        for target in cli.clients:
            ans = hardened.answer(party, target, self.settings.query_budget)
            if target == cli.pid:
                st["own_answer"] = ans
            else:
                cli.offer_peer(hardened.TAG_NSE, target, ans)

    def on_h_receive(self, cli: ClientContext) -> None:
        """Hardened, as receiver i: its NSEs, its step, its terms of every owner's U_j."""
        party, st = cli.party, cli.state
        own = st.pop("own_answer")
        got = cli.peer_summed(hardened.TAG_NSE) if len(cli.clients) > 1 else {k: torch.zeros_like(v) for k, v in own.items()}
        nse = {k: got[k].float() + own[k] for k in own}
        with party_rng(self.config.seed, cli.pid + "/receive", cli.round):
            st["theta_f"], g_i = hardened.receiver_step(party, nse, st.pop("num_labeled_total"))
        for owner in cli.clients:
            term = hardened.grad_term(party, owner, g_i)
            if owner == cli.pid:
                st["own_u"] = term
            else:
                cli.offer_peer(hardened.TAG_NSE_GRAD, owner, {"u": term})

    def on_h_backward(self, cli: ClientContext) -> None:
        """Hardened, as owner j: U_j through g; contribute ∇θ_f (as receiver) and ∇θ_s (as owner)."""
        party, st = cli.party, cli.state
        own_u = st.pop("own_u")
        u = cli.peer_summed(hardened.TAG_NSE_GRAD)["u"].float() + own_u if len(cli.clients) > 1 else own_u
        g_theta = hardened.owner_backward(party, u)
        cli.contribute(TAG_UPDATE, prefixed({**st.pop("theta_f"), **g_theta}))
        cli.contribute(TAG_METRICS, {"counts": st["counts"]})

    def _server_backward_a(self, server: Party, nse_train: torch.Tensor, nse_grad: torch.Tensor) -> dict[str, torch.Tensor]:
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
    def checkpoint_party(self, party: Party) -> dict[str, Any]:
        """Modules and optimisers, the plain tensors that change during training (S, ∇S), and
        what the setup phase left the party (Ā, H0 blocks, |Ṽ|, query counts): a resumed run
        does not repeat ``server_prepare``."""
        out = super().checkpoint_party(party)
        st = party.state
        tensors: dict[str, Any] = {k: st[k].detach().clone() for k in _TRAINED_TENSORS if isinstance(st.get(k), torch.Tensor)}
        for k in _SETUP_BLOCKS:
            if isinstance(st.get(k), dict):
                tensors[k] = {j: t.detach().clone() for j, t in st[k].items()}
        if "queries" in st:
            tensors["queries"] = {j: torch.tensor(n) for j, n in st["queries"].items()}
        if "num_labeled" in st:
            tensors["num_labeled"] = torch.tensor(int(st["num_labeled"]))
        if _OFFLINE in st:
            tensors[_OFFLINE] = {k: dict(v) for k, v in st[_OFFLINE].items()}
        if self.settings.edge_dp is not None and st.get("structure_view") is not None and "edge_dp_counts" in st:
            v, c = st["structure_view"], st["edge_dp_counts"]  # the reported view it computes on
            tensors[_REPORTED] = {"nodes": v.nodes, "intra_edges": v.intra_edges, "inter_edges": v.inter_edges,
                                  "inter_owner": v.inter_owner,
                                  "counts": torch.tensor([c.true_pairs, c.kept, c.fake])}
        if tensors:
            out[_TENSORS] = tensors
        return out

    def restore_party(self, party: Party, items: Mapping[str, Any]) -> None:
        """Load :meth:`checkpoint_party`; S is copied in place so its optimiser keeps the same
        tensor (or, in a party that never ran the setup phase, S and its optimiser are rebuilt)."""
        st = party.state
        for k, t in items.get(_TENSORS, {}).items():
            current = st.get(k)
            if k == "num_labeled":
                st[k] = int(t)
            elif k == "queries":
                st[k] = {j: int(n) for j, n in t.items()}
            elif k == _OFFLINE:
                st[k] = {j: dict(v) for j, v in t.items()}
            elif k == _REPORTED:  # edge DP: back on the reported view (and its local matrix)
                me = client_index(party.pid)
                view = ClientGraphView(client_id=me, nodes=t["nodes"], intra_edges=t["intra_edges"],
                                       inter_edges=t["inter_edges"], inter_owner=t["inter_owner"])
                st["structure_view"] = view
                st["edge_dp_counts"] = EdgeDPCounts(*(int(x) for x in t["counts"]))
                if not self.settings.edge_dp_local_graph:
                    assert isinstance(self.task, NodeTask)
                    st["data"] = client_data(self.task, me, view, self.settings, self.config.device)
            elif isinstance(current, torch.Tensor) and isinstance(t, torch.Tensor) and current.shape == t.shape:
                with torch.no_grad():
                    current.copy_(t)
            elif k == "structure" and "structure_opt" in items and "structure_opt" not in st:
                st["structure"], st["structure_opt"] = structure_optimizer(t, self.settings.config)
            else:
                st[k] = t
        if "abar" in st and "batch" not in st and self.settings.variant == "B" and not self.settings.hardened:
            st["batch"] = variant_b.client_batch(st["data"], st["abar"])
        super().restore_party(party, {k: v for k, v in items.items() if k != _TENSORS})

    # ------------------------------------------------------------------------ measuring
    def observe_run(self, fed: Federation) -> None:
        self._transcript = fed.transcript

    def measure_server(self, party: Party) -> dict[str, Any]:
        """What the server saw of the setup phase (hops, peer sums, its time), for result.json."""
        facts = party.state.get(_OFFLINE)
        return {"offline": {k: dict(v) for k, v in facts.items()}} if facts else {}

    def measure_client(self, party: Party) -> dict[str, Any]:
        """The client's own correct counts (and, for result.json, its query and edge-DP figures)."""
        st = party.state
        out: dict[str, Any] = {}
        if isinstance(st.get("counts"), torch.Tensor):
            out["counts"] = st["counts"].detach().cpu().clone()
        if "queries" in st:
            out["queries"] = {j: int(n) for j, n in st["queries"].items()}
        dp = st.get("edge_dp_counts")
        if isinstance(dp, EdgeDPCounts):
            out["edge_dp_counts"] = [dp.true_pairs, dp.kept, dp.fake]
        return out

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Pooled accuracy over all clients' nodes (the reference trainer's metric), per client too."""
        out_per, tot = {}, torch.zeros(4, dtype=torch.float64)
        queries: dict[str, dict[str, int]] = {}
        dp = EdgeDPCounts()
        for pid, m in per_client.items():
            if "queries" in m:
                queries[pid] = dict(m["queries"])
            if "edge_dp_counts" in m:
                t, k, f = m["edge_dp_counts"]
                dp.true_pairs, dp.kept, dp.fake = dp.true_pairs + t, dp.kept + k, dp.fake + f
            if "counts" not in m:
                continue
            c = m["counts"]
            tot += c
            out_per[pid] = {"val_acc": _ratio(c[0], c[1]), "test_acc": _ratio(c[2], c[3])}
        self._queries = queries
        if "offline" in server:
            self._offline_facts = dict(server["offline"])
        if self.settings.edge_dp is not None:
            self.edge_dp_counts = dp
        return {"per_client": out_per, "mean_val": _ratio(tot[0], tot[1]), "mean_test": _ratio(tot[2], tot[3])}

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
            "abar_rows": self.settings.abar_rows,
        }}
        offline: dict[str, Any] = {}
        facts, tr = self._offline_facts, self._transcript
        if facts and tr is not None:  # bytes from the run's transcript, the rest as the server saw it
            a = facts["abar"]
            mine = [r for r in tr if r.tag == TAG_ABAR]
            layout = sum(r.payload_bytes for r in tr if r.tag == TAG_BOUNDARY)
            offline["abar"] = OfflineCost(int(a["hops"]), int(a["peer_sums"]), sum(r.payload_bytes for r in mine),
                                          sum(r.wire_bytes for r in mine), float(a["seconds"]), int(a["prune_p"]),
                                          int(a["nonzeros"]), layout, self.settings.abar_rows).to_dict()
            n = facts["nsf_share"]
            recs = [r for r in tr if r.tag == n["tag"]]
            offline["nsf_share"] = {"tag": n["tag"], "bytes": sum(r.payload_bytes for r in recs),
                                    "wire_bytes": sum(r.wire_bytes for r in recs), "seconds": float(n["seconds"])}
            off_bytes = sum(v["bytes"] for v in offline.values()) + layout
            offline["bytes_total"] = off_bytes
            offline["seconds_total"] = sum(float(v["seconds"]) for v in offline.values() if isinstance(v, dict))
            offline["training_bytes"] = tr.bytes_total() - off_bytes
        if offline:
            out["offline"] = offline
        if self.settings.edge_dp is not None and self.edge_dp_counts is not None:
            out["privacy"] = privacy_block(self.settings.edge_dp, self.edge_dp_counts, seeded=self.settings.edge_dp_seeded,
                                           local_graph=self.settings.edge_dp_local_graph)
        if self.settings.hardened:
            out["fedstruct"]["queries_answered"] = dict(self._queries)
        return out


_TENSORS = "fedstruct/tensors"
_TRAINED_TENSORS = ("structure", "nsf_grad", "abar")
_SETUP_BLOCKS = ("abar_cols", "abar_rows_t")
_OFFLINE = "fedstruct/offline"
_REPORTED = "fedstruct/reported_view"


def _ratio(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a / b) if float(b) > 0 else float("nan")
