"""Local training only: every client trains alone on its own data; nothing is exchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from torch import nn

from securefg.errors import ConfigError
from securefg.federation.party import Party
from securefg.federation.program.context import ClientAction, ClientContext, ServerContext
from securefg.methods.backbone_option import (
    BACKBONE_OPTIONS,
    check_backbone_options,
    node_backbone,
    train_node_backbone,
)
from securefg.methods.base import Method, MethodConfig, Task, register_method
from securefg.methods.fedavg import combine_client_scores, summarize_task
from securefg.methods.tasks import NodeTask
from securefg.methods.training import (
    PartyGenerator,
    evaluate_node,
    load_state,
    party_rng,
    party_seed,
    train_graph_epochs,
    with_sparse_adjacency,
)

ACTION_TRAIN = "local/train"
#: ``score_on`` values (see :class:`Local`).
SCORE_ON = ("own", "global_graph")


@register_method
class Local(Method):
    """Local baseline: the same backbone and optimiser, ``rounds x local_epochs`` local steps.

    It runs on the same runner as every method (one ``local/train`` step per round, no
    envelope), so its rounds, dropouts and measurements mean what they mean elsewhere.

    Options:
        backbone (str): ``"gcn"`` (FED-PUB's baselines) or ``"sage"`` (FedSage's LocSage) for
            node tasks. (default: ``"gcn"``)
        layers (int): GraphSage layers. (default: ``2``)
        dropout (float): GraphSage dropout. (default: ``0.5``)
        fanouts, batch_nodes: GraphSage's sampled mini-batch training
            (:data:`securefg.methods.backbone_option.SAMPLING_OPTION_HELP`; default: full batch).
        score_on (str): Node tasks: ``"own"`` scores each client's model on its own test nodes
            (FED-PUB's Local); ``"global_graph"`` also scores it on the global test set, the
            whole graph with every cross-client edge (FedSage's LocSage), and reports that as
            ``test_acc`` (the own-data figure stays as ``own_test_acc``). The global scores are
            the experimenter's measurement: no party holds that graph. (default: ``"own"``)
    """

    name = "local"
    TAGS = {}
    option_defaults: ClassVar[Mapping[str, Any]] = {**BACKBONE_OPTIONS, "score_on": "own"}

    def __init__(self, task: Task, config: MethodConfig) -> None:
        super().__init__(task, config)
        check_backbone_options(self.name, self.options, node_task=isinstance(task, NodeTask))
        if self.options["score_on"] not in SCORE_ON:
            raise ConfigError(f"local: score_on must be one of {list(SCORE_ON)}, got {self.options['score_on']!r}")
        if self.options["score_on"] == "global_graph" and (not isinstance(task, NodeTask) or task.full_graph is None):
            raise ConfigError("local: score_on=global_graph needs a node task with its full graph")
        self._eval_model: nn.Module | None = None

    def make_model(self) -> nn.Module:
        """The chosen backbone on node tasks, GIN on graph tasks."""
        if not isinstance(self.task, NodeTask):
            return super().make_model()
        return node_backbone(self.options, in_channels=self.task.num_features, classes=self.task.num_classes,
                             hidden=self.config.hidden, seed=self.config.seed).to(self.config.device)

    def setup_server(self, party: Party) -> None:
        """The server holds nothing."""

    def setup_client(self, party: Party, index: int) -> None:
        if isinstance(self.task, NodeTask):
            data = with_sparse_adjacency(self.task.clients[index])
            party.state["data"] = data.to(self.config.device)
        else:
            party.state["data"] = {"train": self.task.train[index], "val": self.task.val[index],
                                   "test": self.task.test[index]}
        party.state["model"] = self.make_model()
        party.state["optimizer"] = self.optimizer_for(party.state["model"])
        party.state["batch_rng"] = PartyGenerator(party_seed(self.config.seed, party.pid, -1))

    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        srv.ask(ACTION_TRAIN)
        return {}

    def client_actions(self) -> Mapping[str, ClientAction]:
        return {ACTION_TRAIN: self.on_train}

    def on_train(self, cli: ClientContext) -> None:
        """Train under this party's own RNG stream (``party_rng``), so its dropout masks are
        the same wherever it runs."""
        t = self.config.train
        party = cli.party
        model, opt, data = party.state["model"], party.state["optimizer"], party.state["data"]
        if isinstance(self.task, NodeTask):
            with party_rng(self.config.seed, cli.pid, cli.round):
                train_node_backbone(self.options, model, opt, data, t.local_epochs,
                                    generator=party.state["batch_rng"].generator)
            party.state["scores"] = evaluate_node(model, data)
        else:
            with party_rng(self.config.seed, cli.pid, cli.round):
                train_graph_epochs(model, opt, data["train"], epochs=t.local_epochs, batch_size=t.batch_size,
                                   device=self.config.device, generator=party.state["batch_rng"].generator,
                                   groups=self.task.label_groups)
            val, test = self.score_graphs(model, data["val"]), self.score_graphs(model, data["test"])
            party.state["scores"] = {"val_acc": val["acc"], "val_auc": val["auc"], "test_acc": test["acc"],
                                     "test_auc": test["auc"]}

    def measure_client(self, party: Party) -> dict[str, Any]:
        """Own scores; on graph tasks also the model, which the experimenter scores on the global
        test set (a client holds only its own graphs)."""
        out: dict[str, Any] = dict(party.state.get("scores", {}))
        if not isinstance(self.task, NodeTask) or self.options["score_on"] == "global_graph":
            out["model"] = {k: v.detach().cpu().clone() for k, v in party.state["model"].state_dict().items()}
        return out

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        if isinstance(self.task, NodeTask):
            return self._combine_node(server, per_client)
        scored = {}
        for cid, m in per_client.items():
            s = {k: v for k, v in m.items() if k != "model"}
            if "model" in m:
                model = self.make_model()
                model.load_state_dict(m["model"])
                glob = self.score_graphs(model, self.task.global_test)
                s.update(global_test_auc=glob["auc"], global_test_acc=glob["acc"])
            scored[cid] = s
        out = combine_client_scores(self, {}, scored)
        scores = out["per_client"].values()
        aucs = [s["global_test_auc"] for s in scores if s.get("global_test_auc") == s.get("global_test_auc")]
        accs = [s["global_test_acc"] for s in scores if "global_test_acc" in s]
        out["global_test_auc"] = sum(aucs) / len(aucs) if aucs else float("nan")
        out["global_test_acc"] = sum(accs) / len(accs) if accs else float("nan")
        return out

    def _combine_node(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Own scores; with ``score_on=global_graph`` each model also on the global test set."""
        if not any("model" in m for m in per_client.values()):
            return combine_client_scores(self, server, per_client)
        assert isinstance(self.task, NodeTask) and self.task.full_graph is not None
        if self._eval_model is None:
            self._eval_model = self.make_model()
            full = with_sparse_adjacency(self.task.full_graph)
            self._full = full.to(self.config.device)
        scored = {}
        for cid, m in per_client.items():
            s = {k: v for k, v in m.items() if k != "model"}
            load_state(self._eval_model, m["model"])
            s["global_graph_test_acc"] = evaluate_node(self._eval_model, self._full)["test_acc"]
            scored[cid] = s
        out = combine_client_scores(self, server, scored)
        out["mean_global_graph_test"] = sum(s["global_graph_test_acc"] for s in scored.values()) / len(scored)
        return out

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        out = summarize_task(self.task, history)
        if out and "mean_global_graph_test" in history[-1]:  # LocSage: the global test set at the same round
            at = next(h for h in history if h["round"] == out["best_round"])
            out["own_test_acc"] = out["test_acc"]
            out["test_acc"] = at["mean_global_graph_test"]
            out["final_test_acc"] = history[-1]["mean_global_graph_test"]
        return out
