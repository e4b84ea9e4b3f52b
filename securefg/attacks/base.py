"""Attack interface and registry (PyG ``explain/algorithm/base.py`` shaped).

An attack is a *game* between a challenger (the auditor, who knows the ground truth) and an
adversary (who knows only its view and its side knowledge). :meth:`Attack.run` plays it:

1. :meth:`Attack.challenge` (challenger side, may read :class:`GroundTruth`) draws the items to
   decide about (node pairs, graphs, (client, class) pairs, ...) and keeps their hidden labels;
2. :meth:`Attack.attack` (adversary side) receives only an :class:`AdversaryContext` (its view,
   its side knowledge, public run facts) and the items, and returns one score per item;
3. :meth:`Attack.evaluate` turns scores and hidden labels into the primary metric via the pure
   functions of :mod:`securefg.attacks.metrics`.

Active attacks (a malicious client changing what it sends) override :meth:`Attack.run` and use
the context's ``rerun`` to run the method again with the deviating party.

Each attack declares :meth:`supports` (threat model, method, tags present in the view) and its
metric; the registry resolves names as the protocol registry does.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch

from securefg.attacks.metrics import roc_auc, roc_points, tpr_at_fpr
from securefg.attacks.view import AdversaryView
from securefg.errors import ConfigError


# ------------------------------------------------------------------------------- contexts
@dataclass(frozen=True)
class PublicRun:
    """Facts about the run every party knows (architecture, sizes, hyper-parameters, stack name).

    Args:
        method (str): Method name.
        clients (tuple[str, ...]): Client party ids.
        protocol (str): Name of the protocol stack.
        task (str): ``"node"`` or ``"graph"``.
        num_classes (int): Label space size.
        num_features (int): Node feature size.
        options (Mapping[str, Any]): The method's options (agreed before training).
        config (Mapping[str, Any]): The run configuration (seed, lr, rounds, ...).
        session (bytes): The transport session id every party binds its messages to. (default: empty)
        stack (Any): The protocol stack of the run (every party holds it). (default: :obj:`None`)
    """

    method: str
    clients: tuple[str, ...]
    protocol: str
    task: str
    num_classes: int
    num_features: int
    options: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    session: bytes = b""
    stack: Any = None


@dataclass(frozen=True)
class Knowledge:
    """Side knowledge granted by the threat model, materialised by the auditor.

    Args:
        target_features (Mapping[str, tuple[Tensor, Tensor]], optional): Per target client,
            ``(global_ids, x)`` of its nodes (features only, no edges).
        aux_graphs (Sequence, optional): Public auxiliary graphs (held-out, never challenged).
    """

    target_features: Mapping[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    aux_graphs: Sequence[Any] = ()


@dataclass
class AdversaryContext:
    """Everything the adversary may use: its view, side knowledge and public facts."""

    view: AdversaryView
    knowledge: Knowledge
    run: PublicRun
    parties: tuple[str, ...]
    malicious: bool = False

    @property
    def targets(self) -> tuple[str, ...]:
        """Clients outside the adversary: whose data the attacks go after."""
        return tuple(c for c in self.run.clients if c not in self.parties)


@dataclass
class GroundTruth:
    """What only the auditor knows: the task (every client's data) and the honest run's result.

    Args:
        task: The :class:`~securefg.methods.tasks.NodeTask` / ``GraphTask`` of the run.
        clients (tuple[str, ...]): Client ids in task order.
        heldout_graphs (Sequence): Held-out graphs not given to the adversary (non-members).
        result (Mapping): The honest run's ``result.json`` object.
        parties (Mapping): The honest run's parties (for what the method kept, e.g. packages).
    """

    task: Any
    clients: tuple[str, ...]
    heldout_graphs: Sequence[Any] = ()
    result: Mapping[str, Any] = field(default_factory=dict)
    parties: Mapping[str, Any] = field(default_factory=dict)

    def index(self, cid: str) -> int:
        return self.clients.index(cid)


#: ``rerun(method_class, protocol) -> result dict`` (the auditor runs the method again).
Rerun = Callable[..., dict[str, Any]]


@dataclass
class AuditContext:
    """The harness's side: the adversary's context plus ground truth and a way to rerun.

    Args:
        adversary (AdversaryContext): What the adversary may use.
        truth (GroundTruth): What only the auditor knows.
        seed (int): Seed of the challenges. (default: ``0``)
        rerun (Rerun, optional): ``rerun(method=None, protocol=None) -> result`` (active attacks).
        stack (ProtocolStack, optional): The stack of the audited run.
        workdir (Path, optional): Where derived stacks and caches may be written.
    """

    adversary: AdversaryContext
    truth: GroundTruth
    seed: int = 0
    rerun: Rerun | None = None
    stack: Any = None
    workdir: Any = None


# -------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Challenge:
    """Items to score and their hidden labels (1 = positive: edge, member, over-represented)."""

    items: Any
    labels: torch.Tensor
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Support:
    """Whether an attack applies, and why not."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class AttackOutcome:
    """What one attack achieved on one run.

    Args:
        value (float): The primary metric (higher = the attack did better).
        chance (float): The metric of an adversary who learned nothing from the run.
        details (dict): Secondary metrics and counts (JSON-ready).
        roc (tuple[list, list], optional): ``(fpr, tpr)`` for plots.
        note (str): One sentence for the report (e.g. why the value is chance).
    """

    value: float
    chance: float
    details: Mapping[str, Any] = field(default_factory=dict)
    roc: tuple[list[float], list[float]] | None = None
    note: str = ""


def blind_outcome(chance: float, note: str, **details: Any) -> AttackOutcome:
    """The outcome of an adversary whose view holds nothing usable: it can only guess."""
    return AttackOutcome(value=chance, chance=chance, details={"blind": True, **details}, note=note)


# -------------------------------------------------------------------------------- attacks
class Attack(abc.ABC):
    """Base class of every attack.

    Class attributes:
        name: Registry name (the threat model's ``[attacks.<name>]``).
        metric: Name of the primary metric (the budget key is ``max_<metric>``).
        metric_doc: One line saying what the metric measures.
        chance: Value of the metric for an adversary that learned nothing.
        requires_malicious: An active attack (needs ``behaviour = "malicious"``).
        defaults: Parameters and their defaults.
        payload_tags: Tag globs whose payloads the run must keep (the rest are metadata only).
        own_state_options: Method options an audited run must set so the attack can read its
            adversary's own state, by method.
    """

    name: ClassVar[str]
    metric: ClassVar[str]
    metric_doc: ClassVar[str] = ""
    chance: ClassVar[float] = 0.5
    requires_malicious: ClassVar[bool] = False
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: Tag globs whose payload bytes the run must keep for this attack.
    payload_tags: ClassVar[tuple[str, ...]] = ()
    #: ``{method: {option: value}}`` an audited run of that method must set (:meth:`run_options`)
    own_state_options: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def __init__(self, **params: Any) -> None:
        problems = self.validate_params(params)
        if problems:
            raise ConfigError(f"invalid parameters for attack {self.name!r}:\n" + "\n".join(f"- {p}" for p in problems))
        self.params: dict[str, Any] = {**self.defaults, **params}

    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> list[str]:
        """One message per unknown key or value whose type differs from the default's."""
        problems = []
        for k, v in params.items():
            if k not in cls.defaults:
                problems.append(f"unknown parameter {k!r} (known: {sorted(cls.defaults) or 'none'})")
                continue
            d = cls.defaults[k]
            if d is None:
                continue
            if isinstance(d, bool) != isinstance(v, bool):
                problems.append(f"{k!r} must be {type(d).__name__}, got {v!r}")
            elif isinstance(d, (int, float)) and not isinstance(d, bool) and not isinstance(v, (int, float)):
                problems.append(f"{k!r} must be a number, got {v!r}")
            elif isinstance(d, str) and not isinstance(v, str):
                problems.append(f"{k!r} must be a string, got {v!r}")
            elif isinstance(d, (list, tuple)) and not isinstance(v, (list, tuple)):
                problems.append(f"{k!r} must be a list, got {v!r}")
        return problems

    @classmethod
    def payloads(cls, params: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[str, ...]:
        """Tag globs (``tag@round`` for one round) to keep for a run with method ``options``.

        Default: :attr:`payload_tags`. An attack that reads one round of a bulky tag narrows it
        here, so the audited run does not hold every round's payloads in memory.
        """
        return cls.payload_tags

    @classmethod
    def run_options(cls, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Method options the audited run of ``method`` needs so this attack can read its
        adversary's own state (state a method keeps only when asked, being too bulky for every
        run). Default: :attr:`own_state_options` for ``method``."""
        return dict(cls.own_state_options.get(method, {}))

    def supports(self, ctx: AdversaryContext) -> Support:
        """Whether this attack applies to the run and adversary (default: yes)."""
        return Support(True)

    # --------------------------------------------------------------------- the game
    def run(self, ctx: AuditContext) -> AttackOutcome:
        """Play challenge -> attack -> evaluate (active attacks override this)."""
        gen = torch.Generator().manual_seed(ctx.seed * 7919 + sum(map(ord, self.name)))
        challenge = self.challenge(ctx.truth, ctx.adversary, gen)
        if challenge.labels.numel() == 0:
            return blind_outcome(self.chance, "no challenge items: the truth has nothing to decide about")
        scores = self.attack(ctx.adversary, challenge.items)
        return self.evaluate(challenge, scores)

    # ----------------------------------------------------------- side-knowledge baseline
    def baseline(self, knowledge: Knowledge, run: PublicRun, items: Any) -> torch.Tensor | None:
        """Scores from the threat model's side knowledge alone, without a single message of the run.

        The signature is the guarantee: it receives no view and no party state, only what the
        threat model grants (:class:`Knowledge`) and the public run facts. ``None`` (the
        default) means the side knowledge alone gives no score, so the baseline is chance.
        """
        return None

    def run_baseline(self, ctx: AuditContext) -> float:
        """The metric a side-knowledge-only adversary reaches on the same challenge as :meth:`run`.

        Chance when :meth:`baseline` gives no scores or the metric is not an AUC.
        """
        if self.metric != "auc" or type(self).baseline is Attack.baseline:
            return self.chance  # no side-knowledge scorer: do not redraw a (possibly costly) challenge
        gen = torch.Generator().manual_seed(ctx.seed * 7919 + sum(map(ord, self.name)))
        challenge = self.challenge(ctx.truth, ctx.adversary, gen)
        if challenge.labels.numel() == 0:
            return self.chance
        scores = self.baseline(ctx.adversary.knowledge, ctx.adversary.run, challenge.items)
        return self.chance if scores is None else roc_auc(challenge.labels, scores)

    def challenge(self, truth: GroundTruth, adv: AdversaryContext, generator: torch.Generator) -> Challenge:
        """Challenger: draw the items and their hidden labels."""
        raise NotImplementedError(f"attack {self.name!r} does not define a challenge")

    def attack(self, adv: AdversaryContext, items: Any) -> torch.Tensor:
        """Adversary: one score per item, from ``adv`` only."""
        raise NotImplementedError(f"attack {self.name!r} does not define its adversary side")

    def evaluate(self, challenge: Challenge, scores: torch.Tensor) -> AttackOutcome:
        """Default metric: ROC-AUC, with TPR at 1% FPR and the ROC curve as details."""
        y = challenge.labels
        return AttackOutcome(
            value=roc_auc(y, scores),
            chance=self.chance,
            details={"tpr_at_1pct_fpr": tpr_at_fpr(y, scores, 0.01), "positives": int(y.sum()),
                     "negatives": int((1 - y).sum()),
                     **{k: v for k, v in challenge.info.items() if not k.startswith("_")}},
            roc=roc_points(y, scores),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"


_ATTACKS: dict[str, type[Attack]] = {}
A = TypeVar("A", bound=type[Attack])


def register_attack(cls: A) -> A:
    """Class decorator: make an attack available to threat models by its ``name``."""
    if cls.name in _ATTACKS and _ATTACKS[cls.name] is not cls:
        raise ValueError(f"attack name {cls.name!r} is already registered")
    _ATTACKS[cls.name] = cls
    return cls


def _load_builtins() -> None:
    import securefg.attacks.catalog  # noqa: F401  (registers the built-in attacks)


def attack_class(name: str) -> type[Attack]:
    """The attack registered as ``name``."""
    _load_builtins()
    if name not in _ATTACKS:
        raise ConfigError(f"Could not resolve attack {name!r} among choices {sorted(_ATTACKS)}")
    return _ATTACKS[name]


def available_attacks() -> list[str]:
    _load_builtins()
    return sorted(_ATTACKS)


__all__ = [
    "AdversaryContext", "Attack", "AttackOutcome", "AuditContext", "Challenge", "GroundTruth", "Knowledge",
    "PublicRun", "Rerun", "Support", "attack_class", "available_attacks", "blind_outcome", "register_attack",
]
