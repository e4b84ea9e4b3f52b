"""FedStruct's method options, validated once into one frozen record.

Hyperparameter defaults are Table 4's Cora column (via
:class:`~securefg.models.fedstruct.FedStructConfig`); the paper's ambiguities (β, dropout,
norm, Hop2Vec init) keep the reference trainer's choices so the method and the trainer agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from securefg.errors import ConfigError
from securefg.methods.fedstruct.boundary import ROW_LAYOUTS
from securefg.models.fedstruct import FedStructConfig
from securefg.models.fedstruct.edge_rr import EdgeRR
from securefg.models.fedstruct.propagation import last_hop_betas

NSFS = ("hop2vec", "node2vec", "degree")
VARIANTS = ("A", "B")

#: Option names and defaults (``securefg run --option KEY=VALUE``; ``--nsf``/``--variant``).
OPTION_DEFAULTS: Mapping[str, Any] = {
    "nsf": "hop2vec",
    "variant": "B",
    "hardened": False,
    "prune_p": 0,
    "abar_rows": "boundary",
    "structure_hops": FedStructConfig.structure_hops,
    "local_hops": FedStructConfig.local_hops,
    "structure_dim": FedStructConfig.structure_dim,
    "lr_structure": FedStructConfig.lr_structure,
    "dropout": FedStructConfig.dropout,
    "input_dropout": FedStructConfig.input_dropout,
    "node2vec_epochs": FedStructConfig.node2vec_epochs,
    "query_budget": 0,
    "edge_dp_epsilon": 0.0,
    "edge_dp_keep": 0.0,
    "edge_dp_seeded": False,
    "edge_dp_local_graph": False,
    "degree_edges": "all",
}


@dataclass(frozen=True)
class FedStructSettings:
    """Everything that shapes one FedStruct run.

    Args:
        nsf (str): ``hop2vec``, ``node2vec`` or ``degree``.
        variant (str): ``A`` (the server holds the global graph) or ``B`` (nobody does).
        hardened (bool): App. L.1 (B only): NSFs never leave their owner; clients receive
            only peer-summed structure embeddings.
        prune_p (int): Algorithm 3 top-p pruning (0 = off; the paper uses 30).
        abar_rows (str): Row layout of Algorithm 3's peer sums: ``boundary`` (the receiver's rows
            with a neighbour in another client, announced to the other clients through
            ``fedstruct/boundary``) or ``all`` (dense ``[n_i, n]``, nothing announced);
            :mod:`securefg.methods.fedstruct.boundary`. Ā is the same either way.
        query_budget (int): Hardened only: an owner refuses a receiver's NSE query after this
            many answers (0 = count but never refuse).
        config (FedStructConfig): Model and optimiser hyperparameters.
        edge_dp (EdgeRR, optional): Edge-level DP by randomized response on the graph every party
            works on (option ``edge_dp_epsilon``; ``edge_dp_keep`` picks an asymmetric response;
            :mod:`securefg.methods.fedstruct.edge_dp`). ``None`` = off.
        edge_dp_seeded (bool): Draw that noise from the run seed (measurements only).
        edge_dp_local_graph (bool): Under edge DP, the feature branch still propagates over the
            client's true intra-edges (its local matrix); Ā and NSFs use the reported graph. θ
            updates and ∇S then depend on true intra-client edges: not covered by the epsilon.
        degree_edges (str): Degree NSFs in variant B count a node's ``all`` edges (intra and
            inter-client, which the owner knows: the default) or its ``intra``-client edges only
            (what a client sees of its own subgraph; a measurement of the paper's Deg row).
    """

    nsf: str
    variant: str
    hardened: bool
    prune_p: int
    query_budget: int
    config: FedStructConfig
    edge_dp: EdgeRR | None = None
    edge_dp_seeded: bool = False
    edge_dp_local_graph: bool = False
    abar_rows: str = "boundary"
    degree_edges: str = "all"

    @property
    def betas(self) -> tuple[float, ...]:
        """β of Ā: ``Â^{L_s}`` only, as the FedStruct code (the paper gives none)."""
        return self.config.betas or last_hop_betas(self.config.structure_hops)

    @property
    def local_betas(self) -> tuple[float, ...]:
        return self.config.local_betas or last_hop_betas(self.config.local_hops)

    @property
    def label(self) -> str:
        """Short name for reports, e.g. ``B-hop2vec-pruned30``."""
        name = f"{self.variant}{'-hardened' if self.hardened else ''}-{self.nsf}"
        return name + (f"-pruned{self.prune_p}" if self.prune_p else "")


def parse_settings(options: Mapping[str, Any], *, lr: float, weight_decay: float) -> FedStructSettings:
    """Validate method options; every problem is reported at once."""
    o = {**OPTION_DEFAULTS, **options}
    problems = []
    nsf = str(o["nsf"]).lower()
    if nsf not in NSFS:
        problems.append(f"nsf must be one of {list(NSFS)}, got {o['nsf']!r}")
    variant = str(o["variant"]).upper()
    if variant not in VARIANTS:
        problems.append(f"variant must be one of {list(VARIANTS)}, got {o['variant']!r}")
    if not isinstance(o["hardened"], bool):
        problems.append(f"hardened must be true or false, got {o['hardened']!r}")
    elif o["hardened"] and variant == "A":
        problems.append("hardened applies to variant B only (App. L.1); variant A has the server hold the graph")
    for key in ("prune_p", "query_budget"):
        if isinstance(o[key], bool) or not isinstance(o[key], int) or o[key] < 0:
            problems.append(f"{key} must be an integer >= 0, got {o[key]!r}")
    if o["prune_p"] and variant == "A":
        problems.append("prune_p applies to Algorithm 3 (variant B); variant A computes Ā centrally")
    for key in ("structure_hops", "local_hops", "structure_dim", "node2vec_epochs"):
        if isinstance(o[key], bool) or not isinstance(o[key], int) or o[key] < 1:
            problems.append(f"{key} must be an integer >= 1, got {o[key]!r}")
    for key in ("dropout", "input_dropout"):
        if not isinstance(o[key], (int, float)) or not 0 <= o[key] < 1:
            problems.append(f"{key} must be in [0, 1), got {o[key]!r}")
    if not isinstance(o["lr_structure"], (int, float)) or not o["lr_structure"] > 0:
        problems.append(f"lr_structure must be > 0, got {o['lr_structure']!r}")
    if o["abar_rows"] not in ROW_LAYOUTS:
        problems.append(f"abar_rows must be one of {list(ROW_LAYOUTS)}, got {o['abar_rows']!r}")
    if o["degree_edges"] not in ("all", "intra"):
        problems.append(f"degree_edges must be 'all' or 'intra', got {o['degree_edges']!r}")
    edge_dp = _edge_dp(o, variant, nsf, problems)
    for key in ("edge_dp_seeded", "edge_dp_local_graph"):
        if not isinstance(o[key], bool):
            problems.append(f"{key} must be true or false, got {o[key]!r}")
    if problems:
        raise ConfigError("invalid fedstruct options:\n" + "\n".join(f"- {p}" for p in problems))
    config = FedStructConfig(
        lr=float(lr), lr_structure=float(o["lr_structure"]), weight_decay=float(weight_decay),
        local_hops=int(o["local_hops"]), structure_hops=int(o["structure_hops"]),
        structure_dim=int(o["structure_dim"]), dropout=float(o["dropout"]),
        input_dropout=float(o["input_dropout"]), node2vec_epochs=int(o["node2vec_epochs"]),
    )
    return FedStructSettings(nsf, variant, bool(o["hardened"]), int(o["prune_p"]), int(o["query_budget"]), config,
                             edge_dp, bool(o["edge_dp_seeded"]), bool(o["edge_dp_local_graph"]), str(o["abar_rows"]),
                             str(o["degree_edges"]))


def _edge_dp(o: Mapping[str, Any], variant: str, nsf: str, problems: list[str]) -> EdgeRR | None:
    """The randomized response of ``edge_dp_epsilon`` (0 = off), or ``None``; problems are appended."""
    eps, keep = o["edge_dp_epsilon"], o["edge_dp_keep"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0 or eps == float("inf"):
        problems.append(f"edge_dp_epsilon must be a finite number >= 0 (0 = off), got {eps!r}")
        return None
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 <= keep < 1:
        problems.append(f"edge_dp_keep must be in [0, 1) (0 = symmetric response), got {keep!r}")
        return None
    if not eps:
        return None
    if variant == "A":
        problems.append("edge_dp_epsilon applies to variant B; variant A has the server hold the true graph")
    if nsf == "node2vec":
        problems.append("edge_dp_epsilon does not cover node2vec NSFs (their walks read the true graph); "
                        "use hop2vec or degree")
    try:
        return EdgeRR.for_epsilon(float(eps), float(keep) or None)
    except ConfigError as exc:
        problems.append(f"edge_dp_epsilon/edge_dp_keep: {exc}")
        return None
