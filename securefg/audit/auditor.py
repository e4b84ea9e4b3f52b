"""Run an audit: the method under the audited stack and under plaintext, then every attack on each.

Both runs use the same configuration and seed; only the stack differs. The transcript keeps the
payload bytes of the tags the threat model's attacks read (and metadata of everything else),
so memory stays bounded. Active attacks rerun the method (same stack, same seed) with the
adversarial clients deviating. For CeFGC methods the clients' phase-1 generators are cached in
``<out>/generator_cache`` (the method's own ``generator_cache`` option): phase 1 is offline and
identical across stacks, so reruns reuse it instead of retraining.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path
from typing import Any

from securefg.attacks.harness import AttackHarness, AttackResult
from securefg.audit.disclosures import method_assumptions
from securefg.audit.exit_codes import decide
from securefg.audit.ledger import exposure_ledger
from securefg.audit.protections import protections
from securefg.audit.report import AttackEntry, AuditReport
from securefg.audit.threat_model import ThreatModel

PLAINTEXT = "plaintext"


def payload_globs(tm: ThreatModel, options: Any = None) -> list[str]:
    """Tags (``tag@round`` for one round) whose payloads the runs must keep for the attacks."""
    from securefg.attacks.base import attack_class

    globs: set[str] = set()
    for spec in tm.attacks:
        acls = attack_class(spec.attack)
        globs.update(acls.payloads({**acls.defaults, **spec.params}, dict(options or {})))
    return sorted(globs)


def prepare(cfg: Any, tm: ThreatModel, out_dir: Path) -> Any:
    """The run configuration of an audit: payloads and own-state views kept for the attacks,
    CeFGC's phase-1 cache."""
    from securefg.attacks.base import attack_class

    options = dict(cfg.options)
    for spec in tm.attacks:
        acls = attack_class(spec.attack)
        options.update(acls.run_options(cfg.method, {**acls.defaults, **spec.params}))
    if cfg.method.startswith("cefgc") and not options.get("generator_cache"):
        options["generator_cache"] = str(out_dir / "generator_cache")
    return replace(cfg, keep_payloads=payload_globs(tm, options) or False, options=options, resume=False, checkpoint_every=0)


def run_summary(result: dict[str, Any]) -> dict[str, Any]:
    metrics = {k: v for k, v in result.get("metrics", {}).items() if k != "per_client" and not isinstance(v, dict)}
    out = {"protocol": result["protocol"], "protocol_source": result.get("protocol_source"), "stack": result.get("stack"),
           "failed_protections": list(result.get("failed_protections", [])), "metrics": metrics,
           "bytes_total": result.get("bytes_total"), "envelopes": result.get("envelopes"),
           "communication_rounds": result.get("communication_rounds"), "wall_seconds": result.get("wall_seconds")}
    if "privacy" in result:
        out["privacy"] = result["privacy"]
    return out


