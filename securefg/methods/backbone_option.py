"""The ``backbone`` option of the node baselines: the GCN of FED-PUB's tables or FedSage's GraphSage.

Why: each paper runs its baselines on its own backbone. The FedSage table's LocSage and GlobSage
are ``local`` and ``centralized`` with GraphSage; FED-PUB's table runs FedSage+ with a GCN. One
option on every baseline keeps those rows the same code as the methods' own runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from securefg.errors import ConfigError
from securefg.methods.neighbour_sampling import parse_fanouts
from securefg.methods.training import ProxFn, train_node_epochs, train_node_sampled_epochs

BACKBONES = ("gcn", "sage")
#: Options a method gains with the backbone choice (``layers`` and ``dropout`` shape GraphSage
#: only: the GCN is the fixed 2-layer model of :class:`securefg.models.gcn.GCN`; ``fanouts``
#: turns full-batch local epochs into GraphSage's sampled mini-batches of ``batch_nodes`` nodes).
BACKBONE_OPTIONS: Mapping[str, Any] = {"backbone": "gcn", "layers": 2, "dropout": 0.5, "fanouts": "", "batch_nodes": 64}
#: What the two sampling options do, for ``--list-options`` of every method that has them (one text,
#: where ``backbone``/``layers``/``dropout`` are worded per method in its docstring).
SAMPLING_OPTION_HELP: Mapping[str, str] = {
    "fanouts": ('Node tasks: "" trains full-batch epochs (one step each); "5,5" (one count per layer) trains '
                "GraphSage's mini-batches instead: each epoch the training nodes in shuffled batches of "
                "batch_nodes, one step per batch on up to that many sampled neighbours per hop (the FedSage "
                "paper's owners: 5 + 5)."),
    "batch_nodes": "Training nodes per mini-batch with fanouts (the FedSage paper: 64).",
}
#: The GCN's fixed depth (what ``fanouts`` must match when the backbone is the GCN).
GCN_LAYERS = 2


def check_backbone_options(method: str, options: dict[str, Any], *, node_task: bool) -> None:
    """Normalise ``layers``/``dropout``/``fanouts``/``batch_nodes`` in place and refuse values that build
    no model.

    Raises:
        ConfigError: An unknown backbone, ``layers < 1``, dropout outside ``[0, 1)``, GraphSage
            asked for a graph-classification task (whose backbone is GIN), or ``fanouts`` that
            are not one positive count per layer, or ``batch_nodes < 1``.
    """
    if options["backbone"] not in BACKBONES:
        raise ConfigError(f"{method}: backbone must be one of {list(BACKBONES)}, got {options['backbone']!r}")
    try:
        options["layers"], options["dropout"] = int(options["layers"]), float(options["dropout"])
    except (TypeError, ValueError):
        raise ConfigError(f"{method}: layers/dropout must be numbers, got {options['layers']!r}, "
                          f"{options['dropout']!r}") from None
    if options["layers"] < 1 or not 0.0 <= options["dropout"] < 1.0:
        raise ConfigError(f"{method}: needs layers >= 1 and 0 <= dropout < 1, got {options['layers']}, "
                          f"{options['dropout']}")
    if not node_task and options["backbone"] != "gcn":
        raise ConfigError(f"{method}: backbone={options['backbone']!r} is for node tasks; graph tasks use GIN")
    depth = options["layers"] if options["backbone"] == "sage" else GCN_LAYERS
    try:
        options["fanouts"] = parse_fanouts(options.get("fanouts", ""), depth)
    except ConfigError as err:
        raise ConfigError(f"{method}: {err}") from None
    if options["fanouts"] and not node_task:
        raise ConfigError(f"{method}: fanouts samples node neighbourhoods; graph tasks train on whole graphs")
    try:
        options["batch_nodes"] = int(options.get("batch_nodes", 64))
    except (TypeError, ValueError):
        raise ConfigError(f"{method}: batch_nodes must be an integer, got {options['batch_nodes']!r}") from None
    if options["batch_nodes"] < 1:
        raise ConfigError(f"{method}: batch_nodes must be >= 1, got {options['batch_nodes']}")


def node_backbone(options: Mapping[str, Any], *, in_channels: int, classes: int, hidden: int, seed: int) -> nn.Module:
    """The chosen node model, seeded so every party builds the same initial weights.

    ``hidden=0`` takes each backbone's default width (GCN 128, as FED-PUB; GraphSage 64, as FedSage).
    """
    torch.manual_seed(seed)
    if options["backbone"] == "gcn":
        from securefg.models.gcn import GCN

        return GCN(in_channels, classes, hidden_channels=hidden or 128)
    # PyG's GraphSAGE, reading a large sparse feature matrix (Coauthor-CS) as sparse
    from securefg.models.sage import GraphSage

    return GraphSage(in_channels, hidden or 64, int(options["layers"]), classes, dropout=float(options["dropout"]))


def train_node_backbone(options: Mapping[str, Any], model: nn.Module, optimizer: torch.optim.Optimizer, data: Any,
                        epochs: int, *, generator: torch.Generator, prox: ProxFn | None = None) -> float:
    """One party's local node training as its options ask: full-batch epochs, or with ``fanouts``
    GraphSage's sampled mini-batches of ``batch_nodes`` training nodes (the FedSage paper's owners)."""
    fanouts = options.get("fanouts") or ()
    if fanouts:
        return train_node_sampled_epochs(model, optimizer, data, epochs, batch_size=int(options["batch_nodes"]),
                                         fanouts=fanouts, generator=generator, prox=prox)
    return train_node_epochs(model, optimizer, data, epochs, prox)


__all__ = ["BACKBONES", "BACKBONE_OPTIONS", "SAMPLING_OPTION_HELP", "check_backbone_options", "node_backbone", "train_node_backbone"]

