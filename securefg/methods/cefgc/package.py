"""Model packages: how a client's diffusion model(s) cross the relay, and how they come back.

Two wire forms, both plain named tensors through :mod:`securefg.federation.codec` (no pickle):

* **exact** (``sealed_relay``, or any relay without server-side mixing): every model's own
  :meth:`~securefg.models.graph_score.GraphDiffusionModel.to_tensors` under a ``m<k>/`` prefix,
  only for the classes the sender holds. The receiver rebuilds each model with
  ``from_tensors``, which validates every field. Exact, float32 weights.
* **dense** (``ckks_relay``, or CeFGC+ under plaintext mixing): a fixed layout that every client
  shares (public setup, cefgc.md §3 row 0b), so the server can add packages slot by slot:
  for every slot ``s`` (one per global class for CeFGC, one for CeFGC*) ``s<s>/presence``
  (1 if the sender trained this slot), ``s<s>/node_pmf`` (normalised node-count histogram, one
  row per class), ``s<s>/sampling`` (steps, step ratio, noise factor: the sender's choice) and
  ``s<s>/params`` (the flat score-network weights), and on tasks with node features
  ``s<s>/node_features`` (plus ``s<s>/edge_features`` under ``feature_model=pairwise``; see
  :mod:`.node_features`). All floating point, so a pair average
  ``(x_i + x_j) / 2`` is meaningful field by field; the receiver divides by the averaged
  presence, which turns the average into a presence-weighted mean (a class held by only one
  of the pair passes through unmixed).

Both forms carry the node-count histogram and the sampling settings inside the (sealed or
encrypted) package (cefgc.md §6.1 items 1 and 13): a small extra leak to the receivers,
nothing to the server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from securefg.errors import InvalidInputError
from securefg.methods.cefgc.node_features import NodeFeatureTable
from securefg.models.graph_score import EDPScoreConfig, GraphDiffusionModel, LangevinParams
from securefg.models.graph_score.sampler import MAX_STEPS_PER_LEVEL

#: Receivers refuse packages with more models than this (a hostile sender cannot make them loop).
MAX_MODELS = 1024
#: A slot is present when its (averaged) presence flag is at least this (1, 0.5 or 0 in theory).
PRESENCE_THRESHOLD = 0.25
#: Feature-table entries below this are CKKS noise on a zero (real entries are >= 1 / #nodes).
TABLE_NOISE_FLOOR = 1e-6
#: Node-count probabilities are turned back into integer counts at this resolution.
HIST_RESOLUTION = 2**16


@dataclass(frozen=True)
class Architecture:
    """What every client agrees on before round 1 (public; cefgc.md §3 row 0b).

    Args:
        config (EDPScoreConfig): Score-network sizes (``num_conditions`` is derived).
        sigmas (tuple[float, ...]): Noise levels.
        max_node_num (int): Largest graph a generator trains on or draws.
        num_classes (int): Size of the global label space.
        conditional (bool): CeFGC* (one label-conditioned model) instead of one per class.
        feature_width (int): Node-feature categories of the task; every model then ships a
            node-feature table of shape ``(hist_rows, max_node_num, feature_width)`` (synthetic
            degrees are below ``max_node_num``). ``0`` = no tables. (default: ``0``)
        feature_edges (bool): Tables also carry the category pairs at edge ends, shape
            ``(hist_rows, feature_width, feature_width)`` (``feature_model=pairwise``).
            (default: ``False``)
    """

    config: EDPScoreConfig
    sigmas: tuple[float, ...]
    max_node_num: int
    num_classes: int
    conditional: bool
    feature_width: int = 0
    feature_edges: bool = False

    @property
    def slots(self) -> int:
        """Models in a dense package: one per class (CeFGC), or one (CeFGC*)."""
        return 1 if self.conditional else self.num_classes

    @property
    def hist_rows(self) -> int:
        """Rows of a model's node-count histogram."""
        return self.num_classes if self.conditional else 1

    def new_model(self, *, class_label: int | None, init_seed: int | None, sampling: LangevinParams | None = None) -> GraphDiffusionModel:
        """An untrained generator of this architecture."""
        return GraphDiffusionModel(
            config=self.config,
            sigmas=self.sigmas,
            num_classes=self.num_classes if self.conditional else None,
            class_label=None if self.conditional else class_label,
            max_node_num=self.max_node_num,
            sampling=sampling,
            init_seed=init_seed,
        )


@dataclass(frozen=True)
class Generator:
    """One received generator: the score model and (when the task has features) its table."""

    model: GraphDiffusionModel
    features: NodeFeatureTable | None


