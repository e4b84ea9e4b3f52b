"""Which audits the matrix runs: every method that exchanges messages x every shipped threat model.

One :class:`MatrixCell` is one ``securefg audit`` (the method's default stack against
plaintext, same seed). The full plan uses each method's documented dataset at a small
configuration (few rounds: the attacks read round-0 and last-round messages, and the accuracy
column is the short run's, not the method's documented score); ``quick`` swaps in the synthetic
datasets and two rounds so the whole matrix runs in the test suite. Robust-option rows keep the
poisoning defences' regressions visible (they were how FedAvg's ``robust=closest`` slipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

THREAT_MODELS = ("curious_server", "curious_clients", "malicious_client")

ROBUST = {"robust": "closest", "robust_k": 2, "robust_norm": 0}
#: Multi-Krum dropping one client in ten: FedStruct-B's ∇S contributions touch different rows of S,
#: so every dropped honest client costs its rows' gradient; one in ten is the threat model's one attacker.
KRUM_ONE_IN_TEN = {"robust": "krum", "robust_trim": 0.1}
ROBUST_ROWS = {"robust=closest": ROBUST, "robust=krum-trim0.1": KRUM_ONE_IN_TEN}


@dataclass(frozen=True)
class MatrixCell:
    """One audit of the matrix.

    Args:
        method (str): ``--method``.
        label (str): The row's name in the page (method and variant).
        threat_model (str): A shipped threat model name.
        run (dict): ``RunConfig`` fields (dataset, partition, clients, rounds, seed, options, ...).
        row (str): ``default`` or the option row's name (``robust=closest``).
    """

    method: str
    label: str
    threat_model: str
    run: dict[str, Any] = field(default_factory=dict)
    row: str = "default"

    @property
    def key(self) -> str:
        """Folder name of the cell (stable across runs: resuming skips a finished cell)."""
        row = "" if self.row == "default" else "__" + self.row.replace("=", "-")
        return f"{self.label.lower().replace(' ', '_').replace('(', '').replace(')', '')}__{self.threat_model}{row}"

    def command(self) -> str:
        """The ``securefg audit`` command line that reproduces this cell alone."""
        r = dict(self.run)
        parts = ["securefg audit", f"--threat-model {self.threat_model}", f"--method {self.method}"]
        for k in ("dataset", "partition", "clients", "rounds", "protocol", "seed", "data_seed", "hidden"):
            if k in r and r[k] is not None:
                parts.append(f"--{k.replace('_', '-')} {r[k]}")
        for k, v in r.get("options", {}).items():
            parts.append(f"--option {k}={str(v).lower() if isinstance(v, bool) else v}")
        return " ".join(parts) + " --out DIR"


@dataclass(frozen=True)
class MethodPlan:
    method: str
    label: str
    run: dict[str, Any]
    robust_rounds: int | None = None  # add the robust option rows (ROBUST_ROWS) for the malicious client
    robust_rows: tuple[str, ...] = ("robust=closest",)
    robust_protocol: str | None = None  # the stack the option rows start from (default: the method's)


FULL: tuple[MethodPlan, ...] = (
    # 100 rounds: from round ~10 to ~55 FedAvg's global model on Cora METIS predicts one class, so
    # a poisoning "accuracy drop" measured there compares constant predictors (docs/robust.md)
    MethodPlan("fedavg", "FedAvg", {"dataset": "Cora", "partition": "metis", "clients": 10, "rounds": 100, "seed": 0},
               # the default stack is multi-Krum already (fedavg_secure_robust); the subgroup rule's row starts
               # from SecAgg+ alone, the stack it makes robust
               robust_rounds=100, robust_protocol="fedavg_secure_sum"),
    MethodPlan("fedpub", "FED-PUB", {"dataset": "Cora", "partition": "metis", "clients": 10, "rounds": 10, "seed": 42,
                                     "data_seed": 1234}),
    MethodPlan("fedsheafhn", "FedSheafHN", {"dataset": "Cora", "partition": "metis", "clients": 10, "rounds": 20,
                                            "seed": 42, "data_seed": 1234}),
    MethodPlan("fedstruct", "FedStruct-B", {"dataset": "Cora", "partition": "random", "clients": 10, "rounds": 20,
                                            "seed": 0, "options": {"nsf": "hop2vec", "variant": "B"}},
               # the default is the norm filter already (fedstruct_secure_robust); the option row is multi-Krum
               # dropping one in ten on θ (masked_robust) and ∇S (blind_robust, still server-blind), from
               # fedstruct_secure, at the default cell's rounds; the subgroup rule's 30-round row is in docs/robust.md
               robust_rounds=20, robust_rows=("robust=krum-trim0.1",), robust_protocol="fedstruct_secure"),
    MethodPlan("fedsage_plus", "FedSage+", {"dataset": "Cora", "partition": "louvain", "clients": 3, "rounds": 10,
                                            "seed": 0}),
    MethodPlan("cefgc", "CeFGC", {"dataset": "MUTAG", "partition": "single", "clients": 3, "seed": 0}),
)

_QUICK_NODE = {"dataset": "csbm", "clients": 3, "rounds": 2, "hidden": 8, "seed": 0}
QUICK: tuple[MethodPlan, ...] = (
    MethodPlan("fedavg", "FedAvg", {**_QUICK_NODE, "partition": "metis"}, robust_rounds=2,
               robust_protocol="fedavg_secure_sum"),
    MethodPlan("fedpub", "FED-PUB", {**_QUICK_NODE, "partition": "metis"}),
    MethodPlan("fedsheafhn", "FedSheafHN", {**_QUICK_NODE, "partition": "metis"}),
    MethodPlan("fedstruct", "FedStruct-B", {**_QUICK_NODE, "partition": "random",
                                            "options": {"nsf": "hop2vec", "variant": "B", "structure_hops": 2}}),
    MethodPlan("fedsage_plus", "FedSage+", {**_QUICK_NODE, "partition": "louvain",
                                            "options": {"gen_local_steps": 10, "gen_fed_steps": 2, "gen_hidden": 32}}),
    MethodPlan("cefgc", "CeFGC", {"dataset": "synthetic-graphs", "partition": "single", "clients": 3, "seed": 0,
                                  "options": {"diffusion_epochs": 2, "diffusion_batch": 8, "langevin_steps": 1,
                                              "gnn_epochs": 2, "max_nodes": 24}}),
)


def cells(plans: tuple[MethodPlan, ...], *, methods: tuple[str, ...] | None = None,
          threat_models: tuple[str, ...] = THREAT_MODELS) -> list[MatrixCell]:
    """The cells of a plan, in page order (method, then threat model, then option rows)."""
    out = []
    for p in plans:
        if methods and p.method not in methods and p.label not in methods:
            continue
        for tm in threat_models:
            out.append(MatrixCell(p.method, p.label, tm, dict(p.run)))
            if tm == "malicious_client" and p.robust_rounds is not None:
                for name in p.robust_rows:
                    run = {**p.run, "rounds": p.robust_rounds, "options": {**p.run.get("options", {}), **ROBUST_ROWS[name]}}
                    if p.robust_protocol:
                        run["protocol"] = p.robust_protocol
                    out.append(MatrixCell(p.method, p.label, tm, run, row=name))
    return out


def with_run(cell: MatrixCell, **changes: Any) -> MatrixCell:
    """The same cell with run fields changed (a curve point's options or stack)."""
    run = dict(cell.run)
    if "options" in changes:
        run["options"] = {**run.get("options", {}), **changes.pop("options")}
    run.update(changes)
    return replace(cell, run=run)


__all__ = ["FULL", "KRUM_ONE_IN_TEN", "QUICK", "ROBUST", "ROBUST_ROWS", "THREAT_MODELS", "MatrixCell", "MethodPlan", "cells", "with_run"]
