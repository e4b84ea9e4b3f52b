"""A small in-process federation for the CKKS mechanism tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from securefg.federation.party import client_id

from ..federation_fixture import Federation, build_federation

__all__ = ["Federation", "build_federation"]


@pytest.fixture
def make_federation() -> Callable[..., Federation]:
    return build_federation


def random_inputs(n_clients: int, *, seed: int = 0, size: int = 5000) -> dict[str, dict[str, torch.Tensor]]:
    """Named float tensors per client, spanning two CKKS chunks plus a tail."""
    g = torch.Generator().manual_seed(seed)
    return {
        client_id(k): {
            "w": torch.randn(2, size, generator=g, dtype=torch.float64),
            "b": torch.randn(7, generator=g, dtype=torch.float32),
        }
        for k in range(n_clients)
    }


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.to(torch.float64), want.to(torch.float64)
    return float((got - want).norm() / want.norm())
