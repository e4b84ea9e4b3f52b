"""Flat named tensors for a graph diffusion model: the pickle-free wire form.

A model crosses party boundaries (possibly HE-encrypted, always through a tensor codec), so
it is written as plain named tensors and rebuilt only after every field has been checked:
names, dtypes, shapes, ranges, and that the parameters match the architecture the header
declares. Nothing here executes code chosen by the sender.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from securefg.errors import ConfigError, InvalidInputError
from securefg.models.graph_score.config import MAX_LAYERS, EDPScoreConfig
from securefg.models.graph_score.sampler import LangevinParams

FORMAT_VERSION = 1
PARAM_PREFIX = "param."
MAX_LEVELS = 64
MAX_CLASSES = 1024
MAX_NODE_NUM = 512

_SCALAR = ()
_VECTOR = (None,)
#: Header fields: name -> (dtype, shape); ``None`` is a free dimension.
HEADER_SPEC: dict[str, tuple[torch.dtype, tuple[int | None, ...]]] = {
    "format_version": (torch.int64, _SCALAR),
    "config.node_features": (torch.int64, _SCALAR),
    "config.channels": (torch.int64, _VECTOR),
    "config.gin_hidden": (torch.int64, _VECTOR),
    "config.num_conditions": (torch.int64, _SCALAR),
    "config.common_neighbors": (torch.int64, _SCALAR),
    "sigmas": (torch.float64, _VECTOR),
    "num_classes": (torch.int64, _SCALAR),
    "class_label": (torch.int64, _SCALAR),
    "max_node_num": (torch.int64, _SCALAR),
    "node_count_hist": (torch.int64, (None, None)),
    "sampling.steps_per_level": (torch.int64, _SCALAR),
    "sampling.step_ratio": (torch.float64, _SCALAR),
    "sampling.noise_factor": (torch.float64, _SCALAR),
}


@dataclass(frozen=True)
class ModelHeader:
    """Everything but the weights, validated."""

    config: EDPScoreConfig
    sigmas: tuple[float, ...]
    num_classes: int | None
    class_label: int | None
    max_node_num: int
    histogram: torch.Tensor
    sampling: LangevinParams


def encode(header: ModelHeader, state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Write ``header`` and the weights as flat named CPU tensors."""
    cfg, sp = header.config, header.sampling
    out = {
        "format_version": torch.tensor(FORMAT_VERSION, dtype=torch.int64),
        "config.node_features": torch.tensor(cfg.node_features, dtype=torch.int64),
        "config.channels": torch.tensor(cfg.channels, dtype=torch.int64),
        "config.gin_hidden": torch.tensor(cfg.gin_hidden, dtype=torch.int64),
        "config.num_conditions": torch.tensor(cfg.num_conditions, dtype=torch.int64),
        "config.common_neighbors": torch.tensor(int(cfg.common_neighbors), dtype=torch.int64),
        "sigmas": torch.tensor(header.sigmas, dtype=torch.float64),
        "num_classes": torch.tensor(header.num_classes or 0, dtype=torch.int64),
        "class_label": torch.tensor(
            -1 if header.class_label is None else header.class_label, dtype=torch.int64
        ),
        "max_node_num": torch.tensor(header.max_node_num, dtype=torch.int64),
        "node_count_hist": header.histogram.detach().cpu().to(torch.int64).clone(),
        "sampling.steps_per_level": torch.tensor(sp.steps_per_level, dtype=torch.int64),
        "sampling.step_ratio": torch.tensor(sp.step_ratio, dtype=torch.float64),
        "sampling.noise_factor": torch.tensor(sp.noise_factor, dtype=torch.float64),
    }
    for name, value in state_dict.items():
        out[PARAM_PREFIX + name] = value.detach().cpu().to(torch.float32).clone()
    return out


def _check_fields(tensors: Mapping[str, torch.Tensor]) -> None:
    if not isinstance(tensors, Mapping):
        raise InvalidInputError(f"expected a mapping of named tensors, got {type(tensors).__name__}")
    problems = []
    for name, value in tensors.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            raise InvalidInputError(f"field {name!r} is not a named torch.Tensor")
        if name not in HEADER_SPEC and not name.startswith(PARAM_PREFIX):
            problems.append(f"unexpected field {name!r}")
    missing = sorted(set(HEADER_SPEC) - set(tensors))
    if missing:
        problems.append(f"missing fields {missing}")
    for name, (dtype, shape) in HEADER_SPEC.items():
        t = tensors.get(name)
        if t is None:
            continue
        if t.dtype != dtype:
            problems.append(f"{name}: dtype {t.dtype}, expected {dtype}")
        if t.dim() != len(shape) or any(
            s is not None and s != d for s, d in zip(shape, t.shape, strict=True)
        ):
            problems.append(f"{name}: shape {tuple(t.shape)}, expected {shape}")
    if problems:
        raise InvalidInputError("graph diffusion model payload is malformed:\n" + _bullets(problems))