# ------------------------------------------------------------------------------ exact form
def pack_exact(
    models: Mapping[int, GraphDiffusionModel], tables: Mapping[int, NodeFeatureTable] | None = None
) -> dict[str, torch.Tensor]:
    """Named tensors of every model (``m<slot>/<field>``) and table (``x<slot>/node_features``,
    ``x<slot>/edge_features``), exact."""
    out: dict[str, torch.Tensor] = {}
    for slot, model in sorted(models.items()):
        for name, t in model.to_tensors().items():
            out[f"m{slot}/{name}"] = t
        if tables is not None and slot in tables:
            out[f"x{slot}/node_features"] = tables[slot].probs.clone()  # float64: exact
            if tables[slot].edge_probs is not None:
                out[f"x{slot}/edge_features"] = tables[slot].edge_probs.clone()
    return out


def unpack_exact_generators(tensors: Mapping[str, torch.Tensor]) -> list[Generator]:
    """Rebuild the models (and their feature tables) of an exact package, validating each one.

    Raises:
        InvalidInputError: a malformed prefix, too many models, a table without its model,
            or an invalid model or table.
    """
    groups: dict[int, dict[str, torch.Tensor]] = {}
    table_fields: dict[int, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        prefix, sep, field = name.partition("/")
        if not sep or prefix[:1] not in ("m", "x") or not prefix[1:].isdigit():
            raise InvalidInputError(f"model package field {name!r} has no 'm<k>/' or 'x<k>/' prefix")
        if prefix[0] == "x" and field not in ("node_features", "edge_features"):
            raise InvalidInputError(f"unexpected feature-table field {name!r}")
        (table_fields if prefix[0] == "x" else groups).setdefault(int(prefix[1:]), {})[field] = t
    if not 1 <= len(groups) <= MAX_MODELS:
        raise InvalidInputError(f"a model package holds 1..{MAX_MODELS} models, got {len(groups)}")
    if set(table_fields) - set(groups):
        raise InvalidInputError(f"feature tables {sorted(set(table_fields) - set(groups))} have no model")
    tables = {}
    for k, fields in table_fields.items():
        if "node_features" not in fields:
            raise InvalidInputError(f"x{k}/edge_features comes without x{k}/node_features")
        tables[k] = NodeFeatureTable(fields["node_features"], fields.get("edge_features"))
    return [Generator(GraphDiffusionModel.from_tensors(g), tables.get(k)) for k, g in sorted(groups.items())]


def unpack_exact(tensors: Mapping[str, torch.Tensor]) -> list[GraphDiffusionModel]:
    """The models of an exact package (see :func:`unpack_exact_generators`)."""
    return [g.model for g in unpack_exact_generators(tensors)]


# ------------------------------------------------------------------------------ dense form
def pack_dense(
    models: Mapping[int, GraphDiffusionModel], arch: Architecture, tables: Mapping[int, NodeFeatureTable] | None = None
) -> dict[str, torch.Tensor]:
    """The fixed-layout float package (absent slots are zeros)."""
    if any(not 0 <= s < arch.slots for s in models):
        raise InvalidInputError(f"slots must lie in [0, {arch.slots}), got {sorted(models)}")
    width = arch.max_node_num + 1
    probe = arch.new_model(class_label=0, init_seed=0)
    out: dict[str, torch.Tensor] = {}
    for s in range(arch.slots):
        m = models.get(s)
        if m is None:
            out[f"s{s}/presence"] = torch.zeros(1)
            out[f"s{s}/node_pmf"] = torch.zeros(arch.hist_rows, width)
            out[f"s{s}/sampling"] = torch.zeros(3)
            out[f"s{s}/params"] = torch.zeros(probe.num_parameters)
            if arch.feature_width:
                out[f"s{s}/node_features"] = torch.zeros(_table_shape(arch))
            if arch.feature_edges:
                out[f"s{s}/edge_features"] = torch.zeros(_edge_table_shape(arch))
            continue
        hist = m.node_count_hist.double()
        totals = hist.sum(dim=1, keepdim=True)
        pmf = torch.where(totals > 0, hist / totals.clamp(min=1), torch.zeros_like(hist))
        sp = m.sampling
        out[f"s{s}/presence"] = torch.ones(1)
        out[f"s{s}/node_pmf"] = pmf.float()
        out[f"s{s}/sampling"] = torch.tensor([sp.steps_per_level, sp.step_ratio, sp.noise_factor], dtype=torch.float32)
        out[f"s{s}/params"] = m.flat_parameters()
        if arch.feature_width:
            table = None if tables is None else tables.get(s)
            if table is None or tuple(table.probs.shape) != _table_shape(arch):
                raise InvalidInputError(f"slot {s} needs a node-feature table of shape {_table_shape(arch)}")
            out[f"s{s}/node_features"] = table.probs.float()
            if arch.feature_edges:
                if table.edge_probs is None:
                    raise InvalidInputError(f"slot {s} needs an edge-feature table of shape {_edge_table_shape(arch)}")
                out[f"s{s}/edge_features"] = table.edge_probs.float()
    return out


def _table_shape(arch: Architecture) -> tuple[int, int, int]:
    return (arch.hist_rows, arch.max_node_num, arch.feature_width)


def _edge_table_shape(arch: Architecture) -> tuple[int, int, int]:
    return (arch.hist_rows, arch.feature_width, arch.feature_width)


def dense_params(package: Mapping[str, torch.Tensor], arch: Architecture) -> torch.Tensor:
    """The weights of every slot, concatenated (what CeFGC+ compares by cosine)."""
    return torch.cat([package[f"s{s}/params"].double() for s in range(arch.slots)])


def unpack_dense(package: Mapping[str, torch.Tensor], arch: Architecture) -> list[GraphDiffusionModel]:
    """The models of a dense package (see :func:`unpack_dense_generators`)."""
    return [g.model for g in unpack_dense_generators(package, arch)]


def unpack_dense_generators(package: Mapping[str, torch.Tensor], arch: Architecture) -> list[Generator]:
    """Rebuild the present slots of a (possibly pair-averaged, CKKS-noisy) dense package.

    Each field is divided by the slot's presence, so the average of a present and an absent
    slot is the present model itself, and the average of two present slots is their mean.

    Raises:
        InvalidInputError: a missing field, a wrong shape, or values no sender could produce.
    """
    models: list[Generator] = []
    width = arch.max_node_num + 1
    for s in range(arch.slots):
        try:
            presence = float(package[f"s{s}/presence"].reshape(-1)[0])
            pmf = package[f"s{s}/node_pmf"].double()
            sampling = package[f"s{s}/sampling"].double()
            params = package[f"s{s}/params"].float()
            table = package[f"s{s}/node_features"].double() if arch.feature_width else None
            edge_table = package[f"s{s}/edge_features"].double() if arch.feature_edges else None
        except KeyError as exc:
            raise InvalidInputError(f"dense model package lacks field {exc}") from exc
        if not math.isfinite(presence) or presence < PRESENCE_THRESHOLD:
            continue
        if tuple(pmf.shape) != (arch.hist_rows, width):
            raise InvalidInputError(f"s{s}/node_pmf has shape {tuple(pmf.shape)}, expected {(arch.hist_rows, width)}")
        pmf, sampling, params = pmf / presence, sampling / presence, params / presence
        steps = round(float(sampling[0]))
        if not 1 <= steps <= MAX_STEPS_PER_LEVEL:
            raise InvalidInputError(f"s{s}: {steps} Langevin steps per level is out of range")
        sp = LangevinParams(steps_per_level=steps, step_ratio=float(sampling[1]), noise_factor=float(sampling[2]))
        model = arch.new_model(class_label=s, init_seed=0, sampling=sp)
        model.load_flat_parameters(params)
        hist = torch.round(pmf.clamp(min=0.0) * HIST_RESOLUTION).long()
        hist[:, 0] = 0
        if int(hist.sum()) <= 0:
            raise InvalidInputError(f"s{s}: the node-count distribution is empty")
        model.node_count_hist = hist
        features = None
        if table is not None:
            if tuple(table.shape) != _table_shape(arch):
                raise InvalidInputError(f"s{s}/node_features has shape {tuple(table.shape)}, expected {_table_shape(arch)}")
            if edge_table is not None and tuple(edge_table.shape) != _edge_table_shape(arch):
                raise InvalidInputError(f"s{s}/edge_features has shape {tuple(edge_table.shape)}, "
                                        f"expected {_edge_table_shape(arch)}")
            features = NodeFeatureTable(*(None if t is None else _cut_noise(t / presence) for t in (table, edge_table)))
        models.append(Generator(model, features))
    return models


def _cut_noise(table: torch.Tensor) -> torch.Tensor:
    """Entries below :data:`TABLE_NOISE_FLOOR` set to zero (CKKS noise on an absent entry)."""
    return torch.where(table < TABLE_NOISE_FLOOR, torch.zeros_like(table), table)


# --------------------------------------------------------------------------------- order
def canonical_order(generators: Sequence[Generator]) -> list[Generator]:
    """Received models in an order independent of the (CSPRNG) shuffle and of CKKS noise.

    The receiver seeds its sampling per position, so the HE and the plaintext run of one seed
    generate the same graphs. The key is the class, then the node-count distribution rounded
    to 1e-4 (distinct per sender almost surely), then the weight sum rounded to 1e-3.
    """

    def key(g: Generator) -> tuple[object, ...]:
        m = g.model
        hist = m.node_count_hist.double()
        pmf = hist / hist.sum(dim=1, keepdim=True).clamp(min=1)
        label = -1 if m.class_label is None else m.class_label
        return (label, tuple(torch.round(pmf.flatten() * 1e4).long().tolist()), round(float(m.flat_parameters().double().sum()), 3))

    return sorted(generators, key=key)
