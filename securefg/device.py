"""Device selection: ``auto`` takes a GPU when there is one, else the CPU."""

from __future__ import annotations

import torch

from securefg.errors import ConfigError


def resolve_device(name: str = "auto") -> torch.device:
    """Map ``auto|cpu|cuda|cuda:N|mps`` to a :class:`torch.device`.

    Raises:
        ConfigError: when the requested accelerator is not available.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} requested but CUDA is not available; use --device auto or cpu")
    return dev


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch, numpy and random (for library code that uses global state) and return a generator."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
