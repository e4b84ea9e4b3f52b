"""The method interface the round runner drives, and the method registry.

A method module holds the server half and the client half side by side (Flower's
``configure_*``/``aggregate_*`` pairs and ``handle_*`` handlers). The halves share nothing but
exchange calls; a method's message inventory (``TAGS``) sits at the top of its module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn
from torch_geometric.data import Data

from securefg.errors import ConfigError
from securefg.federation.federation import Federation
from securefg.federation.party import Party
from securefg.federation.program.context import ClientAction, ServerContext
from securefg.methods.label_groups import LabelGroups
from securefg.methods.optim import adam
from securefg.methods.tasks import GraphTask, NodeTask
from securefg.methods.training import TrainConfig, evaluate_graphs
from securefg.models.gcn import GCN
from securefg.models.gin import GIN
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack

Task = NodeTask | GraphTask

#: GIN readouts a graph task may use (``--option pooling=...``).
GRAPH_POOLINGS = ("sum", "mean")


@dataclass
class MethodConfig:
    """Settings common to every method.

    Args:
        rounds (int): Communication rounds.
        train (TrainConfig): Local optimisation settings.
        device (torch.device): Where models train.
        seed (int): Run seed.
        hidden (int): Hidden size of the backbone (0: the method's default).
        options (dict): Method-specific options (e.g. ``{"weighting": "uniform"}``).
        graph_pooling (str): GIN readout for graph tasks, ``"sum"`` (GCFL's code, whose GIN
            the CeFGC paper's baselines reuse) or ``"mean"`` (the CeFGC paper's prose). Sum is the
            default because graph size carries the label on PROTEINS (class means 50 vs 23 nodes)
            and a mean readout cannot see it: PROTEINS seed 0, FedAvg 0.82 vs 0.77 AUC and CeFGC
            0.83 vs 0.72. (default: ``"sum"``)
        patience (int): Rounds without a better server-side validation score before the
            runner stops (``--option patience=N``; 0 runs every round). (default: ``0``)
    """

    rounds: int
    train: TrainConfig = field(default_factory=TrainConfig)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    seed: int = 0
    hidden: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    graph_pooling: str = "sum"
    patience: int = 0

    def __post_init__(self) -> None:
        if self.graph_pooling not in GRAPH_POOLINGS:
            raise ConfigError(f"--option pooling must be one of {list(GRAPH_POOLINGS)}, got {self.graph_pooling!r}")


class Method:
    """One federated learning method, as party programs (:mod:`securefg.federation.program`).

    Lifecycle, the same on every backend: each party's own setup (``setup_server``,
    ``setup_client``, ``setup_helper``), the communicating setup phase ``server_prepare``, then
    per round the server's ``server_round`` (which asks clients to run their
    ``client_actions``) and every party's measurement of its own state (``measure_client``,
    ``measure_server``: the experimenter's, never sent), which ``combine_measures`` turns into
    a history row; finally ``summarize``.
    """

    name: ClassVar[str]
    tasks: ClassVar[frozenset[str]] = frozenset({"node", "graph"})
    TAGS: ClassVar[Mapping[str, ExchangeKind]] = {}
    default_stack: ClassVar[str] = "plaintext"
    #: Options accepted in ``MethodConfig.options`` with their defaults.
    option_defaults: ClassVar[Mapping[str, Any]] = {}
    #: The key of ``server_round``'s result holding the validation score the *server* learned (from
    #: a secure sum); ``None``: the method reveals none, so it cannot stop early.
    server_val_key: ClassVar[str | None] = None
    #: Rounds without a better server-side validation score before training stops (the run
    #: option ``patience``; 0 runs every round).
    default_patience: ClassVar[int] = 0
    #: Update aggregates ``--option robust=...`` rebinds to ``subgroup_robust`` (none: refused).
    ROBUST_TAGS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def default_stack_for(cls, cfg: Any) -> str:
        """The stack a run without ``--protocol`` uses: :attr:`default_stack`, unless the method
        knows that the run's data options rule it out (CeFGC on several datasets)."""
        return cls.default_stack

    def __init__(self, task: Task, config: MethodConfig) -> None:
        if task.kind not in self.tasks:
            raise ConfigError(f"method {self.name!r} does not support {task.kind} tasks (supports {sorted(self.tasks)})")
        unknown = set(config.options) - set(self.option_defaults)
        if unknown:
            from securefg.commands.option_list import accepted_options

            raise ConfigError(
                f"unknown option(s) {sorted(unknown)} for method {self.name!r}; it accepts "
                f"{sorted(accepted_options(self.name))} (`securefg run --list-options {self.name}` says what each does)"
            )
        self.task = task
        self.config = config
        self.options = effective_options(self.option_defaults, config.options)
        self.generator = torch.Generator().manual_seed(config.seed)

    # ------------------------------------------------------------------ to implement
    @property
    def num_clients(self) -> int:
        return len(self.task.clients) if isinstance(self.task, NodeTask) else self.task.num_clients

    #: Helper parties the method needs besides the server and the clients (e.g. ``keyholder``).
    extra_parties: tuple[str, ...] = ()

    # Party programs (securefg.federation.program): written once, run on every backend. A
    # method implements these; the in-process runner and the Flower backend drive them.
    def setup_server(self, party: Party) -> None:
        """The server's own state before the first round (no communication)."""
        raise NotImplementedError(f"method {self.name!r} has no server program")

    def setup_client(self, party: Party, index: int) -> None:
        """Client ``index``'s own state before the first round (its data, its model)."""
        raise NotImplementedError(f"method {self.name!r} has no client program")

    def setup_helper(self, party: Party) -> None:
        """A helper party's own state (default: nothing; its actions are the mechanisms')."""

    def server_prepare(self, srv: ServerContext) -> None:
        """A setup phase with communication, once before round 0 (``srv.round`` is -1), e.g.
        FedStruct's offline structure features or FedSage+'s generators (default: nothing)."""

    def server_round(self, srv: ServerContext, r: int) -> dict[str, float]:
        """One round as the server: ask clients to act, run exchanges; returns what the server learned."""
        raise NotImplementedError(f"method {self.name!r} has no server program")

    def client_actions(self) -> Mapping[str, ClientAction]:
        """The client's handlers by action name (each runs as the client, on its own state)."""
        return {}

    def helper_actions(self) -> Mapping[str, ClientAction]:
        """A helper party's handlers by action name (default: none)."""
        return {}

    def measure_client(self, party: Party) -> dict[str, Any]:
        """The experimenter's per-round measurement of one client's own state (never sent)."""
        return dict(party.state.get("scores", {}))

    def measure_server(self, party: Party) -> dict[str, Any]:
        """The experimenter's per-round material from the server's state (e.g. its model)."""
        return {}

    def combine_measures(self, server: Mapping[str, Any], per_client: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """One history row from the parties' measurements (the experimenter's, never a party's)."""
        raise NotImplementedError(f"method {self.name!r} has no measurement")

    def observe_run(self, fed: Federation) -> None:
        """The experimenter's handle on the run, before ``report()``: its (merged) transcript and
        stack. On a multi-process backend ``fed``'s parties are empty stand-ins, so what a report
        needs from a party's state must come through its measurement. (default: nothing)"""

    #: Whether the method can run with its parties in separate processes (a one-owner baseline cannot).
    distributable: ClassVar[bool] = True
    #: Whether a run can continue from its checkpoint (``--resume``); a method whose state cannot
    #: outlive its session says ``False``, and ``securefg reproduce`` then writes its cells no checkpoint.
    resumable: ClassVar[bool] = True

    def check_stack(self, stack: ProtocolStack) -> None:
        """Refuse, before anything trains, a stack this method cannot use (default: any goes)."""

    # In-process conveniences over the party programs (tests, benches, audits).
    def setup(self, fed: Federation) -> None:
        """Every party's own setup, in process (what the runner does before round 0)."""
        self.check_stack(fed.stack)
        self.setup_server(fed.server)
        for k, client in enumerate(fed.clients):
            self.setup_client(client, k)
        for pid in self.extra_parties:
            self.setup_helper(fed.parties[pid])

    def measure(self, fed: Federation) -> dict[str, Any]:
        """The experimenter's evaluation of the current models: per-client and global metrics."""
        server = self.measure_server(fed.server)
        per_client = {cid: self.measure_client(fed.parties[cid]) for cid in fed.client_ids}
        return self.combine_measures(server, per_client)

    def summarize(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """Final metrics from the per-round measurements (default: best mean validation round)."""
        return select_best_round(history)

    # ------------------------------------------------------------------- helpers
    def make_model(self) -> nn.Module:
        """The backbone for this task: GCN (node) or GIN (graph), seeded identically."""
        torch.manual_seed(self.config.seed)
        if isinstance(self.task, NodeTask):
            model: nn.Module = GCN(self.task.num_features, self.task.num_classes, hidden_channels=self.config.hidden or 128)
        else:
            model = GIN(self.task.num_features, self.task.num_classes, hidden_channels=self.config.hidden or 32,
                        pooling=self.config.graph_pooling)
        return model.to(self.config.device)

    def score_graphs(self, model: nn.Module, graphs: Sequence[Data]) -> dict[str, Any]:
        """Accuracy and ROC-AUC of ``model`` on ``graphs``, per dataset head when the task has several."""
        assert isinstance(self.task, GraphTask)
        return evaluate_graphs(model, graphs, self.task.num_classes, self.config.device, groups=self.task.label_groups)

    @property
    def owner_groups(self) -> LabelGroups | None:
        """The task's per-dataset heads when averaging takes each over its owners only
        (:mod:`securefg.methods.head_owners`); ``None`` for one head, or ``head_average=all``."""
        groups = self.task.label_groups if isinstance(self.task, GraphTask) else None
        return groups if groups is not None and groups.owner_average else None

    def optimizer_for(self, model: nn.Module) -> torch.optim.Optimizer:
        t = self.config.train
        return adam(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)

    def checkpoint_party(self, party: Party) -> dict[str, Any]:
        """One party's serializable state: every module and optimizer (anything with a
        ``state_dict``) in it. Each party checkpoints its own, wherever it runs."""
        return {k: v.state_dict() for k, v in party.state.items() if hasattr(v, "state_dict")}

    def restore_party(self, party: Party, items: Mapping[str, Any]) -> None:
        """Load :meth:`checkpoint_party`; state that mechanisms create lazily is rebuilt first."""
        for k, sd in items.items():
            if k not in party.state:
                party.state[k] = _lazy_state_factory(k)()
            party.state[k].load_state_dict(sd)

    def checkpoint(self, fed: Federation) -> dict[str, dict[str, Any]]:
        """Every party's :meth:`checkpoint_party` (the in-process runner holds them all)."""
        return {pid: self.checkpoint_party(party) for pid, party in fed.parties.items()}

    def restore(self, fed: Federation, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Load a :meth:`checkpoint` into every party."""
        for pid, items in state.items():
            self.restore_party(fed.parties[pid], items)


def _lazy_state_factory(key: str) -> Any:
    """Constructors of restorable state that mechanisms create on first use."""
    from securefg.errors import CheckpointError
    from securefg.protocol.dp.accountant import STATE_KEY, PrivacyAccountant

    factories = {STATE_KEY: PrivacyAccountant}
    if key not in factories:
        raise CheckpointError(f"checkpoint holds state {key!r} that this run does not create and cannot rebuild")
    return factories[key]


def select_best_round(history: list[dict[str, Any]], key: str = "val", report: str = "test") -> dict[str, Any]:
    """FED-PUB's protocol: the round with the best mean-over-clients validation score."""
    scored = [h for h in history if h.get(f"mean_{key}") == h.get(f"mean_{key}")]  # drop NaN
    if not scored:
        return {}
    best = max(scored, key=lambda h: h[f"mean_{key}"])
    return {
        "best_round": best["round"],
        f"best_{key}": best[f"mean_{key}"],
        f"{report}": best[f"mean_{report}"],
        "per_client": best.get("per_client", {}),
        "final_round": history[-1]["round"],
        f"final_{report}": history[-1].get(f"mean_{report}"),
    }


_METHODS: dict[str, type[Method]] = {}


def register_method(cls: type[Method]) -> type[Method]:
    _METHODS[cls.name] = cls
    return cls


def method_class(name: str) -> type[Method]:
    import securefg.methods.catalog  # noqa: F401  (registers the built-in methods)

    key = name.lower().replace("-", "_")
    if key not in _METHODS:
        raise ConfigError(f"Could not resolve method {name!r} among choices {sorted(_METHODS)}")
    return _METHODS[key]


def available_methods() -> list[str]:
    import securefg.methods.catalog  # noqa: F401

    return sorted(_METHODS)


def effective_options(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The options a method runs with: its defaults, overridden by ``given`` (flags parsed from
    text). An auditor reading a run's options reads these, not only the ones the user gave."""
    return {**defaults, **{k: _as_type_of(defaults[k], k, v) if k in defaults else v for k, v in given.items()}}


def _as_type_of(default: Any, name: str, value: Any) -> Any:
    """``value`` as the type of the option's default when that is a bool: ``bool("false")`` is
    True, so a flag given as text (Python API, TOML) must be parsed, not cast."""
    if not isinstance(default, bool) or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"option {name!r} is a flag; got {value!r} (use true or false)")
