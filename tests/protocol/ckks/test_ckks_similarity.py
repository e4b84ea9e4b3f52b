"""``similarity`` under CKKS: encrypted cosine/dot products, decrypted as bare scalars."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import ConfigError, OverflowRiskError
from securefg.federation.envelope import Form
from securefg.federation.party import SERVER, client_id
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.presets import PRESETS
from securefg.protocol.ckks.secret_context import SecretContext
from securefg.protocol.plaintext import pairwise_similarity
from securefg.protocol.relay.blob_list import unpack_blobs

from .conftest import Federation, build_federation

N = 5


@pytest.fixture(scope="module")
def fed() -> Federation:
    # One federation for the module: Galois keys (~35 MB) are made and shipped once.
    return build_federation(N, {"s/none": {"mechanism": "ckks", "params": {"output_noise": "none"},
                                           "unsafe": "exact decryptions, to measure the CKKS error"},
                                "s/flood": {"mechanism": "ckks"}})


def _embeddings(seed: int, dim: int = 300) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(dim, generator=g, dtype=torch.float64)
    out = {client_id(k): base * (k % 2) + torch.randn(dim, generator=g, dtype=torch.float64) for k in range(N)}
    out[client_id(N - 1)] = -out[client_id(0)]  # a cosine of exactly -1
    return out


def _matrix(pairs: dict[tuple[str, str], float], order: list[str]) -> torch.Tensor:
    return torch.tensor([[pairs[(a, b)] for b in order] for a in order], dtype=torch.float64)


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_encrypted_similarity_equals_plaintext(fed: Federation, metric: str) -> None:
    emb = _embeddings(1)
    fed.exchange.round += 1
    order, got = fed.exchange.similarity("s/none", emb, metric=metric)
    want = _matrix(pairwise_similarity(emb, metric), order)
    assert float((got - want).norm() / want.norm()) < 1e-6
    assert float((got - want).abs().max() / want.abs().max()) < 1e-6
    assert torch.allclose(got, got.T)


def test_flooded_similarity_is_close_but_noisy(fed: Federation) -> None:
    emb = _embeddings(2)
    fed.exchange.round += 1
    order, got = fed.exchange.similarity("s/flood", emb)
    want = _matrix(pairwise_similarity(emb, "cosine"), order)
    assert 0 < float((got - want).abs().max()) < 1e-5


def test_key_holder_receives_only_masked_scalars_in_a_secret_order(fed: Federation) -> None:
    fed.exchange.round += 1
    fed.exchange.similarity("s/none", _embeddings(3))
    (req,) = [r for r in fed.transcript.records(round=fed.exchange.round) if r.stage == Stage.SIMILARITY_REQUEST]
    assert (req.sender, req.receiver, req.form) == (SERVER, client_id(0), Form.CIPHERTEXT)
    assert req.payload is not None
    blobs = unpack_blobs(req.payload)
    assert len(blobs) == N * (N + 1) // 2
    holder = next(v for v in fed.parties[client_id(0)].state["mech/ckks"]["keys"].values())
    assert isinstance(holder, SecretContext)
    for b in blobs:  # every ciphertext is a single scalar, not a vector of partial sums
        assert holder.load(b).length == 1


def test_only_the_similarity_exchange_ships_galois_keys(fed: Federation) -> None:
    keys = [r for r in fed.transcript if r.stage == Stage.PUBLIC_CONTEXT]
    (to_server,) = [r for r in keys if r.receiver == SERVER]
    assert to_server.payload_bytes > 20_000_000  # Galois keys: ~35 MB at N=8192
    to_clients = [r for r in keys if r.receiver != SERVER]
    assert len(to_clients) == N - 1 and all(r.payload_bytes < 3_000_000 for r in to_clients)
    aggregate_only = build_federation(2, {"t": {"mechanism": "ckks"}})
    aggregate_only.exchange.aggregate("t", {c: {"x": torch.ones(3)} for c in aggregate_only.clients})
    (pub,) = [r for r in aggregate_only.transcript if r.stage == Stage.PUBLIC_CONTEXT and r.receiver == SERVER]
    assert pub.payload_bytes < 3_000_000


def test_dot_products_beyond_the_headroom_are_refused(fed: Federation) -> None:
    big = {c: torch.full((100,), 100.0, dtype=torch.float64) for c in fed.clients}
    fed.exchange.round += 1
    with pytest.raises(OverflowRiskError, match=r"squared norm 1e\+06 exceeds .*use metric='cosine'"):
        fed.exchange.similarity("s/none", big, metric="dot")


def test_similarity_needs_two_levels() -> None:
    one_level = {"poly_modulus_degree": 8192, "coeff_mod_bit_sizes": [60, 40, 60], "scale_bits": 40}
    fed = build_federation(2, {"s": {"mechanism": "ckks", "params": one_level}})
    with pytest.raises(ConfigError, match=r"needs 2 multiplicative level\(s\) .* has 1; use preset 'deep'"):
        fed.exchange.similarity("s", {c: torch.ones(3, dtype=torch.float64) for c in fed.clients})
    assert PRESETS["default"].levels == 2
