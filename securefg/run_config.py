"""What one run is (:class:`RunConfig`) and the names it may use, without importing torch.

Why a module of its own: ``securefg run`` checks its arguments before it imports torch and PyG
(several seconds), so a wrong flag, method, partition or dataset is answered at once. Everything
here is plain Python; :mod:`securefg.experiment` re-exports :class:`RunConfig` and builds the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from securefg.errors import ConfigError

#: Node partitions (``--partition``) with their paper defaults; :mod:`securefg.experiment_data`
#: maps each to its partitioner, split and preprocessing.
NODE_PARTITIONS: tuple[str, ...] = ("metis", "metis_overlap", "louvain", "random", "kmeans")
#: Graph partitions (graph classification datasets).
GRAPH_PARTITIONS: tuple[str, ...] = ("single", "dirichlet", "across_dataset", "across_domain")
#: ``--dataset`` presets of several graph datasets (the CeFGC paper's multi-dataset settings).
PRESETS: dict[str, list[str]] = {
    "protein": ["ENZYMES", "PROTEINS"],
    "social": ["IMDB-BINARY", "IMDB-MULTI"],
    "mix": ["MUTAG", "ENZYMES", "IMDB-BINARY", "IMDB-MULTI"],
}
#: Built-in synthetic datasets (no files): a contextual SBM and a graph-classification set.
SYNTHETIC_NODE: frozenset[str] = frozenset({"csbm", "synthetic-node"})
SYNTHETIC_GRAPH: frozenset[str] = frozenset({"synthetic-graphs", "synthetic"})


@dataclass
class RunConfig:
    """Everything that defines a run (the CLI's options).

    ``protocol=None`` means the method's protected default stack (secure by default).
    ``data_seed`` fixes the split and partition apart from the run seed (FED-PUB's protocol
    keeps one data split, seed 1234, and varies only the run seed); ``None`` uses ``seed``.
    ``checkpoint_every=0`` writes no checkpoint at all (``--resume`` then has nothing to resume).
    ``preset=True`` fills the values left unset (``lr``, ``weight_decay``, ``local_epochs``, method
    options) from the method's per-dataset preset file (:mod:`securefg.presets`); ``False`` uses
    the method's built-in defaults only.
    """

    method: str
    dataset: str
    partition: str | None = None
    clients: int = 10
    rounds: int = 100
    protocol: str | None = None
    seed: int = 0
    data_seed: int | None = None
    data_root: str | None = None
    device: str = "auto"
    out: str | None = None
    lr: float | None = None
    weight_decay: float | None = None
    local_epochs: int | None = None
    batch_size: int = 32
    hidden: int = 0
    prox_mu: float = 0.0
    split: tuple[float, float, float] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    checkpoint_every: int = 0
    resume: bool = False
    progress: bool = True
    keep_payloads: bool = False
    preset: bool = True

    def __post_init__(self) -> None:
        """Refuse settings that would run nothing or divide by zero, before any data is loaded."""
        at_least = {"rounds": 1, "clients": 1, "batch_size": 1, "local_epochs": 1, "hidden": 0, "checkpoint_every": 0}
        for name, low in at_least.items():
            value = getattr(self, name)
            if not (value is None and name == "local_epochs") and (not isinstance(value, int) or value < low):
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"lr must be finite and > 0, got {self.lr!r}")
        for name in ("weight_decay", "prox_mu"):
            rate = getattr(self, name)
            if rate is not None and not (math.isfinite(rate) and rate >= 0):
                raise ConfigError(f"{name} must be finite and >= 0, got {rate!r}")


#: RunConfig fields that do not change what a run computes: a checkpoint resumes across them.
NOT_FINGERPRINTED = ("resume", "progress", "out", "device", "data_root", "checkpoint_every")


def run_fingerprint(cfg: RunConfig) -> str:
    """The hash a checkpoint of ``cfg``'s run carries, so only a run of the same configuration
    resumes it. Where the run writes and reads its data, on which device it runs, and how often it
    checkpoints do not count (a cell interrupted on one machine resumes on another)."""
    from dataclasses import asdict

    from securefg.federation.runner import config_fingerprint

    return config_fingerprint({k: v for k, v in asdict(cfg).items() if k not in NOT_FINGERPRINTED})


def default_partition(dataset: str) -> str:
    """The partition a run uses when ``--partition`` is not given: ``metis`` for node datasets,
    ``single`` for graph datasets (:mod:`securefg.experiment_data` applies the same rule)."""
    return "single" if dataset_kind(dataset) == "graph" else "metis"


def resolved_partition(dataset: str, partition: str | None) -> str:
    """``partition`` lower-cased, else :func:`default_partition` (what the run will use)."""
    return partition.lower() if partition else default_partition(dataset)


def dataset_names(dataset: str) -> list[str]:
    """The datasets a ``--dataset`` value names: a preset's members, ``A+B`` parts, or itself."""
    key = dataset.lower()
    if key in PRESETS:
        return list(PRESETS[key])
    return [d for d in dataset.split("+") if d]


def dataset_kind(dataset: str) -> str:
    """``"node"`` or ``"graph"``: the task a ``--dataset`` value names.

    Raises:
        ConfigError: An unknown name (the message lists the catalog, the synthetic sets and the
            presets), or several datasets that are not all graph datasets.
    """
    key = dataset.strip().lower()
    if key in SYNTHETIC_NODE:
        return "node"
    if key in SYNTHETIC_GRAPH:
        return "graph"
    names = dataset_names(dataset)
    kinds = {"graph" if n.lower() in SYNTHETIC_GRAPH else _spec(n).kind for n in names}
    if len(names) > 1 and kinds != {"graph"}:
        raise ConfigError(f"--dataset {dataset!r}: several datasets are for graph classification only, and "
                          f"{[n for n in names if n.lower() not in SYNTHETIC_GRAPH and _spec(n).kind != 'graph']} "
                          "are node datasets")
    return kinds.pop() if kinds else "node"


def _spec(name: str) -> Any:
    from securefg.data.catalog import CATALOG, get_spec

    try:
        return get_spec(name)
    except ConfigError:
        extra = sorted(SYNTHETIC_NODE | SYNTHETIC_GRAPH) + [p.capitalize() for p in PRESETS]
        raise ConfigError(f"Could not resolve dataset {name!r} among choices {list(CATALOG)}, the synthetic sets and "
                          f"presets {extra}, or several graph datasets joined by '+' (ENZYMES+PROTEINS)") from None


def is_synthetic(name: str) -> bool:
    """Whether ``name`` is a built-in synthetic dataset (nothing to load)."""
    return name.lower() in SYNTHETIC_NODE | SYNTHETIC_GRAPH


__all__ = ["GRAPH_PARTITIONS", "NODE_PARTITIONS", "NOT_FINGERPRINTED", "PRESETS", "SYNTHETIC_GRAPH", "SYNTHETIC_NODE",
           "RunConfig", "dataset_kind", "dataset_names", "default_partition", "is_synthetic", "resolved_partition",
           "run_fingerprint"]