def decode_header(tensors: Mapping[str, torch.Tensor]) -> ModelHeader:
    """Validate the header fields of ``tensors`` (weights are checked by the model).

    Raises:
        InvalidInputError: A field is missing, unexpected, or of the wrong dtype or shape.
        ConfigError: The values describe an impossible or over-sized model.
    """
    _check_fields(tensors)
    version = int(tensors["format_version"])
    if version != FORMAT_VERSION:
        raise ConfigError(f"unsupported format_version {version}, this build reads {FORMAT_VERSION}")
    problems = []
    channels, gin_hidden = tensors["config.channels"], tensors["config.gin_hidden"]
    if channels.numel() > MAX_LAYERS + 1 or gin_hidden.numel() > MAX_LAYERS:
        raise ConfigError(f"too many layers: channels {channels.numel()}, gin {gin_hidden.numel()}")
    sigmas = tuple(float(s) for s in tensors["sigmas"])
    if not 1 <= len(sigmas) <= MAX_LEVELS or not all(math.isfinite(s) and s > 0 for s in sigmas):
        problems.append(f"sigmas must be 1..{MAX_LEVELS} finite positive values")
    num_classes = int(tensors["num_classes"])
    if not 0 <= num_classes <= MAX_CLASSES:
        problems.append(f"num_classes={num_classes} not in [0, {MAX_CLASSES}] (0 = unconditional)")
    class_label = int(tensors["class_label"])
    if class_label < -1 or (num_classes > 0 and class_label != -1):
        problems.append(f"class_label={class_label} invalid (-1 = none; conditional models use -1)")
    max_node_num = int(tensors["max_node_num"])
    if not 1 <= max_node_num <= MAX_NODE_NUM:
        problems.append(f"max_node_num={max_node_num} not in [1, {MAX_NODE_NUM}]")
    hist = tensors["node_count_hist"]
    rows = max(num_classes, 1)
    if tuple(hist.shape) != (rows, max_node_num + 1):
        problems.append(f"node_count_hist: shape {tuple(hist.shape)}, expected {(rows, max_node_num + 1)}")
    elif bool((hist < 0).any()) or bool((hist[:, 0] != 0).any()):
        problems.append("node_count_hist must be non-negative with no graphs of 0 nodes")
    num_conditions = int(tensors["config.num_conditions"])
    common_neighbors = int(tensors["config.common_neighbors"])
    if common_neighbors not in (0, 1):
        problems.append(f"config.common_neighbors={common_neighbors} must be 0 or 1")
    if problems == [] and num_conditions != len(sigmas) * rows:
        problems.append(f"config.num_conditions={num_conditions}, expected {len(sigmas) * rows}")
    if problems:
        raise ConfigError("graph diffusion model header is invalid:\n" + _bullets(problems))
    config = EDPScoreConfig(
        node_features=int(tensors["config.node_features"]),
        channels=tuple(int(c) for c in channels),
        gin_hidden=tuple(int(h) for h in gin_hidden),
        num_conditions=num_conditions,
        common_neighbors=bool(common_neighbors),
    )
    sampling = LangevinParams(
        steps_per_level=int(tensors["sampling.steps_per_level"]),
        step_ratio=float(tensors["sampling.step_ratio"]),
        noise_factor=float(tensors["sampling.noise_factor"]),
    )
    return ModelHeader(
        config=config,
        sigmas=sigmas,
        num_classes=num_classes or None,
        class_label=None if class_label < 0 else class_label,
        max_node_num=max_node_num,
        histogram=hist.clone(),
        sampling=sampling,
    )


def extract_state_dict(
    tensors: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Pick the ``param.*`` fields, checking them against ``expected`` (names and shapes).

    Raises:
        InvalidInputError: Names, dtypes or shapes differ, or a value is NaN/Inf.
    """
    received = {k[len(PARAM_PREFIX) :]: v for k, v in tensors.items() if k.startswith(PARAM_PREFIX)}
    problems = []
    missing, extra = sorted(set(expected) - set(received)), sorted(set(received) - set(expected))
    if missing:
        problems.append(f"missing parameters {missing}")
    if extra:
        problems.append(f"unexpected parameters {extra}")
    for name, ref in expected.items():
        t = received.get(name)
        if t is None:
            continue
        if t.dtype != torch.float32:
            problems.append(f"{PARAM_PREFIX}{name}: dtype {t.dtype}, expected torch.float32")
        elif tuple(t.shape) != tuple(ref.shape):
            problems.append(f"{PARAM_PREFIX}{name}: shape {tuple(t.shape)}, expected {tuple(ref.shape)}")
        elif not bool(torch.isfinite(t).all()):
            problems.append(f"{PARAM_PREFIX}{name}: contains NaN or Inf")
    if problems:
        raise InvalidInputError("graph diffusion model weights do not match:\n" + _bullets(problems))
    return received


def _bullets(problems: list[str]) -> str:
    return "\n".join(f"- {p}" for p in problems)
