"""``report.md`` and the ROC plots: a rendering of an :class:`~securefg.audit.report.AuditReport`.

Order, for a security reviewer: the verdict; the exposure ledger (who read what in the clear);
the attack table (audited stack next to plaintext, chance and budget); one section per attack;
what each mechanism protects and cannot; the assumptions; skipped attacks and why.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from securefg.audit.exit_codes import help_text
from securefg.audit.ledger import LedgerRow, clear_to, compress_parties, opened_by
from securefg.audit.report import AttackEntry, AuditReport
from securefg.audit.stack_notes import failed_cell, stack_lines


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    return str(v)


def _bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def ledger_table(rows: tuple[LedgerRow, ...]) -> list[str]:
    out = [("| tag | read in the clear by | opened (unsealed, decrypted, unmasked) by | of which an aggregate only | "
            "held only protected (form: parties) | senders | envelopes | bytes |"),
           "|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        hidden = {f: [x for x in p if x not in r.opened_by] for f, p in r.protected.items()}
        prot = "; ".join(f"{f}: {compress_parties(p)}" for f, p in hidden.items() if p) or "–"
        opened = compress_parties(r.opened_by) if r.opened_by else "–"
        clear = compress_parties(r.clear_readers) if r.clear_readers else "nobody"
        if r.undeclared:  # a readable envelope the mechanism's declaration does not grant: say so
            clear += f" (**not declared**: {compress_parties(r.undeclared)})"
        agg = compress_parties(r.aggregate_only) if r.aggregate_only else "–"
        out.append(f"| `{r.tag}` | {clear} | {opened} | {agg} | {prot} | "
                   f"{compress_parties(r.senders)} | {r.envelopes} | {_bytes(r.bytes)} |")
    return out


def _opened_tags(rows: tuple[LedgerRow, ...], tags: list[str], parties: list[str]) -> str:
    """``tags`` as code, each marked when ``parties`` read only an aggregate of it."""
    mine = set(parties)
    agg = {r.tag for r in rows if mine & set(r.opened_by) and mine & set(r.opened_by) <= set(r.aggregate_only)}
    return ", ".join(f"`{t}`" + (" (an aggregate only)" if t in agg else "") for t in tags)


def _leak_split(a: AttackEntry) -> list[str]:
    """One sentence: how much of the leak public knowledge gives, how much the protocol adds."""
    if a.baseline is None or a.chance is None or a.value is None:
        return []
    public = max(a.baseline, a.chance) - a.chance
    out = [f"Leak split: public knowledge alone reaches {fmt(a.baseline)} (+{fmt(public)} over chance); the audited "
           f"protocol adds {fmt(a.advantage)} on top"
           + (f" (plaintext would add {fmt(a.plaintext_advantage)})" if a.plaintext_advantage is not None else "") + "."]
    return out


def verdict(a: AttackEntry) -> str:
    if a.status == "skipped":
        return "skipped"
    if a.status == "error":
        return "**error**"
    if a.passed is None:
        return "reported"
    return "pass" if a.passed else "**EXCEEDED**"


def render_markdown(report: AuditReport, plots: dict[str, str] | None = None) -> str:
    tm, run = report.threat_model, report.run
    adv = tm["adversary"]
    plots = plots or {}
    L: list[str] = []
    L.append(f"# securefg audit: {run['method']} on {run['dataset']} against `{tm['name']}`")
    L.append("")
    L.append(f"**Verdict: exit code {report.exit_code}** ({help_text(report.exit_code)}).")
    if report.exceeded:
        L.append("Budgets exceeded: " + ", ".join(f"`{a.key}` ({a.metric} {fmt(a.value)} > {fmt(a.budget)})" for a in report.exceeded) + ".")
    L.append("")
    L.append(f"- Adversary: {' + '.join(adv['parties'])}, {adv['behaviour']}"
             + (" (a colluding coalition)" if len(adv["parties"]) > 1 else ""))
    sk = tm.get("side_knowledge", {})
    know = [k for k, v in (("features of the target clients' nodes (no edges)", sk.get("target_features")),
                           (f"{sk.get('aux_graphs', 0):.0%} of the held-out graphs as public data", sk.get("aux_graphs"))) if v]
    L.append(f"- Side knowledge: {', '.join(know) if know else 'none beyond its view'}")
    L.append(f"- Audited stack: `{run['protocol']}`; baseline: `{run['plaintext_protocol']}` (same seed {run['seed']})")
    L += stack_lines(run)
    L.append(f"- Run: {run.get('clients')} clients, partition {run.get('partition') or 'default'}, {run.get('rounds')} rounds"
             + (f", options {run['options']}" if run.get("options") else ""))
    pm, qm = run.get("protected_run", {}).get("metrics", {}), run.get("plaintext_run", {}).get("metrics", {})
    keys = [k for k in ("test_acc", "test_auc", "final_test", "final_test_auc", "best_round") if k in pm or k in qm]
    if keys:
        L.append("- Utility: " + "; ".join(f"{k} {fmt(pm.get(k))} (plaintext {fmt(qm.get(k))})" for k in keys))
    dp = run.get("protected_run", {}).get("privacy") or {}
    dp_tags = [p["tag"] for p in report.protections if any(t.get("name", "").startswith("dp_") for t in p.get("transforms", []))]
    if dp or dp_tags:
        named = [f"`{t}`" for t in dp_tags] + ([f"`{dp['mechanism']}`"] if dp.get("mechanism") else [])
        L.append(f"- Differential privacy on: {', '.join(named) or 'no tag'}; epsilon "
                 f"{fmt(dp.get('epsilon'))} at delta {fmt(dp.get('delta'), 6)} "
                 + (f"(unit: {dp['unit']}; {dp.get('accountant', 'accountant')})" if dp.get("unit")
                    else "(largest client-level epsilon of the run's accountant)"))
    if tm.get("description"):
        L += ["", f"> {tm['description']}"]
    L += ["", "## 1. Exposure ledger", "",
          (f"From the transcript of the audited run (`{run['protocol']}`) and the exposure each mechanism of the "
           "stack declares: every message tag, who received it in a form they can read (plaintext or an "
           "aggregate), who reads it by opening protected bytes (boxes sealed to them, ciphertexts under keys "
           "they hold, a masked sum they unmask: under a mailbox the server opens every upload, under SecAgg+ "
           "the aggregator reads the sum), which of those read only an aggregate, and who held only masked, "
           "encrypted, sealed or key material. Senders know what they sent."), ""]
    L += ledger_table(report.ledger)
    clear = clear_to(report.ledger, adv["parties"])
    opened = opened_by(report.ledger, adv["parties"])
    L += ["", f"The adversary ({' + '.join(adv['parties'])}) reads in the clear: "
          + (", ".join(f"`{t}`" for t in clear) if clear else "nothing") + "."
          + (f" It opens (unseals, decrypts or unmasks): {_opened_tags(report.ledger, opened, adv['parties'])}."
             if opened else "")]
    plain_clear = clear_to(report.plaintext_ledger, adv["parties"])
    L += [f"Under `{run['plaintext_protocol']}` it would read: " + (", ".join(f"`{t}`" for t in plain_clear) if plain_clear else "nothing") + "."]
    L += ["", "<details><summary>Exposure ledger of the plaintext run</summary>", ""] + ledger_table(report.plaintext_ledger) + ["", "</details>"]

    L += ["", "## 2. Attacks", "",
          ("Higher = the attack did better. *Chance* is an adversary that learned nothing; *baseline* is the same "
          "attack on the adversary's side knowledge alone (no message of the run, e.g. link inference from public "
          "features). The verdict is judged on the *advantage* = value - max(baseline, chance): the budget "
          "`max_<metric> = b` lets the run add at most b - chance over public knowledge."), "",
          (f"| attack | metric | `{run['protocol']}` | `{run['plaintext_protocol']}` | baseline | advantage "
           "(plaintext) | chance | budget (allowed advantage) | verdict |"),
          "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for a in report.attacks:
        allowed = None if a.budget is None or a.chance is None else a.budget - a.chance
        L.append(f"| `{a.key}` | {a.metric} | {fmt(a.value) if a.status == 'ran' else a.status} | "
                 f"{fmt(a.plaintext_value) if a.plaintext_status == 'ran' else a.plaintext_status} | "
                 f"{fmt(a.baseline)} | {fmt(a.advantage)} ({fmt(a.plaintext_advantage)}) | {fmt(a.chance)} | "
                 f"{fmt(a.budget)} ({fmt(allowed)}) | {verdict(a)} |")
    for a in report.attacks:
        L += ["", f"### `{a.key}` ({a.attack})", "", f"*Metric ({a.metric})*: {a.metric_doc}."]
        if a.status != "ran":
            L.append(f"{a.status.capitalize()}: {a.reason}")
            continue
        L.append(f"Audited stack: **{fmt(a.value)}**; plaintext: **{fmt(a.plaintext_value)}**; chance {fmt(a.chance)}; "
                 f"budget {fmt(a.budget)} -> {verdict(a)}.")
        L += _leak_split(a)
        if a.note:
            L.append(f"Note: {a.note}.")
        L += _details(a)
        if a.key in plots:
            L += ["", f"![ROC of {a.key}]({plots[a.key]})"]

    L += ["", "## 3. What each mechanism protects, and what it cannot", "",
          "| tag | mechanism | protects | cannot protect |", "|---|---|---|---|"]
    for p in report.protections:
        tr = "".join(f" + `{t['name']}` ({t['limits']})" for t in p.get("transforms", []))
        L.append(f"| `{p['tag']}` | `{p['mechanism']}`{tr} | {p['protects']} | {p['cannot']}{failed_cell(p)} |")
    released = [p for p in report.protections if p.get("by_design")]
    if released:
        L += ["", (f"Released by design in `{run.get('method')}`: outputs the receiver needs, which no mechanism "
              "can hide (the attack named measures each):"), ""]
        L += [f"- `{p['tag']}`: {p['by_design']}" for p in released]
    if run.get("stack_description"):
        L += ["", "The stack's own statement:", "", "> " + run["stack_description"].strip().replace("\n", "\n> ")]
    L += ["", "## 4. Assumptions", ""] + [f"- {s}" for s in report.assumptions]
    skipped = [a for a in report.attacks if a.status != "ran"]
    if skipped:
        L += ["", "## 5. Not run", ""] + [f"- `{a.key}`: {a.status}: {a.reason}" for a in skipped]
    L += ["", "## Exit codes", ""] + [f"- `{c}`: {help_text(c)}" for c in range(5)]
    return "\n".join(L) + "\n"


def _details(a: AttackEntry) -> list[str]:
    out = []
    def scalars(d: Any) -> dict[str, Any]:
        return {k: (", ".join(map(str, v)) if isinstance(v, list) and all(isinstance(x, str) for x in v) else v)
                for k, v in d.items() if not k.startswith("_")
                and (isinstance(v, (int, float, str, bool)) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))}

    simple, psimple = scalars(a.details), scalars(a.plaintext_details)
    keys = list(dict.fromkeys([*simple, *psimple]))
    if keys:
        out += ["", "| detail | audited | plaintext |", "|---|---:|---:|"]
        out += [f"| {k} | {fmt(simple.get(k))} | {fmt(psimple.get(k))} |" for k in keys]
    for label, details in (("audited stack", a.details), ("plaintext", a.plaintext_details)):
        for k, v in details.items():
            if isinstance(v, list) and v and isinstance(v[0], dict):
                cols = list(dict.fromkeys(c for row in v for c in row))
                out += ["", f"{k} ({label}):", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                out += ["| " + " | ".join(fmt(row.get(c)) for c in cols) + " |" for row in v]
    return out


def plot_rocs(report: AuditReport, out_dir: Path) -> dict[str, str]:
    """One PNG per attack with ROC curves (audited stack and plaintext); returns relative paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    for a in report.attacks:
        if not a.roc:
            continue
        fig, ax = plt.subplots(figsize=(4, 4))
        for label, style in (("protected", "-"), ("plaintext", "--")):
            if label in a.roc and a.roc[label][0]:
                f, t = a.roc[label]
                name = report.run["protocol"] if label == "protected" else report.run["plaintext_protocol"]
                val = a.value if label == "protected" else a.plaintext_value
                ax.plot(f, t, style, label=f"{name} (AUC {fmt(val)})")
        ax.plot([0, 1], [0, 1], ":", color="grey", label="chance")
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title(a.key, fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        name = f"roc_{a.key}.png"
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        out[a.key] = name
    return out


def write_report(report: AuditReport, out_dir: Path) -> None:
    """Write ``audit.json``, ``report.md`` and the ROC plots into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "audit.json").write_text(report.to_json(), encoding="utf-8")
    plots = plot_rocs(report, out_dir)
    (out_dir / "report.md").write_text(render_markdown(report, plots), encoding="utf-8")


__all__ = ["plot_rocs", "render_markdown", "write_report"]
