"""Threat models in TOML: who is adversarial, what it knows, which attacks to run, the budgets.

A threat model file (``threat_models/*.toml``)::

    name = "curious_server"
    description = "The server follows the protocol and tries to learn client data."
    assumptions = ["the server does not collude with any client or key holder"]

    [adversary]
    parties = ["server"]                 # "server", "client/<k>", "keyholder", ...; several = coalition
    behaviour = "honest-but-curious"     # or "malicious"

    [side_knowledge]
    target_features = true               # node features of the target clients' nodes, no edges
    aux_graphs = 0.25                    # share of the held-out graphs it holds as public data

    [attacks.label_inference]            # table name = attack name (or set attack = "...")
    budget = { margin = 0.1 }            # the run may add at most 0.1 over max(side knowledge, chance);
                                         # or { max_auc = 0.6 }: the same, stated as chance + margin
    rounds = [0]                         # every other key is an attack parameter

It parses into frozen dataclasses, validated at construction: every problem in the file is
collected and raised once as a :class:`~securefg.errors.ConfigError` naming the file, one
``- line`` per problem (the house pattern of :mod:`securefg.protocol.stack`). Attack names and
parameters are checked against the attack registry (:mod:`securefg.attacks`), budgets against
the attack's declared metric.
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from securefg.errors import ConfigError
from securefg.toml_files import read_named_toml, threat_models_dir, top_level_problems

_TOP_KEYS = {"name", "description", "assumptions", "adversary", "side_knowledge", "attacks"}
_ADVERSARY_KEYS = {"parties", "behaviour"}
_PARTY = re.compile(r"^(server|keyholder|shuffler|client/\d+)$")


class Behaviour(str, enum.Enum):
    """What the adversary does besides looking."""

    HONEST_BUT_CURIOUS = "honest-but-curious"
    """Follows the protocol; analyses everything it receives (and what it sent)."""
    MALICIOUS = "malicious"
    """Deviates: sends crafted or poisoned messages. Also curious."""


_BEHAVIOUR_ALIASES = {"semi-honest": Behaviour.HONEST_BUT_CURIOUS, "curious": Behaviour.HONEST_BUT_CURIOUS}


@dataclass(frozen=True)
class Adversary:
    """The adversarial parties (a coalition when there are several) and their behaviour.

    Args:
        parties (tuple[str, ...]): Party ids, e.g. ``("server",)`` or ``("client/0", "client/3")``.
        behaviour (Behaviour): Honest-but-curious or malicious.
    """

    parties: tuple[str, ...]
    behaviour: Behaviour

    @property
    def clients(self) -> tuple[str, ...]:
        """The adversarial clients."""
        return tuple(p for p in self.parties if p.startswith("client/"))

    @property
    def includes_server(self) -> bool:
        return "server" in self.parties

    @property
    def is_coalition(self) -> bool:
        return len(self.parties) > 1

    def describe(self) -> str:
        who = " + ".join(self.parties)
        return f"{who} ({self.behaviour.value}{', colluding' if self.is_coalition else ''})"


@dataclass(frozen=True)
class SideKnowledge:
    """What the adversary knows besides its view of the transcript.

    Args:
        target_features (bool): The node features of the target clients' nodes, without their
            edges (e.g. public paper texts whose citation graph is private). (default: ``False``)
        aux_graphs (float): Share of the held-out graphs (the global test set) the adversary holds
            as public auxiliary data, e.g. to train a reference model; those graphs are never
            used as challenge non-members. (default: ``0.0``)
    """

    target_features: bool = False
    aux_graphs: float = 0.0

    def describe(self) -> list[str]:
        out = []
        if self.target_features:
            out.append("node features (not edges) of the target clients' nodes")
        if self.aux_graphs > 0:
            out.append(f"{self.aux_graphs:.0%} of the held-out graphs as public auxiliary data")
        return out or ["nothing beyond its view"]


@dataclass(frozen=True)
class AttackSpec:
    """One attack to run: registry name, parameters, and the budget on its metric.

    Args:
        key (str): The table name in the file (unique; several specs may share an attack).
        attack (str): Registered attack name.
        params (Mapping[str, Any]): Parameters (validated against the attack's defaults).
        metric (str): The attack's primary metric (from the registry).
        budget (float, optional): Upper bound on the metric; ``None`` = report only.
        margin (float, optional): ``budget = { margin = m }``: the advantage the run may add over
            max(side-knowledge baseline, chance); the absolute budget is then ``chance + m``,
            known once the attack has run (``budget`` stays ``None`` here).
    """

    key: str
    attack: str
    params: Mapping[str, Any] = field(default_factory=dict)
    metric: str = ""
    budget: float | None = None
    margin: float | None = None

    def budget_for(self, chance: float | None) -> float | None:
        """The absolute budget on the metric once the attack's chance level is known."""
        if self.margin is None:
            return self.budget
        return None if chance is None else float(chance) + self.margin


@dataclass(frozen=True)
class ThreatModel:
    """A validated threat model.

    Args:
        name (str): Name, reported in every audit.
        adversary (Adversary): Who attacks.
        side_knowledge (SideKnowledge): What it knows besides its view.
        attacks (tuple[AttackSpec, ...]): What it runs.
        description (str): Prose for the report. (default: ``""``)
        assumptions (tuple[str, ...]): Stated assumptions (e.g. non-collusion). (default: none)
        source (str): File it was read from. (default: ``"<memory>"``)
    """

    name: str
    adversary: Adversary
    side_knowledge: SideKnowledge
    attacks: tuple[AttackSpec, ...]
    description: str = ""
    assumptions: tuple[str, ...] = ()
    source: str = "<memory>"

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, path_or_name: str | os.PathLike[str]) -> ThreatModel:
        """Read a threat model from a TOML file, or by name from :func:`threat_models_dir`."""
        data, path = read_named_toml(path_or_name, threat_models_dir(), "threat model")
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<memory>") -> ThreatModel:
        """Validate a parsed TOML document; raise one :class:`ConfigError` listing every problem."""
        problems = top_level_problems(data, _TOP_KEYS)
        name = data.get("name")
        description = data.get("description", "")
        if not isinstance(description, str):
            problems.append("'description' must be a string")
            description = ""
        assumptions = data.get("assumptions", [])
        if not isinstance(assumptions, list) or not all(isinstance(a, str) for a in assumptions):
            problems.append("'assumptions' must be a list of strings")
            assumptions = []
        adversary = _adversary(data.get("adversary"), problems)
        knowledge = _side_knowledge(data.get("side_knowledge", {}), problems)
        attacks = _attacks(data.get("attacks"), adversary, problems)
        if problems:
            raise ConfigError(f"invalid threat model {source}:\n" + "\n".join(f"- {p}" for p in problems))
        assert adversary is not None  # for the type checker: problems would have been raised
        return cls(str(name), adversary, knowledge, tuple(attacks), description=description.strip(),
                   assumptions=tuple(assumptions), source=source)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (for ``audit.json``)."""
        return {
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "adversary": {"parties": list(self.adversary.parties), "behaviour": self.adversary.behaviour.value},
            "side_knowledge": {"target_features": self.side_knowledge.target_features,
                               "aux_graphs": self.side_knowledge.aux_graphs},
            "assumptions": list(self.assumptions),
            "attacks": [{"key": a.key, "attack": a.attack, "metric": a.metric, "budget": a.budget,
                         **({"margin": a.margin} if a.margin is not None else {}),
                         "params": dict(a.params)} for a in self.attacks],
        }

    def secure_sum_defences(self, protections: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
        """What stands against this adversary in the run's secure sums, one line per sum tag.

        Against malicious clients: the range check in force (``none``, ``norm_bound`` or
        ``proof``, :class:`~securefg.protocol.secure_sum.range_check.RangeCheck`; a proof is
        never active). Against a malicious server: whether keys are pinned (the malicious-server
        mode, :mod:`~securefg.protocol.secure_sum.pinned`). Nothing for an honest-but-curious one.

        Args:
            protections (Iterable[Mapping[str, Any]]): :func:`~securefg.audit.protections.protections` entries.
        """
        if self.adversary.behaviour is not Behaviour.MALICIOUS:
            return ()
        out = []
        for p in protections:
            if "range_check" not in p:
                continue
            if self.adversary.clients:
                out.append(f"Malicious clients against {p['mechanism']} tag {p['tag']!r}: range check "
                           f"{p['range_check']}" + ("" if p["range_check"] != "none" else
                                                    " (a malicious client can shift or wrap the sum at will)"))
            if self.adversary.includes_server:
                pinned = p["pinned_keys"]
                out.append(f"Malicious server against {p['mechanism']} tag {p['tag']!r}: " + (
                    f"keys pinned ({pinned}); key substitution and survivor-list equivocation are refused"
                    if pinned != "none" else "keys not pinned: it can substitute keys and open an input"))
        return tuple(out)

    def __repr__(self) -> str:
        return f"ThreatModel({self.name!r}, adversary={self.adversary.describe()!r}, attacks={len(self.attacks)})"


# --------------------------------------------------------------------------------- helpers
def _adversary(table: object, problems: list[str]) -> Adversary | None:
    if not isinstance(table, Mapping):
        problems.append("missing [adversary] table (parties = [...], behaviour = \"honest-but-curious\" | \"malicious\")")
        return None
    for k in sorted(set(table) - _ADVERSARY_KEYS):
        problems.append(f"adversary: unknown key {k!r} (known: {sorted(_ADVERSARY_KEYS)})")
    parties = table.get("parties")
    ok = True
    if not isinstance(parties, list) or not parties or not all(isinstance(p, str) for p in parties):
        problems.append("adversary.parties must be a non-empty list of party ids, e.g. [\"server\"] or [\"client/0\"]")
        ok, parties = False, []
    for p in parties:
        if not _PARTY.match(p):
            problems.append(f"adversary.parties: {p!r} is not a party id (server, client/<k>, keyholder, shuffler)")
            ok = False
    if len(set(parties)) != len(parties):
        problems.append(f"adversary.parties lists a party twice: {parties}")
        ok = False
    raw = table.get("behaviour")
    behaviour: Behaviour | None = None
    if isinstance(raw, str):
        behaviour = _BEHAVIOUR_ALIASES.get(raw.lower())
        if behaviour is None:
            try:
                behaviour = Behaviour(raw.lower())
            except ValueError:
                problems.append(f"adversary.behaviour {raw!r} is not one of {[b.value for b in Behaviour]}")
    else:
        problems.append(f"adversary.behaviour must be one of {[b.value for b in Behaviour]}")
    if not ok or behaviour is None:
        return None
    return Adversary(tuple(parties), behaviour)


def _side_knowledge(table: object, problems: list[str]) -> SideKnowledge:
    if not isinstance(table, Mapping):
        problems.append("[side_knowledge] must be a table")
        return SideKnowledge()
    known = {"target_features", "aux_graphs"}
    for k in sorted(set(table) - known):
        problems.append(f"side_knowledge: unknown key {k!r} (known: {sorted(known)})")
    tf = table.get("target_features", False)
    if not isinstance(tf, bool):
        problems.append(f"side_knowledge.target_features must be true or false, got {tf!r}")
        tf = False
    aux = table.get("aux_graphs", 0.0)
    if isinstance(aux, bool) or not isinstance(aux, (int, float)) or not math.isfinite(aux) or not 0 <= aux < 1:
        problems.append(f"side_knowledge.aux_graphs must be a share in [0, 1), got {aux!r}")
        aux = 0.0
    return SideKnowledge(tf, float(aux))


def _attacks(table: object, adversary: Adversary | None, problems: list[str]) -> list[AttackSpec]:
    from securefg.attacks.base import attack_class, available_attacks

    if not isinstance(table, Mapping) or not table:
        problems.append(f"missing [attacks.<name>] tables; choices: {available_attacks()}")
        return []
    out = []
    for key, body in table.items():
        where = f"attacks.{key}"
        if not isinstance(body, Mapping):
            problems.append(f"{where} must be a table")
            continue
        name = body.get("attack", key)
        try:
            acls = attack_class(str(name))
        except ConfigError as exc:
            problems.append(f"{where}: {exc}")
            continue
        params = {k: v for k, v in body.items() if k not in ("budget", "attack")}
        problems.extend(f"{where}: {p}" for p in acls.validate_params(params))
        budget, margin = _budget(body.get("budget"), f"max_{acls.metric}", acls, where, problems)
        if adversary is not None and acls.requires_malicious and adversary.behaviour is not Behaviour.MALICIOUS:
            problems.append(f"{where}: {acls.name!r} is an active attack and needs behaviour = \"malicious\"")
        out.append(AttackSpec(str(key), acls.name, params, acls.metric, budget, margin))
    return out


def _budget(raw: object, expected: str, acls: Any, where: str,
            problems: list[str]) -> tuple[float | None, float | None]:
    """``(budget, margin)`` from ``{ max_<metric> = b }`` (absolute) or ``{ margin = m }`` (advantage)."""
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping) or len(raw) != 1 or set(raw) - {expected, "margin"}:
        got = sorted(raw) if isinstance(raw, Mapping) else raw
        problems.append(f"{where}: budget must be {{ {expected} = <number> }} or {{ margin = <number> }} "
                        f"({acls.name!r} reports {acls.metric!r}), got {got!r}")
        return None, None
    (key, value), = raw.items()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        problems.append(f"{where}: budget {key} must be a finite number, got {value!r}")
        return None, None
    if key == "margin":
        if value < 0:
            problems.append(f"{where}: budget margin must be >= 0, got {value!r}")
            return None, None
        return None, float(value)
    return float(value), None


__all__ = ["Adversary", "AttackSpec", "Behaviour", "SideKnowledge", "ThreatModel", "threat_models_dir"]