def audit(cfg: Any, tm: ThreatModel, out_dir: Path, *, plaintext: bool = True) -> AuditReport:
    """Run the audit of ``cfg`` under ``tm``; write nothing but the runs' own outputs.

    Args:
        cfg (RunConfig): The run (``protocol=None`` = the method's protected default).
        tm (ThreatModel): Adversary, side knowledge, attacks, budgets.
        out_dir (Path): The audit folder (runs go to ``runs/<stack>/``, derived stacks to ``stacks/``).
        plaintext (bool): Also run and attack the plaintext stack (the comparison column). A
            curve point of a DP knob skips it: its plaintext run is the same at every point.

    Returns:
        AuditReport: Validated; render it with :func:`securefg.audit.render.write_report`.
    """
    import securefg.attacks  # noqa: F401  (registers attacks and the trimmed-mean defence)
    from securefg.experiment import resolve_stack, run_experiment
    from securefg.experiment_data import build_task
    from securefg.methods.base import method_class

    cfg = prepare(cfg, tm, out_dir)
    task, _ = build_task(cfg)
    harness = AttackHarness(tm, seed=cfg.seed, workdir=out_dir / "stacks")
    results: dict[str, list[AttackResult]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    ledgers: dict[str, Any] = {}
    prot: list[dict[str, Any]] = []
    for label, proto in (("protected", cfg.protocol), (PLAINTEXT, PLAINTEXT))[:2 if plaintext else 1]:
        c = replace(cfg, protocol=proto, out=str(out_dir / "runs" / label))
        stack = resolve_stack(c)
        result = run_experiment(c)

        def rerun(method: str | None = None, protocol: str | None = None, _c: Any = c) -> dict[str, Any]:
            return run_experiment(replace(_c, method=method or _c.method, protocol=protocol or _c.protocol,
                                          keep_payloads=False, out=None, progress=False))

        ctx = harness.context(result, task, rerun=rerun, stack=stack)
        results[label] = harness.run(ctx)
        fed = result["_federation"]
        # who reads comes from the stack's exposure declarations, per the method's exchange kinds
        ledgers[label] = exposure_ledger(fed.transcript, stack=fed.stack, kinds=method_class(cfg.method).TAGS)
        summaries[label] = run_summary(result)
        if label == "protected":
            prot = protections(stack, sorted({r.tag for r in fed.transcript}), cfg.method)
            summaries["_description"] = {"stack_description": stack.description}
        del result, fed, ctx
        gc.collect()
    entries = merge(results["protected"], results.get(PLAINTEXT, []), tm)
    if not plaintext:
        summaries[PLAINTEXT] = {"protocol": None, "metrics": {}}
        ledgers[PLAINTEXT] = ()
    run = {
        "method": cfg.method, "dataset": cfg.dataset, "partition": cfg.partition, "clients": cfg.clients,
        "rounds": cfg.rounds, "seed": cfg.seed, "protocol": summaries["protected"]["protocol"],
        "plaintext_protocol": summaries[PLAINTEXT]["protocol"], "options": dict(cfg.options),
        "protected_run": summaries["protected"], "plaintext_run": summaries[PLAINTEXT],
        "stack_description": summaries["_description"]["stack_description"],
        "stack": summaries["protected"]["stack"],
        "failed_protections": summaries["protected"]["failed_protections"],
    }
    code = decide(exceeded=any(e.passed is False for e in entries), errors=any(e.status == "error" for e in entries),
                  ran=any(e.status == "ran" for e in entries))
    assumptions = (*tm.assumptions, *method_assumptions(cfg.method), *STANDARD_ASSUMPTIONS,
                   *tm.secure_sum_defences(prot))
    return AuditReport(threat_model=tm.to_dict(), run=run, ledger=ledgers["protected"], plaintext_ledger=ledgers[PLAINTEXT],
                       attacks=tuple(entries), protections=tuple(prot), assumptions=assumptions, exit_code=int(code))


STANDARD_ASSUMPTIONS = (
    "Channels are authenticated; an adversary reads only envelopes addressed to it and what it sent.",
    ("The server never holds a CKKS secret key and does not collude with a key holder (keyholder party or "
    "key-holding client); with that collusion every CKKS upload is readable."),
    ("Secure sums assume fewer colluding clients than the threshold; K-1 colluding clients and the server "
    "learn the remaining client's input from any sum."),
    ("Side knowledge is exactly what the threat model grants; the attacks' numbers are lower bounds on what "
    "a stronger adversary (more data, more compute) could do."),
)


def merge(protected: list[AttackResult], plaintext: list[AttackResult], tm: ThreatModel) -> list[AttackEntry]:
    """One entry per attack: the audited stack's outcome, with the plaintext outcome beside it."""
    from securefg.attacks.base import attack_class

    plain = {r.key: r for r in plaintext}
    out = []
    for r in protected:
        p = plain.get(r.key)
        acls = attack_class(r.attack)
        o, po = r.outcome, (p.outcome if p is not None else None)
        roc = {}
        if o is not None and o.roc:
            roc["protected"] = list(o.roc)
        if po is not None and po.roc:
            roc[PLAINTEXT] = list(po.roc)
        value = None if o is None else float(o.value)
        chance = None if o is None else float(o.chance)
        baseline = r.baseline if r.baseline is not None else (p.baseline if p is not None else None)
        out.append(AttackEntry(
            key=r.key, attack=r.attack, metric=r.metric, metric_doc=acls.metric_doc, budget=r.budget, status=r.status,
            value=value, plaintext_status=p.status if p is not None else "skipped",
            plaintext_value=None if po is None else float(po.value),
            chance=chance, baseline=baseline,
            passed=AttackEntry.verdict(value, r.budget, baseline=baseline, chance=chance) if r.status == "ran" else None,
            reason=r.reason or (p.reason if p is not None and p.status != "ran" else ""),
            note=o.note if o is not None else "", details=dict(o.details) if o is not None else {},
            plaintext_details=dict(po.details) if po is not None else {}, roc=roc,
            seconds=r.seconds + (p.seconds if p is not None else 0.0),
        ))
    return out


__all__ = ["audit", "merge", "payload_globs", "prepare", "run_summary"]
