"""CeFGC's generative phases, run by each client on its own data: no communication here.

* Phase 1 (:func:`train_generators`, offline): CeFGC trains one EDP-GNN per class it holds,
  CeFGC* one label-conditioned EDP-GNN. Graphs above ``max_node_num`` are left out of the
  generator's training (cefgc.md §6.1 item 14) but stay in the classifier's. The *sender* then
  sets its Langevin settings (:func:`set_sampling`), optionally picking its step ratio by
  degree + clustering MMD against its own training graphs (EDP-GNN's validation search, which a
  receiver cannot run), and ships the choice (§6.1 item 13). The two steps are separate so
  that trained models can be cached and re-used under other sampling settings.
  Next to every model the sender fits its node-feature table (:func:`fit_feature_tables`,
  :mod:`.node_features`) on all its training graphs, large ones included.
* Phase 3 (:func:`synthesize`): a client samples graphs from every received model, draws
  their node features from the model's feature table (§6.1 item 2, decision (b) per degree)
  and gives them the label of the generating model/class; by default as many synthetic graphs
  as local ones, split evenly over the received (model, class) pairs (§6.1 item 6).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch_geometric.data import Data

from securefg.errors import InvalidInputError
from securefg.methods.cefgc.dp_plan import plan_slot_noise
from securefg.methods.cefgc.node_features import NodeFeatureTable
from securefg.methods.cefgc.package import Architecture, Generator
from securefg.models.graph_score import GraphDiffusionModel, LangevinParams
from securefg.models.graph_score.dp_training import train_dp_generator
from securefg.models.graph_score.tuning import select_sampling_params

#: The sender tries its default step ratio times these factors (alpha_l = r * sigma_l^2).
STEP_RATIO_FACTORS = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class DPSettings:
    """Graph-level DP of phase 1 (the ``dp_*`` options; :mod:`.dp_plan`).

    Args:
        epsilon (float): Target epsilon per client (every slot spends at most this).
        delta (float): Target delta. (default: ``1e-5``)
        max_grad_norm (float): DP-SGD per-graph clip. (default: ``1.0``)
    """

    epsilon: float
    delta: float = 1e-5
    max_grad_norm: float = 1.0


@dataclass
class PhaseOneReport:
    """What one client's phase 1 did (kept in its own state; reported by the experimenter)."""

    models: dict[int, dict[str, Any]] = field(default_factory=dict)
    train_seconds: float = 0.0


def _label(g: Data) -> int:
    return int(g.y.view(-1)[0])


