"""Shared fixtures: an in-process federation and a stand-in masked-sum mechanism."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import torch

from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.protocol.mechanism import (
    ExchangeCall,
    ExchangeKind,
    Mechanism,
    SumOutcome,
    register_mechanism,
)
from securefg.protocol.plaintext import upload_vectors
from securefg.protocol.stack import ProtocolStack


@register_mechanism
class StandInMaskedSum(Mechanism):
    """Test double of a masked sum: declares that it hides inputs (it does not mask)."""

    name = "test_masked_sum"
    exchanges = frozenset({ExchangeKind.AGGREGATE})
    reveals_individual_inputs = False

    def run_aggregate(self, call: ExchangeCall, inputs: Mapping[str, torch.Tensor]) -> SumOutcome:
        got = upload_vectors(call, inputs, call.server, "test/upload")
        order = sorted(got)
        return SumOutcome(torch.stack([got[p] for p in order]).sum(0), tuple(order))


def _make_stack(mechanism: str = "plaintext", **transforms: dict) -> ProtocolStack:
    """A stack binding tag ``u`` (and ``s`` for similarity) with the given transforms.

    Seeded noise (``secure_rng = false``, for deterministic tests) voids the DP guarantee, so
    the stack then says why (``unsafe``), as a user's stack must.
    """
    specs = [{"name": name, **params} for name, params in transforms.items()]
    seeded = any(s.get("secure_rng") is False for s in specs)
    unsafe = {"unsafe": "seeded DP noise: the test must be deterministic"} if seeded else {}
    return ProtocolStack.from_dict(
        {
            "name": "dp-test",
            "tags": {
                "u": {"mechanism": mechanism, "transforms": specs},
                "s": {"mechanism": "plaintext", "transforms": specs},
            },
            **unsafe,
        }
    )


def _make_exchange(stack: ProtocolStack, n: int = 3, seed: int = 0) -> Exchange:
    parties = {SERVER: Party(SERVER), **{client_id(k): Party(client_id(k)) for k in range(n)}}
    ex = Exchange(transport=InProcessTransport(parties), stack=stack, parties=parties, seed=seed)
    ex.round = 0
    return ex


@pytest.fixture
def make_stack():
    """``make_stack(mechanism, dp_gaussian={...})``: binds tags ``u`` and ``s``."""
    return _make_stack


@pytest.fixture
def make_exchange():
    """``make_exchange(stack, n=3, seed=0)``: server + n clients, round 0."""
    return _make_exchange
