"""FedSage and FedSage+ (Zhang et al., NeurIPS 2021) through the protocol layer.

* **FedSage**: FedAvg of a GraphSage classifier (PyG ``GraphSAGE``, mean aggregation) over the
  owners' subgraphs, with FedAvg's tags and mechanisms (``fedavg/model`` broadcast, ``fedavg/update``
  and ``fedavg/metrics`` secure sums) and the paper's uniform average.
* **FedSage+**: before that, each owner trains its own NeighGen on an impaired copy of its graph
  (:mod:`.impair`, :mod:`.client`), then jointly with its peers through the cross-owner feature
  loss (:mod:`.federated`: ``fedsage/generated`` relay, ``fedsage/feature_grad`` peer sums), and
  mends its graph with generated neighbours; FedSage then trains on the mended graphs.

Evaluation (paper §6.1): the global model on the *global* test set, i.e. the union of the owners'
test nodes on the whole graph with every cross-owner edge. No party holds that graph; the score
is the experimenter's measurement (``global_graph_test_acc``), never sent. The reported round is
the one whose broadcast model has the best mean validation accuracy over the owners' own
subgraphs (``fedavg/metrics``: what the server learns), so selection uses no global data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from securefg.errors import ConfigError
from securefg.federation.party import Party, client_index
from securefg.federation.program.context import ClientAction, ClientContext, ServerContext
from securefg.federation.program.step import InfoValue
from securefg.methods.backbone_option import BACKBONE_OPTIONS, check_backbone_options, node_backbone
from securefg.methods.base import MethodConfig, Task, register_method
from securefg.methods.fedavg import TAG_METRICS, TAG_MODEL, TAG_UPDATE, FedAvg, combine_client_scores
from securefg.methods.fedsage.client import local_step, mend
from securefg.methods.fedsage.federated import (
    TAG_FEATURE_GRAD,
    TAG_GENERATED,
    FederatedGenSettings,
    GeneratedDP,
    answer,
    federated_round,
    generate,
    generated_dp,
    owner_step,
)
from securefg.methods.fedsage.impair import impair
from securefg.methods.optim import adam
from securefg.methods.tasks import NodeTask
from securefg.methods.training import (
    TrainConfig,
    evaluate_node,
    load_state,
    party_rng,
    party_seed,
    state_of,
    with_sparse_adjacency,
)
from securefg.models.neighgen import NeighGen
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack

#: ``score_on`` value -> (the per-round validation key that picks the round, the test key read there).
SCORE_ON: dict[str, tuple[str, str]] = {
    "global_graph": ("mean_global_val", "global_graph_test_acc"),
    "owners": ("mean_global_val", "mean_global_test"),
    "trained": ("mean_val", "mean_test"),
}


@register_method
class FedSage(FedAvg):
    """FedSage: FedAvg of GraphSage on node classification.

    Options:
        weighting (str): ``"uniform"`` (the paper's ``1/M``) or ``"size"``. (default: ``"uniform"``)
        backbone (str): ``"sage"`` (the paper) or ``"gcn"`` (FED-PUB's table runs FedSage+ with
            its GCN). (default: ``"sage"``)
        layers (int): GraphSage layers (the paper: 2). (default: ``2``)
        dropout (float): GraphSage dropout. (default: ``0.5``)
        fanouts, batch_nodes: GraphSage's sampled mini-batch training
            (:data:`securefg.methods.backbone_option.SAMPLING_OPTION_HELP`; default: full batch).
        score_on (str): What ``test_acc`` reads: ``"global_graph"`` (the FedSage paper: the
            broadcast model on the whole graph's test nodes, every cross-owner edge present),
            ``"owners"`` (the broadcast model on each owner's own test nodes, on its own, for
            FedSage+ mended, graph, mean over owners: FedStruct's table, whose FL GNN is scored
            so) or ``"trained"`` (each owner's model after that round's local training, on its
            own test nodes, mean over owners: FED-PUB's protocol, as its table scores FedAvg).
            The round is the one the same models validate best on the owners' validation nodes;
            the other readings stay in ``metrics`` at that round. (default: ``"global_graph"``)
    """

    name = "fedsage"
    tasks = frozenset({"node"})
    default_stack = "fedsage_secure"
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        TAG_MODEL: ExchangeKind.BROADCAST, TAG_UPDATE: ExchangeKind.AGGREGATE, TAG_METRICS: ExchangeKind.AGGREGATE,
    }
    option_defaults: ClassVar[Mapping[str, Any]] = {**BACKBONE_OPTIONS, "backbone": "sage", "weighting": "uniform",
                                                    "score_on": "global_graph"}

    @staticmethod
    def train_defaults(task: Task) -> TrainConfig:
        """Adam lr 0.01, weight decay 5e-4, 2 full-batch local epochs per round (docs/fedsage.md)."""
        return TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=2)

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        check_backbone_options(self.name, self.options, node_task=True)
        if self.options["score_on"] not in SCORE_ON:
            raise ConfigError(f"{self.name}: score_on must be one of {sorted(SCORE_ON)}, got {self.options['score_on']!r}")
        self._broadcast: dict[str, torch.Tensor] | None = None
        self._eval_model: nn.Module | None = None

    def make_model(self) -> nn.Module:
        """GraphSage (mean aggregation; or the GCN), seeded identically for every party."""
        assert isinstance(self.task, NodeTask)
        return node_backbone(self.options, in_channels=self.task.num_features, classes=self.task.num_classes,
                             hidden=self.config.hidden, seed=self.config.seed).to(self.config.device)

    # ------------------------------------------------------------- one round
    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        # the experimenter's copy of what is broadcast this round (measure_server reads it)
        srv.state["broadcast"] = state_of(srv.state["model"])
        return super().server_round(srv, r)

    # ------------------------------------------------------------- measuring
    def measure_server(self, party: Party) -> dict[str, Any]:
        """The model broadcast this round, which the experimenter scores on the global graph."""
        return {"broadcast": party.state["broadcast"]} if "broadcast" in party.state else {}

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """The owners' own scores, plus the broadcast model on the global test set (experimenter only)."""
        out = combine_client_scores(self, {}, per_client)
        assert isinstance(self.task, NodeTask)
        full = self.task.full_graph
        if full is not None and "broadcast" in server:
            if self._eval_model is None:
                self._eval_model = self.make_model()
                self._full = with_sparse_adjacency(full).to(self.config.device)
            load_state(self._eval_model, server["broadcast"])
            scores = evaluate_node(self._eval_model, self._full)
            out["global_graph_val_acc"], out["global_graph_test_acc"] = scores["val_acc"], scores["test_acc"]
        return out

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """``score_on``'s accuracy at the round whose scored models the owners validate best."""
        val_key, headline = SCORE_ON[self.options["score_on"]]
        scored = [h for h in history if _finite(h.get(val_key)) and "global_graph_test_acc" in h]
        if not scored:
            return {}
        best = max(scored, key=lambda h: h[val_key])
        last = history[-1]
        return {
            "test_acc": best[headline],
            "best_round": best["round"],
            "best_val": best[val_key],
            "scored_on": self.options["score_on"],
            "global_graph_test_acc": best["global_graph_test_acc"],
            "global_graph_val_acc": best["global_graph_val_acc"],
            "final_round": last["round"],
            "final_test_acc": last.get(headline),
            "local_test_acc": best.get("mean_global_test"),
            "per_client": best.get("per_client", {}),
        }


@register_method
class FedSagePlus(FedSage):
    """FedSage+: per-owner NeighGen, cross-owner generator training, mended graphs, then FedSage.

    Options (besides FedSage's):
        num_pred (int): Most generated neighbours per node :math:`P`. (default: ``5``)
        hide_portion (float): Share of its nodes an owner hides to train NeighGen (paper: h% in
            [3.4%, 27.8%]; code: about 10%). (default: ``0.1``)
        gen_local_steps (int): Local NeighGen steps (encoder, dGen, fGen). (default: ``200``)
        gen_fed_steps (int): Federated fGen steps with the cross-owner term. (default: ``20``)
        gen_batch (int): Nodes per NeighGen step (the paper's batch). (default: ``64``)
        gen_lr (float): NeighGen Adam learning rate. (default: ``0.001``)
        gen_weight_decay (float): NeighGen Adam weight decay. (default: ``1e-4``)
        gen_hidden (int): fGen's second hidden width (code: 2048). (default: ``256``)
        cross_weight (float): alpha, weight of the cross-owner term, averaged over peers; 0 trains
            each generator locally only (no generator messages). (default: ``1.0``)
        max_neighbours (int): Hidden neighbours matched per node (a random subset beyond). (default: ``20``)
        keep_generator_views (bool): Every owner keeps each generated batch it sent or opened and
            each gradient sum it received, per federated step, for the generator attacks (an
            audit switches it on; M(M-1) batches per step, 14 GB on Cora with 20 owners).
            (default: ``False``)
    """

    name = "fedsage_plus"
    #: fedsage_dp_robust: fedsage_dp (local DP on every generated vector, noise multiplier 1, which
    #: passes the curious-clients audit within 0.2 points of fedsage_secure, docs/fedsage.md section 7)
    #: with a norm-bounded robust update sum (ckks_robust), which passes the malicious-client audit
    #: within 0.2 points of fedsage_dp on Cora seeds 0-2 (section 8); FedSage keeps fedsage_secure
    default_stack = "fedsage_dp_robust"
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        **FedSage.TAGS, TAG_GENERATED: ExchangeKind.RELAY, TAG_FEATURE_GRAD: ExchangeKind.PEER_SUM,
    }
    option_defaults: ClassVar[Mapping[str, Any]] = {
        **FedSage.option_defaults, "num_pred": 5, "hide_portion": 0.1, "gen_local_steps": 200, "gen_fed_steps": 20,
        "gen_batch": 64, "gen_lr": 1e-3, "gen_weight_decay": 1e-4, "gen_hidden": 256, "cross_weight": 1.0,
        "max_neighbours": 20, "keep_generator_views": False,
    }
    _INTS = ("num_pred", "gen_local_steps", "gen_fed_steps", "gen_batch", "gen_hidden", "max_neighbours")
    _FLOATS = ("hide_portion", "gen_lr", "gen_weight_decay", "cross_weight")

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        o = self.options
        for key in (*self._INTS, *self._FLOATS):
            try:
                o[key] = int(o[key]) if key in self._INTS else float(o[key])
            except (TypeError, ValueError):
                raise ConfigError(f"fedsage_plus option {key} must be a number, got {o[key]!r}") from None
        for key in ("num_pred", "gen_batch", "gen_hidden", "max_neighbours"):
            if o[key] < 1:
                raise ConfigError(f"fedsage_plus option {key} must be >= 1, got {o[key]}")
        if o["gen_local_steps"] < 0 or o["gen_fed_steps"] < 0:
            raise ConfigError("fedsage_plus options gen_local_steps and gen_fed_steps must be >= 0")
        if not (math.isfinite(o["cross_weight"]) and o["cross_weight"] >= 0 and o["gen_lr"] > 0 and o["gen_weight_decay"] >= 0):
            raise ConfigError("fedsage_plus needs cross_weight >= 0, gen_lr > 0 and gen_weight_decay >= 0")
        if not 0.0 < o["hide_portion"] < 1.0:
            raise ConfigError(f"fedsage_plus option hide_portion must lie in (0, 1), got {o['hide_portion']}")
        if o["cross_weight"] > 0 and o["gen_fed_steps"] > 0 and self.num_clients < 3:
            raise ConfigError(
                f"fedsage_plus with {self.num_clients} owner(s): the cross-owner gradient sum would be one peer's "
                "gradient, which reveals that peer's node features; use --clients >= 3 or --option cross_weight=0"
            )
        self._gen_report: dict[str, Any] = {}
        self._gen_dp: GeneratedDP | None = None

    def check_stack(self, stack: ProtocolStack) -> None:
        """FedSage's checks, then the DP setting of ``fedsage/generated`` (refused unless one local
        ``dp_gaussian``); kept for the privacy report."""
        super().check_stack(stack)
        self._gen_dp = generated_dp(stack)

    def setup_client(self, party: Party, index: int) -> None:
        """FedSage's client, then the owner's NeighGen trained locally on its own graph (no messages)."""
        super().setup_client(party, index)
        with party_rng(self.config.seed, party.pid, -3):
            self._train_local_generator(party.pid, party.state)

    def _gen_settings(self, dp: GeneratedDP | None = None) -> FederatedGenSettings:
        o = self.options
        return FederatedGenSettings(steps=o["gen_fed_steps"], batch=o["gen_batch"], cross_weight=o["cross_weight"],
                                    max_neighbours=o["max_neighbours"], dp=dp, keep_views=o["keep_generator_views"])

    def server_prepare(self, srv: ServerContext) -> None:
        """The federated NeighGen steps (rounds ``-steps .. -1``: generate, relay, answer, peer
        sums, step), then every owner mends its graph."""
        s = self._gen_settings()
        cross = s.cross_weight != 0.0 and len(srv.clients) >= 2
        for t in range(s.steps):
            srv.exchange.round = federated_round(t, s.steps)
            srv.ask(ACTION_GENERATE, info={"relay": int(cross)})
            if cross:
                srv.relay(TAG_GENERATED, exclude_self=True, shuffle=True)
                answered = srv.ask(ACTION_ANSWER)
                for owner in srv.clients:
                    peers = [p for p, info in answered.items() if p != owner and owner in str(info["owners"]).split(",")]
                    if peers:
                        srv.peer_sum(TAG_FEATURE_GRAD, owner, peers=peers)
            srv.ask(ACTION_STEP, info={"cross": int(cross)})
        srv.exchange.round = -1
        srv.ask(ACTION_MEND)

    def client_actions(self) -> Mapping[str, ClientAction]:
        return {**super().client_actions(), ACTION_GENERATE: self.on_generate, ACTION_ANSWER: self.on_answer,
                ACTION_STEP: self.on_step, ACTION_MEND: self.on_mend}

    def on_generate(self, cli: ClientContext) -> None:
        """Step 1 as owner: generate on a batch (noised by this owner when the stack puts a local
        ``dp_gaussian`` on ``fedsage/generated`` and the batch is relayed); offer it to the relay."""
        relay = bool(cli.info.get("relay"))
        dp = generated_dp(cli.exchange.stack) if relay else None
        with party_rng(self.config.seed, cli.pid, cli.round):
            item = generate(cli.state, self._gen_settings(dp), index=client_index(cli.pid), round=cli.round)
        if relay:
            cli.offer_relay(TAG_GENERATED, item)

    def on_answer(self, cli: ClientContext) -> dict[str, InfoValue]:
        """Step 3 as peer: answer every opened item into its owner's peer sum."""
        st = cli.state
        grads, cross = answer(st, cli.pid, cli.relayed(TAG_GENERATED), list(cli.clients), round=cli.round,
                              keep_views=self.options["keep_generator_views"])
        for owner, g in grads.items():
            cli.offer_peer(TAG_FEATURE_GRAD, owner, {"g": g})
        st.setdefault("gen_cross_loss", []).append(cross)
        return {"owners": ",".join(sorted(grads))}

    def on_step(self, cli: ClientContext) -> None:
        """Steps 4-5 as owner: the summed peer gradient (if any) and its fGen step."""
        st = cli.state
        summed = None
        if cli.info.get("cross"):
            summed = cli.peer_summed(TAG_FEATURE_GRAD)["g"]
        peers = len(cli.clients) - 1
        with party_rng(self.config.seed, cli.pid + "/step", cli.round):
            local = owner_step(st, self._gen_settings(), summed, peers, round=cli.round)
        st.setdefault("gen_local_losses", []).append(local)
        if not cli.info.get("cross"):
            st.setdefault("gen_cross_loss", []).append(0.0)

    def on_mend(self, cli: ClientContext) -> None:
        """The owner mends its graph with generated neighbours; FedSage trains on it from here on."""
        st = cli.state
        st["original_data"] = st["data"]
        with party_rng(self.config.seed, cli.pid, -1):
            mended, counts = mend(st["data"], st["neighgen"], generator=st["gen_rng"])
        st["data"] = with_sparse_adjacency(mended)
        st["generated_counts"] = counts

    def checkpoint_party(self, party: Party) -> dict[str, Any]:
        """FedSage's state plus the owner's mended graph (a resumed run does not repeat
        ``server_prepare``, which made it)."""
        out = super().checkpoint_party(party)
        st = party.state
        if "generated_counts" in st:
            # adj_t is derived from edge_index, and made again on restore
            out[_MENDED] = {"data": {k: v.detach().clone() for k, v in st["data"].items()
                                      if isinstance(v, torch.Tensor) and k != "adj_t"},
                            "counts": st["generated_counts"].clone()}
        return out

    def restore_party(self, party: Party, items: Mapping[str, Any]) -> None:
        from torch_geometric.data import Data

        st = party.state
        mended = items.get(_MENDED)
        if mended is not None and "generated_counts" not in st:
            st["original_data"] = st["data"]
            st["data"] = with_sparse_adjacency(Data(**mended["data"]))
            st["generated_counts"] = mended["counts"]
        super().restore_party(party, {k: v for k, v in items.items() if k != _MENDED})

    def measure_client(self, party: Party) -> dict[str, Any]:
        """FedSage's scores, plus (for result.json) what the owner's generator phase did."""
        st = party.state
        out = dict(super().measure_client(party))
        if "generated_counts" in st:
            out[_GEN] = {"generated": int(st["generated_counts"].sum()), "hidden": int(st["impaired"].hidden.numel()),
                         "local_loss_end": float(st["gen_local_loss"]),
                         "local": [float(x) for x in st.get("gen_local_losses", [])],
                         "cross": [float(x) for x in st.get("gen_cross_loss", [])],
                         "dp_releases": int(st.get("gen_dp_releases", 0)), "dp_rows": int(st.get("gen_dp_rows", 0)),
                         **_feature_norms(st["data"])}
        return out

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        gen = {pid: m[_GEN] for pid, m in per_client.items() if _GEN in m}
        if gen:
            self._gen_report = _gen_report(gen)
        return super().combine_measures(server, {pid: {k: v for k, v in m.items() if k != _GEN}
                                                 for pid, m in per_client.items()})

    def _train_local_generator(self, pid: str, st: dict[str, Any]) -> None:
        """As owner ``pid``, on its own graph: impair it, train NeighGen (L^d + L^f), freeze the encoder."""
        o, dev = self.options, self.config.device
        rng = torch.Generator().manual_seed(party_seed(self.config.seed, pid, -1))
        graph = impair(st["data"], o["hide_portion"], rng).to(dev)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(party_seed(self.config.seed, pid, -2))
            model = NeighGen(self.task.num_features, num_pred=o["num_pred"], gen_hidden=o["gen_hidden"]).to(dev)
        opt = adam(model.parameters(), lr=o["gen_lr"], weight_decay=o["gen_weight_decay"])
        loss = float("nan")
        for _ in range(o["gen_local_steps"]):
            loss = local_step(model, opt, graph, st["data"].x, batch=o["gen_batch"], max_neighbours=o["max_neighbours"],
                              generator=rng)
        with torch.no_grad():
            st["gen_z"] = model.embed(graph.x, graph.edge_index)  # encoder frozen from here on
        st.update(neighgen=model, impaired=graph, gen_rng=rng, gen_local_loss=loss,
                  neighgen_opt_f=adam(model.generator_parameters(), lr=o["gen_lr"],
                                    weight_decay=o["gen_weight_decay"]))

    def report(self) -> dict[str, Any]:
        """result.json's ``fedsage`` block: NeighGen settings and what mending added."""
        o = self.options
        out: dict[str, Any] = {"fedsage": {**{k: o[k] for k in (*self._INTS, *self._FLOATS)}, **self._gen_report}}
        if self._gen_dp is not None:
            out["privacy"] = generated_privacy(self._gen_dp, self._gen_report.get("dp_releases", {}),
                                               self._gen_report.get("dp_rows", {}), num_pred=o["num_pred"])
        return out


def generated_privacy(dp: GeneratedDP, releases: Mapping[str, int], rows: Mapping[str, int], *, num_pred: int,
                      delta: float = 1e-5) -> dict[str, Any]:
    r"""``result.json``'s ``privacy`` for local DP on ``fedsage/generated`` (RDP, Opacus).

    Per owner, ``releases`` relayed batches of ``rows`` vectors, each clipped to ``C`` and noised with
    std :math:`\sigma C`. Unit ``node`` (the headline): the :math:`P` vectors generated from one
    batch node per step move by at most :math:`\sqrt{P} C`, i.e. noise multiplier
    :math:`\sigma / \sqrt{P}`, composed over every step (a node may be drawn in each; no
    subsampling credit). Unit ``client``: all rows of every step (:math:`\sigma / \sqrt{rows}` per step).
    """
    from securefg.protocol.dp.accountant import epsilon_of_history

    clients: dict[str, Any] = {}
    for pid in sorted(releases):
        k, n = int(releases[pid]), int(rows.get(pid, 0))
        if k == 0:
            continue
        node = epsilon_of_history([(dp.noise_multiplier / math.sqrt(num_pred), 1.0, k)], delta=delta)
        whole = epsilon_of_history([(dp.noise_multiplier / math.sqrt(max(n, 1)), 1.0, k)], delta=delta)
        clients[pid] = {"epsilon": node, "epsilon_client": whole, "releases": k, "vectors_per_release": n}
    return {
        "epsilon": max((c["epsilon"] for c in clients.values()), default=None),
        "epsilon_client": max((c["epsilon_client"] for c in clients.values()), default=None),
        "delta": delta, "accountant": "rdp", "unit": "node", "mechanism": "dp_gaussian (local) on fedsage/generated",
        "noise_multiplier": dp.noise_multiplier, "clip": dp.clip, "clip_per": "generated vector",
        "noise": "csprng" if dp.secure_rng else "seeded", "clients": clients,
        "notes": [
            ("unit 'node': neighbouring runs differ in the num_pred generated vectors of one batch node in every "
             "federated step (each vector clipped to 'clip' on its own, so the block moves by at most "
             "sqrt(num_pred) * clip against its absence, the add/remove convention of the accountant; a replacement "
             "doubles it); no subsampling credit, since a node may be drawn in every step."),
            ("not covered: what the owner's generator learned from its nodes (fGen is trained on them without DP, "
             "so every generated vector depends on every node); the guarantee bounds what the released vectors "
             "add about one node's generated neighbours, not the generator's memory. Node features, mended graphs "
             "and the FedAvg tags are not covered either."),
            "epsilon_client: all vectors an owner relays (its whole contribution to the tag).",
        ],
    }


ACTION_GENERATE = "fedsage/gen/generate"
ACTION_ANSWER = "fedsage/gen/answer"
ACTION_STEP = "fedsage/gen/step"
ACTION_MEND = "fedsage/gen/mend"
_GEN = "fedsage_gen"
_MENDED = "fedsage/mended"


def _gen_report(gen: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """result.json's generator figures from the owners' measurements (the experimenter's view)."""
    n = max(len(gen), 1)
    steps = min((len(g["local"]) for g in gen.values()), default=0)
    history = [{"local_feature_loss": sum(g["local"][t] for g in gen.values()) / n,
                "cross_feature_loss": sum(g["cross"][t] for g in gen.values() if t < len(g["cross"])) / n}
               for t in range(steps)]
    dp = ({"dp_releases": {pid: int(g.get("dp_releases", 0)) for pid, g in gen.items()},
           "dp_rows": {pid: int(g.get("dp_rows", 0)) for pid, g in gen.items()}}
          if any(g.get("dp_releases") for g in gen.values()) else {})
    return {
        **dp,
        "generated_neighbours": {pid: int(g["generated"]) for pid, g in gen.items()},
        "hidden_nodes": {pid: int(g["hidden"]) for pid, g in gen.items()},
        "local_loss_end": {pid: float(g["local_loss_end"]) for pid, g in gen.items()},
        "generated_feature_norm": {pid: g["generated_norm"] for pid, g in gen.items() if "generated_norm" in g},
        "real_feature_norm": {pid: g["real_norm"] for pid, g in gen.items() if "real_norm" in g},
        "federated_steps": steps,
        "federated_loss_first": history[0] if history else {},
        "federated_loss_last": history[-1] if history else {},
    }


def _feature_norms(mended: Any) -> dict[str, float]:
    """Mean L2 norm of the mended graph's generated rows and of its real rows: how far what
    mending adds sits from the owner's own features (a generator whose federated steps were
    driven by noise or by peers can drift from them; the GCN aggregates both alike)."""
    mask = getattr(mended, "generated_mask", None)
    if mask is None:
        return {}
    norms = mended.x.detach().float().norm(dim=1)
    return {key: float(norms[rows].mean()) for key, rows in (("real_norm", ~mask), ("generated_norm", mask))
            if bool(rows.any())}


def _finite(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)