def train_generators(
    graphs: Sequence[Data],
    arch: Architecture,
    *,
    init_seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    patience: int | None,
    generator: torch.Generator,
    device: torch.device,
    dp: DPSettings | None = None,
) -> tuple[dict[int, GraphDiffusionModel], PhaseOneReport]:
    """Train a client's generator(s) on its local training graphs (sampling settings: :func:`set_sampling`).

    With ``dp`` every slot is trained by DP-SGD with a noisy size histogram, its noise planned
    for ``dp.epsilon`` (:func:`~.dp_plan.plan_slot_noise`); the plan lands in the report
    (``models[slot]["dp"]``) and its ``table_sigma`` is what :func:`fit_feature_tables` must use.

    Args:
        graphs (Sequence[Data]): The client's training graphs (labels in the global space).
        arch (Architecture): The agreed architecture (CeFGC or CeFGC*).
        init_seed (int): Shared initialisation seed (CeFGC+ averages models, §6.1 item 10).
        epochs (int): Maximum epochs per model.
        batch_size (int): Graphs per step.
        lr (float): Adam learning rate.
        patience (int, optional): Early stopping on the training loss.
        generator (torch.Generator): The client's own randomness.
        device (torch.device): Where to train.
        dp (DPSettings, optional): Graph-level DP; ``None`` trains without noise. (default: ``None``)

    Returns:
        ({slot: model}, report): slot = class (CeFGC) or 0 (CeFGC*).
    """
    report = PhaseOneReport()
    models: dict[int, GraphDiffusionModel] = {}
    for slot, members in sorted(training_sets(graphs, arch).items()):
        if not members:
            continue
        model = arch.new_model(class_label=slot, init_seed=init_seed)
        labels = [_label(g) for g in members] if arch.conditional else None
        excluded = sum(1 for g in graphs if (arch.conditional or _label(g) == slot) and int(g.num_nodes) > arch.max_node_num)
        t0 = time.perf_counter()
        if dp is None:
            fit = model.fit(members, labels, epochs=epochs, batch_size=batch_size, lr=lr, generator=generator,
                            device=device, patience=patience)
            info: dict[str, Any] = {"graphs": fit.num_graphs, "excluded_over_cap": excluded, "epochs": len(fit.losses),
                                    "final_loss": fit.losses[-1], "seconds": fit.seconds}
        else:  # DP-SGD runs its planned steps: early stopping on the loss would read the data unaccounted
            noise = plan_slot_noise(epsilon=dp.epsilon, delta=dp.delta, num_graphs=len(members),
                                    batch_size=batch_size, epochs=epochs)
            dfit = train_dp_generator(model, members, labels, epochs=epochs, lr=lr, batch_size=batch_size,
                                      noise_multiplier=noise.noise_multiplier, max_grad_norm=dp.max_grad_norm,
                                      histogram_sigma=noise.histogram_sigma, delta=dp.delta, generator=generator,
                                      device=device)
            if dfit.steps != noise.steps:
                raise AssertionError(f"DP-SGD ran {dfit.steps} steps, the plan accounted {noise.steps}")
            info = {"graphs": len(members), "excluded_over_cap": excluded, "dp": noise.to_dict(),
                    "seconds": time.perf_counter() - t0}
        report.train_seconds += time.perf_counter() - t0
        models[slot] = model
        report.models[slot] = info
    return models, report


def training_sets(graphs: Sequence[Data], arch: Architecture) -> dict[int, list[Data]]:
    """Each generator slot's training graphs: per class (CeFGC) or all (CeFGC*, slot 0), capped."""
    small = [g for g in graphs if int(g.num_nodes) <= arch.max_node_num]
    if arch.conditional:
        return {0: small}
    groups: dict[int, list[Data]] = {}
    for g in small:
        groups.setdefault(_label(g), []).append(g)
    return groups


def set_sampling(
    models: dict[int, GraphDiffusionModel],
    graphs: Sequence[Data],
    arch: Architecture,
    *,
    sampling: LangevinParams,
    tune: bool,
    tune_samples: int,
    generator: torch.Generator,
    device: torch.device,
) -> tuple[dict[int, dict[str, Any]], float]:
    """The sender's Langevin settings for each trained model: ``sampling``, or with ``tune`` the
    step ratio its own training graphs prefer (:func:`choose_sampling`).

    Returns:
        ({slot: {"sampling": [steps, ratio, noise], "tuning": {...}}}, seconds spent tuning).
    """
    sets = training_sets(graphs, arch)
    out: dict[int, dict[str, Any]] = {}
    seconds = 0.0
    for slot, model in sorted(models.items()):
        info: dict[str, Any] = {}
        model.sampling = sampling
        if tune:
            members = sets.get(slot, [])
            labels = [_label(g) for g in members] if arch.conditional else None
            t0 = time.perf_counter()
            model.sampling, info["tuning"] = choose_sampling(model, members, labels, sampling=sampling,
                                                             samples=tune_samples, generator=generator, device=device)
            seconds += time.perf_counter() - t0
        info["sampling"] = [model.sampling.steps_per_level, model.sampling.step_ratio, model.sampling.noise_factor]
        out[slot] = info
    return out, seconds


