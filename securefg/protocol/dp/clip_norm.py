"""Norm bounding without noise: a defence against scaled updates that works under masked sums."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from securefg.errors import ConfigError
from securefg.protocol.dp.noise import clip_to_norm
from securefg.protocol.mechanism import ExchangeCall, Transform, register_transform


@register_transform
class ClipNorm(Transform):
    r"""Clip each client's vector to L2 norm ``clip`` before it enters the mechanism.

    Bounds how far one client can move an aggregate (model-replacement and scaling attacks,
    Bagdasaryan et al. 2020, https://arxiv.org/abs/1807.00459). It runs on the client, so it
    composes with masked sums, where the server cannot inspect inputs. Two limits, stated
    plainly:

    * It gives **no** differential privacy: nothing is random. Use ``dp_gaussian`` for that.
    * It binds **honest** clients only. A malicious client skips it, and under a masked sum the
      server cannot tell; enforcing a norm bound on masked inputs needs a verifiable check
      (a zero-knowledge range proof), which this transform is not.

    Args:
        clip (float): The L2 norm bound :math:`C > 0`. Required.
    """

    name = "clip_norm"
    defaults: ClassVar[Mapping[str, Any]] = {"clip": None}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        clip = self.params["clip"]
        if not (
            isinstance(clip, (int, float)) and not isinstance(clip, bool) and math.isfinite(clip) and clip > 0
        ):
            raise ConfigError(f"transform 'clip_norm' needs 'clip', a finite number > 0; got {clip!r}")
        self.clip = float(clip)

    def client(self, call: ExchangeCall, pid: str, vector: torch.Tensor) -> torch.Tensor:
        """Run as client ``pid``: return ``vector`` scaled to norm at most ``clip``."""
        return clip_to_norm(vector, self.clip)

    def __repr__(self) -> str:
        return f"ClipNorm(clip={self.clip})"
