"""A small in-process federation for the CKKS mechanism tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transcript import Transcript
from securefg.federation.transport import InProcessTransport
from securefg.protocol.stack import ProtocolStack


@dataclass
class Federation:
    exchange: Exchange
    transport: InProcessTransport
    parties: dict[str, Party]

    @property
    def transcript(self) -> Transcript:
        return self.transport.transcript

    @property
    def clients(self) -> list[str]:
        return self.exchange.clients


def build_federation(
    n_clients: int, tags: Mapping[str, Mapping[str, Any]], *, extra: Iterable[str] = ()
) -> Federation:
    pids = [SERVER] + [client_id(k) for k in range(n_clients)] + list(extra)
    transport = InProcessTransport(pids, transcript=Transcript(keep_payloads=True))
    parties = {p: Party(p) for p in pids}
    stack = ProtocolStack.from_dict({"name": "test", "tags": {t: dict(b) for t, b in tags.items()}})
    return Federation(Exchange(transport=transport, stack=stack, parties=parties), transport, parties)


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