def fit_feature_tables(graphs: Sequence[Data], arch: Architecture, *, noise_std: dict[int, float] | None = None,
                       generator: torch.Generator | None = None) -> dict[int, NodeFeatureTable]:
    """The sender's node-feature table per slot (rows = classes for CeFGC*, one row per class model).

    ``noise_std`` (graph-level DP): the noise of each slot's table (a slot not listed gets the
    largest listed one); ``None`` fits exact tables.
    """
    if not arch.feature_width:
        return {}
    shape = {"max_degree": arch.max_node_num - 1, "width": arch.feature_width, "edges": arch.feature_edges}
    default = max(noise_std.values(), default=0.0) if noise_std else 0.0

    def noise(slot: int) -> dict[str, Any]:
        return {"noise_std": (noise_std or {}).get(slot, default), "generator": generator}

    if arch.conditional:
        return {0: NodeFeatureTable.fit(graphs, [_label(g) for g in graphs], num_rows=arch.num_classes, **shape, **noise(0))}
    by_class: dict[int, list[Data]] = {}
    for g in graphs:
        by_class.setdefault(_label(g), []).append(g)
    return {c: NodeFeatureTable.fit(gs, [0] * len(gs), num_rows=1, **shape, **noise(c)) for c, gs in sorted(by_class.items())}


def choose_sampling(
    model: GraphDiffusionModel,
    graphs: Sequence[Data],
    labels: Sequence[int] | None,
    *,
    sampling: LangevinParams,
    samples: int,
    generator: torch.Generator,
    device: torch.device,
) -> tuple[LangevinParams, dict[str, float]]:
    """The sender's step-ratio choice (graph_score's ``select_sampling_params``: degree +
    clustering MMD + connectivity gap against its own training graphs), noise factor fixed."""
    ratios = sorted({sampling.step_ratio * f for f in STEP_RATIO_FACTORS})
    trials = select_sampling_params(model, list(graphs), labels, step_ratios=ratios, noise_factors=(sampling.noise_factor,),
                                    num_samples=samples, generator=generator, device=device, apply=False)
    return trials[0].params, {f"{t.params.step_ratio:g}": float(t.score) for t in trials}


def allocation(units: int, total: int) -> list[int]:
    """``total`` graphs split as evenly as possible over ``units`` (earlier units get the extra)."""
    if units <= 0:
        return []
    base, extra = divmod(max(total, 0), units)
    return [base + (1 if i < extra else 0) for i in range(units)]


def sampling_units(generators: Sequence[Generator]) -> list[tuple[int, Generator, int | None, int, int]]:
    """``(model position, generator, condition, label, table row)`` of every sampling unit: one per
    CeFGC model, one per class with a non-empty size distribution for a CeFGC* model."""
    units: list[tuple[int, Generator, int | None, int, int]] = []
    for i, g in enumerate(generators):
        m = g.model
        if m.num_classes is None:
            units.append((i, g, None, -1 if m.class_label is None else m.class_label, 0))
        else:
            units.extend((i, g, k, k, k) for k in range(m.num_classes) if int(m.node_count_hist[k].sum()) > 0)
    return units


def synthesize(
    generators: Sequence[Generator],
    *,
    total: int,
    seed: int,
    device: torch.device,
) -> tuple[list[Data], list[dict[str, int]]]:
    """Sample ``total`` labelled graphs from received generators (already in canonical order).

    Units are (model, class) pairs: one per CeFGC model, one per class with a non-empty size
    distribution for a CeFGC* model. Unit ``u`` is sampled with its own generator seeded by
    ``(seed, u)``, so the draws do not depend on the relay's shuffle.

    Raises:
        InvalidInputError: a generator has no node-feature table.

    Returns:
        (graphs with node features from the generator's table, one ``{"class", "graphs", "model"}``
        record per unit; ``model``: the generator's position in ``generators``).
    """
    units = sampling_units(generators)
    out: list[Data] = []
    records = []
    for u, ((i, g, cond, label, row), count) in enumerate(zip(units, allocation(len(units), total), strict=True)):
        records.append({"class": label, "graphs": count, "model": i})
        if count == 0:
            continue
        if g.features is None:
            raise InvalidInputError("a received generator has no node-feature table; the sender must ship one")
        gen = torch.Generator().manual_seed(seed * 1_000_003 + u)
        drawn = g.model.sample(count, labels=cond, generator=gen, device=device)
        out.extend(g.features.featurize(drawn, [row] * len(drawn), generator=gen))
    return out, records


__all__ = ["DPSettings", "PhaseOneReport", "allocation", "choose_sampling", "fit_feature_tables", "sampling_units", "set_sampling",
           "synthesize", "train_generators", "training_sets"]
