"""The orchestrator: run a threat model's attacks on one finished run (PyG ``Explainer`` shaped).

:class:`AttackHarness` turns a run (its transcript and parties), the task (ground truth) and a
:class:`~securefg.audit.threat_model.ThreatModel` into one :class:`AttackResult` per attack:
it builds the adversary's view and side knowledge, asks every attack whether it ``supports``
the run, plays it, and catches failures (an attack error is reported, never hidden).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from securefg.attacks.base import (
    AdversaryContext,
    AttackOutcome,
    AuditContext,
    GroundTruth,
    Knowledge,
    PublicRun,
    Rerun,
    attack_class,
)
from securefg.attacks.view import AdversaryView
from securefg.errors import ConfigError


@dataclass(frozen=True)
class AttackResult:
    """One attack of a threat model on one run.

    Args:
        key (str): The threat model's table name.
        attack (str): Registered attack name.
        metric (str): Primary metric name.
        budget (float, optional): Upper bound from the threat model.
        status (str): ``"ran"``, ``"skipped"`` (not applicable, with ``reason``) or ``"error"``.
        outcome (AttackOutcome, optional): What it achieved (``"ran"`` only).
        reason (str): Why it was skipped or failed.
        seconds (float): Wall time.
        baseline (float, optional): The metric from the side knowledge alone (``"ran"`` only):
            :meth:`~securefg.attacks.base.Attack.run_baseline`, which sees no message of the run.
    """

    key: str
    attack: str
    metric: str
    budget: float | None
    status: str
    outcome: AttackOutcome | None = None
    reason: str = ""
    seconds: float = 0.0
    baseline: float | None = None


def split_heldout(graphs: list[Any], share: float, seed: int) -> tuple[list[Any], list[Any]]:
    """Deterministically split held-out graphs into (adversary's auxiliary, challenge non-members)."""
    perm = torch.randperm(len(graphs), generator=torch.Generator().manual_seed(seed * 104729 + 3)).tolist()
    k = round(share * len(graphs))
    return [graphs[i] for i in perm[:k]], [graphs[i] for i in perm[k:]]


class AttackHarness:
    """Run a threat model's attacks.

    Args:
        threat_model (ThreatModel): Adversary, side knowledge, attacks and budgets.
        seed (int): Seed of challenges and auxiliary splits. (default: ``0``)
        workdir (Path, optional): Where active attacks may write derived stacks.
    """

    def __init__(self, threat_model: Any, *, seed: int = 0, workdir: Path | None = None) -> None:
        self.threat_model = threat_model
        self.seed = seed
        self.workdir = workdir

    def context(self, result: Mapping[str, Any], task: Any, *, rerun: Rerun | None = None, stack: Any = None) -> AuditContext:
        """Build the adversary's and the auditor's contexts for a finished run.

        Raises:
            ConfigError: The threat model names a party the run does not have.
        """
        fed = result["_federation"]
        tm = self.threat_model
        missing = [p for p in tm.adversary.parties if p not in fed.parties]
        if missing:
            raise ConfigError(f"threat model {tm.name!r} names {missing}, which this run does not have "
                              f"(parties: {sorted(fed.parties)}); raise --clients or edit {tm.source}")
        clients = tuple(fed.client_ids)
        cfg = dict(result.get("config", {}))
        kind = getattr(task, "kind", "node")
        run = PublicRun(method=str(result["method"]), clients=clients, protocol=str(result["protocol"]), task=kind,
                        num_classes=int(task.num_classes), num_features=int(task.num_features),
                        options=dict(cfg.get("options", {})), config=cfg, session=fed.transport.session, stack=stack)
        targets = [c for c in clients if c not in tm.adversary.parties]
        features: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        if tm.side_knowledge.target_features and kind == "node":
            for c in targets:
                d = task.clients[clients.index(c)]
                gid = d.global_id if hasattr(d, "global_id") else torch.arange(d.num_nodes)
                features[c] = (gid, d.x)
        aux: list[Any] = []
        heldout: list[Any] = list(getattr(task, "global_test", []) or [])
        if kind == "graph":
            aux, heldout = split_heldout(heldout, tm.side_knowledge.aux_graphs, self.seed)
        view = AdversaryView(fed.transcript, tm.adversary.parties, fed.parties)
        adv = AdversaryContext(view=view, knowledge=Knowledge(features, aux), run=run, parties=tm.adversary.parties,
                               malicious=tm.adversary.behaviour.value == "malicious")
        truth = GroundTruth(task=task, clients=clients, heldout_graphs=heldout,
                            result={k: v for k, v in result.items() if not k.startswith("_")}, parties=fed.parties)
        return AuditContext(adversary=adv, truth=truth, seed=self.seed, rerun=rerun, stack=stack, workdir=self.workdir)

    def run(self, ctx: AuditContext, *, keys: list[str] | None = None) -> list[AttackResult]:
        """Play every attack (or those in ``keys``) and collect the results."""
        out = []
        for spec in self.threat_model.attacks:
            if keys is not None and spec.key not in keys:
                continue
            t0 = time.perf_counter()
            attack = attack_class(spec.attack)(**spec.params)
            sup = attack.supports(ctx.adversary)
            if not sup:
                out.append(AttackResult(spec.key, spec.attack, spec.metric, spec.budget, "skipped", reason=sup.reason))
                continue
            try:
                outcome = attack.run(ctx)
            except Exception as exc:  # noqa: BLE001 - reported as an attack error, with the traceback tail
                tb = traceback.format_exc(limit=4).strip().splitlines()[-3:]
                out.append(AttackResult(spec.key, spec.attack, spec.metric, spec.budget, "error",
                                        reason=f"{type(exc).__name__}: {exc} | {' / '.join(tb)}",
                                        seconds=time.perf_counter() - t0))
                continue
            try:
                baseline = attack.run_baseline(ctx)
            except Exception as exc:  # noqa: BLE001 - reported as an attack error
                out.append(AttackResult(spec.key, spec.attack, spec.metric, spec.budget, "error",
                                        reason=f"side-knowledge baseline failed: {type(exc).__name__}: {exc}",
                                        seconds=time.perf_counter() - t0))
                continue
            out.append(AttackResult(spec.key, spec.attack, spec.metric, spec.budget_for(outcome.chance), "ran", outcome,
                                    seconds=time.perf_counter() - t0, baseline=baseline))
        return out


__all__ = ["AttackHarness", "AttackResult", "split_heldout"]
