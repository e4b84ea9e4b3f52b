"""The audit report: a validated dataclass that round-trips through JSON (``audit.json``).

Shaped like Opacus' accountant ``state_dict``/``load_state_dict`` and PyG's
``Explanation.validate``: :meth:`AuditReport.to_json` and :meth:`AuditReport.from_json` are
inverse, and :meth:`AuditReport.validate` (run on construction) checks that every verdict
follows from its value and budget and that the exit code follows from the verdicts, so a report
cannot claim a pass it did not earn. ``report.md`` is a rendering of the same object
(:mod:`securefg.audit.render`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from securefg.audit.exit_codes import AuditExit, decide, help_text
from securefg.audit.ledger import LedgerRow

VERSION = 1
STATUSES = ("ran", "skipped", "error")


@dataclass(frozen=True)
class AttackEntry:
    """One attack: its value on the audited stack and on the plaintext stack, budget and verdict.

    Args:
        key (str): Table name in the threat model.
        attack (str): Registered attack name.
        metric (str): Primary metric (higher = the attack did better).
        metric_doc (str): What the metric measures.
        budget (float, optional): ``max_<metric>`` from the threat model (``None`` = report only).
        status (str): ``ran`` / ``skipped`` / ``error`` on the audited stack.
        value (float, optional): Metric on the audited stack.
        plaintext_status (str): Status on the plaintext stack.
        plaintext_value (float, optional): Metric on the plaintext stack, same seed.
        chance (float, optional): Metric of an adversary that learned nothing.
        passed (bool, optional): ``value <= budget``; ``None`` without a budget or a value.
        reason (str): Why skipped / the error.
        note (str): One sentence from the attack.
        details (dict): Secondary metrics (audited stack).
        plaintext_details (dict): Secondary metrics (plaintext stack).
        roc (dict): ``{"protected": [fpr, tpr], "plaintext": [fpr, tpr]}`` when the metric is an AUC.
        seconds (float): Wall time of both runs of the attack.
        baseline (float, optional): The metric an adversary reaches from its side knowledge alone
            (no message of the run; e.g. link inference from public features). ``None`` in reports
            written before baselines existed: the budget is then judged on the value itself.

    The verdict is judged on the *advantage* over the side-knowledge baseline: the budget
    ``max_<metric> = b`` allows the protocol to add ``b - chance`` over what public knowledge
    gives, ``value - max(baseline, chance) <= b - chance``; with a chance baseline this is
    ``value <= b``.
    """

    key: str
    attack: str
    metric: str
    metric_doc: str = ""
    budget: float | None = None
    status: str = "skipped"
    value: float | None = None
    plaintext_status: str = "skipped"
    plaintext_value: float | None = None
    chance: float | None = None
    passed: bool | None = None
    reason: str = ""
    note: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    plaintext_details: Mapping[str, Any] = field(default_factory=dict)
    roc: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    baseline: float | None = None

    @staticmethod
    def verdict(value: float | None, budget: float | None, *, baseline: float | None = None,
                chance: float | None = None) -> bool | None:
        """``value - max(baseline, chance) <= budget - chance`` (``value <= budget`` without a
        baseline; ``None`` without a budget or a value, or for a NaN value)."""
        if budget is None or value is None or not math.isfinite(value):
            return None
        if baseline is None or chance is None or not math.isfinite(baseline):
            return value <= budget + 1e-12
        return value - max(baseline, chance) <= budget - chance + 1e-12

    @property
    def advantage(self) -> float | None:
        """What the run adds over the side knowledge: ``value - max(baseline, chance)``."""
        if self.value is None or self.baseline is None or self.chance is None:
            return None
        return self.value - max(self.baseline, self.chance)

    @property
    def plaintext_advantage(self) -> float | None:
        if self.plaintext_value is None or self.baseline is None or self.chance is None:
            return None
        return self.plaintext_value - max(self.baseline, self.chance)


@dataclass(frozen=True)
class AuditReport:
    """Everything an audit found, with the stack and threat model that produced it.

    Args:
        threat_model (dict): ``ThreatModel.to_dict()``.
        run (dict): Method, dataset, partition, clients, rounds, seed, both stacks, both runs' metrics.
        ledger (tuple[LedgerRow, ...]): Exposure ledger of the audited run.
        plaintext_ledger (tuple[LedgerRow, ...]): Exposure ledger of the plaintext run.
        attacks (tuple[AttackEntry, ...]): One entry per attack of the threat model.
        protections (tuple[dict, ...]): Per tag: mechanism, what it protects, its limits.
        assumptions (tuple[str, ...]): The threat model's and the stack's assumptions.
        exit_code (int): :class:`~securefg.audit.exit_codes.AuditExit` value.
        version (int): Report format version. (default: ``1``)
    """

    threat_model: Mapping[str, Any]
    run: Mapping[str, Any]
    ledger: tuple[LedgerRow, ...]
    plaintext_ledger: tuple[LedgerRow, ...]
    attacks: tuple[AttackEntry, ...]
    protections: tuple[Mapping[str, Any], ...] = ()
    assumptions: tuple[str, ...] = ()
    exit_code: int = int(AuditExit.SUCCESS)
    version: int = VERSION

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise ``ValueError`` listing every inconsistency."""
        problems = []
        if self.version != VERSION:
            problems.append(f"report version {self.version}, this build reads {VERSION}")
        for k in ("name", "adversary"):
            if k not in self.threat_model:
                problems.append(f"threat_model lacks {k!r}")
        for k in ("method", "dataset", "protocol", "plaintext_protocol", "seed"):
            if k not in self.run:
                problems.append(f"run lacks {k!r}")
        keys = [a.key for a in self.attacks]
        if len(set(keys)) != len(keys):
            problems.append(f"duplicate attack keys {keys}")
        for a in self.attacks:
            if a.status not in STATUSES or a.plaintext_status not in STATUSES:
                problems.append(f"{a.key}: status must be one of {STATUSES}")
            if a.status == "ran" and a.value is None:
                problems.append(f"{a.key}: ran but has no value")
            expected = (AttackEntry.verdict(a.value, a.budget, baseline=a.baseline, chance=a.chance)
                        if a.status == "ran" else None)
            if a.passed != expected:
                problems.append(f"{a.key}: passed={a.passed} but value {a.value} vs budget {a.budget} gives {expected}")
        if self.exit_code != int(self.expected_exit()):
            problems.append(f"exit code {self.exit_code} but the verdicts give {int(self.expected_exit())}")
        if problems:
            raise ValueError("invalid audit report:\n" + "\n".join(f"- {p}" for p in problems))

    def expected_exit(self) -> AuditExit:
        return decide(exceeded=any(a.passed is False for a in self.attacks),
                      errors=any(a.status == "error" for a in self.attacks),
                      ran=any(a.status == "ran" for a in self.attacks))

    @property
    def exceeded(self) -> list[AttackEntry]:
        return [a for a in self.attacks if a.passed is False]

    @property
    def exit_help(self) -> str:
        return help_text(self.exit_code)

    # ------------------------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "exit_code": self.exit_code,
            "exit_help": self.exit_help,
            "threat_model": dict(self.threat_model),
            "run": dict(self.run),
            "ledger": [r.to_dict() for r in self.ledger],
            "plaintext_ledger": [r.to_dict() for r in self.plaintext_ledger],
            "attacks": [{**asdict(a), "advantage": a.advantage, "plaintext_advantage": a.plaintext_advantage}
                        for a in self.attacks],
            "protections": [dict(p) for p in self.protections],
            "assumptions": list(self.assumptions),
        }

    def to_json(self) -> str:
        return json.dumps(_clean(self.to_dict()), indent=2, sort_keys=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AuditReport:
        fields = set(AttackEntry.__dataclass_fields__)
        return cls(
            threat_model=dict(d["threat_model"]), run=dict(d["run"]),
            ledger=tuple(LedgerRow.from_dict(r) for r in d["ledger"]),
            plaintext_ledger=tuple(LedgerRow.from_dict(r) for r in d["plaintext_ledger"]),
            attacks=tuple(AttackEntry(**{k: _num(k, v) for k, v in a.items() if k in fields}) for a in d["attacks"]),
            protections=tuple(d.get("protections", ())), assumptions=tuple(d.get("assumptions", ())),
            exit_code=int(d["exit_code"]), version=int(d.get("version", VERSION)),
        )

    @classmethod
    def from_json(cls, text: str) -> AuditReport:
        return cls.from_dict(json.loads(text, parse_constant=_parse_constant))


def _clean(o: Any) -> Any:
    """JSON-safe: NaN/Inf as strings (JSON has no NaN), tuples as lists, tensors as lists."""
    if isinstance(o, float):
        return o if math.isfinite(o) else str(o)
    if isinstance(o, Mapping):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "tolist"):
        return _clean(o.tolist())
    return o


def _num(key: str, v: Any) -> Any:
    """Numeric fields written as ``"nan"``/``"inf"`` strings come back as floats."""
    if key in ("budget", "value", "plaintext_value", "chance", "seconds", "baseline") and isinstance(v, str):
        return float(v)
    return v


def _parse_constant(c: str) -> float:
    return float(c)


__all__ = ["AttackEntry", "AuditReport"]
