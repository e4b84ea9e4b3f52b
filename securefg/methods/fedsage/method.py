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
from securefg.federation.federation import Federation
from securefg.federation.party import Party
from securefg.federation.program.context import ServerContext
from securefg.methods.base import MethodConfig, Task, register_method
from securefg.methods.fedavg import TAG_METRICS, TAG_MODEL, TAG_UPDATE, FedAvg, combine_client_scores
from securefg.methods.fedsage.client import local_step, mend
from securefg.methods.fedsage.federated import (
    TAG_FEATURE_GRAD,
    TAG_GENERATED,
    FederatedGenSettings,
    run_federated_generators,
)
from securefg.methods.fedsage.impair import impair
from securefg.methods.tasks import NodeTask
from securefg.methods.training import TrainConfig, evaluate_node, load_state, party_seed, state_of
from securefg.models.neighgen import NeighGen
from securefg.protocol.mechanism import ExchangeKind


@register_method
class FedSage(FedAvg):
    """FedSage: FedAvg of GraphSage on node classification.

    Options:
        weighting (str): ``"uniform"`` (the paper's ``1/M``) or ``"size"``. (default: ``"uniform"``)
        layers (int): GraphSage layers (the paper: 2). (default: ``2``)
        dropout (float): GraphSage dropout. (default: ``0.5``)
    """

    name = "fedsage"
    tasks = frozenset({"node"})
    default_stack = "fedsage_secure"
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        TAG_MODEL: ExchangeKind.BROADCAST, TAG_UPDATE: ExchangeKind.AGGREGATE, TAG_METRICS: ExchangeKind.AGGREGATE,
    }
    option_defaults: ClassVar[Mapping[str, Any]] = {"weighting": "uniform", "layers": 2, "dropout": 0.5}

    @staticmethod
    def train_defaults(task: Task) -> TrainConfig:
        """Adam lr 0.01, weight decay 5e-4, 2 full-batch local epochs per round (docs/fedsage.md)."""
        return TrainConfig(lr=0.01, weight_decay=5e-4, local_epochs=2)

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        o = self.options
        try:
            o["layers"], o["dropout"] = int(o["layers"]), float(o["dropout"])
        except (TypeError, ValueError):
            raise ConfigError(f"{self.name} options layers/dropout must be numbers, got {o['layers']!r}, {o['dropout']!r}") from None
        if o["layers"] < 1 or not 0.0 <= o["dropout"] < 1.0:
            raise ConfigError(f"{self.name} needs layers >= 1 and 0 <= dropout < 1, got {o['layers']}, {o['dropout']}")
        self._broadcast: dict[str, torch.Tensor] | None = None
        self._eval_model: nn.Module | None = None

    def make_model(self) -> nn.Module:
        """GraphSage (mean aggregation), seeded identically for every party."""
        from torch_geometric.nn.models import GraphSAGE

        assert isinstance(self.task, NodeTask)
        torch.manual_seed(self.config.seed)
        model = GraphSAGE(self.task.num_features, self.config.hidden or 64, self.options["layers"],
                          self.task.num_classes, dropout=self.options["dropout"])
        return model.to(self.config.device)

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
                self._full = full.to(self.config.device)
            load_state(self._eval_model, server["broadcast"])
            scores = evaluate_node(self._eval_model, self._full)
            out["global_graph_val_acc"], out["global_graph_test_acc"] = scores["val_acc"], scores["test_acc"]
        return out

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """Global-test accuracy at the round whose broadcast model the owners validate best."""
        scored = [h for h in history if _finite(h.get("mean_global_val")) and "global_graph_test_acc" in h]
        if not scored:
            return {}
        best = max(scored, key=lambda h: h["mean_global_val"])
        last = history[-1]
        return {
            "test_acc": best["global_graph_test_acc"],
            "best_round": best["round"],
            "best_val": best["mean_global_val"],
            "global_graph_val_acc": best["global_graph_val_acc"],
            "final_round": last["round"],
            "final_test_acc": last.get("global_graph_test_acc"),
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
    """

    name = "fedsage_plus"
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {
        **FedSage.TAGS, TAG_GENERATED: ExchangeKind.RELAY, TAG_FEATURE_GRAD: ExchangeKind.PEER_SUM,
    }
    option_defaults: ClassVar[Mapping[str, Any]] = {
        **FedSage.option_defaults, "num_pred": 5, "hide_portion": 0.1, "gen_local_steps": 200, "gen_fed_steps": 20,
        "gen_batch": 64, "gen_lr": 1e-3, "gen_weight_decay": 1e-4, "gen_hidden": 256, "cross_weight": 1.0,
        "max_neighbours": 20,
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

    def setup(self, fed: Federation) -> None:
        """Owners train NeighGen locally, then jointly (the only messages), then mend their graphs."""
        super().setup(fed)
        o = self.options
        for pid in fed.client_ids:
            self._train_local_generator(pid, fed.parties[pid].state)
        settings = FederatedGenSettings(steps=o["gen_fed_steps"], batch=o["gen_batch"], cross_weight=o["cross_weight"],
                                        max_neighbours=o["max_neighbours"])
        history = run_federated_generators(fed, settings)
        generated = {}
        for pid in fed.client_ids:
            st = fed.parties[pid].state
            st["original_data"] = st["data"]
            st["data"], counts = mend(st["data"], st["neighgen"], generator=st["gen_rng"])
            st["generated_counts"] = counts
            generated[pid] = int(counts.sum())
        self._gen_report = {
            "generated_neighbours": generated,
            "hidden_nodes": {pid: int(fed.parties[pid].state["impaired"].hidden.numel()) for pid in fed.client_ids},
            "local_loss_end": {pid: fed.parties[pid].state["gen_local_loss"] for pid in fed.client_ids},
            "federated_steps": len(history),
            "federated_loss_first": history[0] if history else {},
            "federated_loss_last": history[-1] if history else {},
        }

    def _train_local_generator(self, pid: str, st: dict[str, Any]) -> None:
        """As owner ``pid``, on its own graph: impair it, train NeighGen (L^d + L^f), freeze the encoder."""
        o, dev = self.options, self.config.device
        rng = torch.Generator().manual_seed(party_seed(self.config.seed, pid, -1))
        graph = impair(st["data"], o["hide_portion"], rng).to(dev)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(party_seed(self.config.seed, pid, -2))
            model = NeighGen(self.task.num_features, num_pred=o["num_pred"], gen_hidden=o["gen_hidden"]).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=o["gen_lr"], weight_decay=o["gen_weight_decay"])
        loss = float("nan")
        for _ in range(o["gen_local_steps"]):
            loss = local_step(model, opt, graph, st["data"].x, batch=o["gen_batch"], max_neighbours=o["max_neighbours"],
                              generator=rng)
        with torch.no_grad():
            st["gen_z"] = model.embed(graph.x, graph.edge_index)  # encoder frozen from here on
        st.update(neighgen=model, impaired=graph, gen_rng=rng, gen_local_loss=loss,
                  neighgen_opt_f=torch.optim.Adam(model.generator_parameters(), lr=o["gen_lr"],
                                                  weight_decay=o["gen_weight_decay"]))

    def report(self) -> dict[str, Any]:
        """result.json's ``fedsage`` block: NeighGen settings and what mending added."""
        o = self.options
        return {"fedsage": {**{k: o[k] for k in (*self._INTS, *self._FLOATS)}, **self._gen_report}}


def _finite(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)
