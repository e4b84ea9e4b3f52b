"""The shipped ``protocols/fedavg_ckks.toml`` stack."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import UnboundTagError
from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.protocol.mechanism import ExchangeKind
from securefg.protocol.stack import ProtocolStack, protocols_dir


def test_fedavg_ckks_binds_each_tag_explicitly() -> None:
    stack = ProtocolStack.load("fedavg_ckks")
    assert stack.source == str(protocols_dir() / "fedavg_ckks.toml")
    assert {b.pattern: b.mechanism for b in stack.bindings} == {
        "fedavg/model": "plaintext",
        "fedavg/update": "ckks",
        "fedavg/metrics": "ckks",
    }
    stack.check_tags(
        {
            "fedavg/model": ExchangeKind.BROADCAST,
            "fedavg/update": ExchangeKind.AGGREGATE,
            "fedavg/metrics": ExchangeKind.AGGREGATE,
        }
    )
    with pytest.raises(UnboundTagError, match="message tag 'fedavg/other' is not bound"):
        stack.resolve("fedavg/other", ExchangeKind.AGGREGATE)


def test_fedavg_round_under_the_ckks_stack_matches_plaintext() -> None:
    pids = [SERVER] + [client_id(k) for k in range(3)]
    g = torch.Generator().manual_seed(0)
    updates = {c: {"lin.weight": torch.randn(4, 8, generator=g), "lin.bias": torch.randn(4, generator=g)} for c in pids[1:]}
    metrics = {c: {"loss": torch.rand(1, generator=g, dtype=torch.float64)} for c in pids[1:]}
    weights = {c: float(10 + k) for k, c in enumerate(pids[1:])}
    results = []
    for name in ("fedavg_ckks", "plaintext"):
        ex = Exchange(
            transport=InProcessTransport(pids), stack=ProtocolStack.load(name), parties={p: Party(p) for p in pids}
        )
        model = ex.broadcast("fedavg/model", updates[client_id(0)])
        assert set(model) == set(pids[1:])
        results.append((ex.aggregate("fedavg/update", updates, weights=weights), ex.aggregate("fedavg/metrics", metrics)))
    (enc_u, enc_m), (plain_u, plain_m) = results
    for k in plain_u:
        assert enc_u[k].dtype == plain_u[k].dtype
        assert torch.allclose(enc_u[k], plain_u[k], rtol=1e-5, atol=1e-6)
    assert torch.allclose(enc_m["loss"], plain_m["loss"], atol=1e-5)
