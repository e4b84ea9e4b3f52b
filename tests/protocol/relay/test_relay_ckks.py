"""``ckks_relay``: tensors as rerandomized CKKS ciphertexts the server can combine."""

from __future__ import annotations

import pytest
import torch

from securefg.errors import InvalidInputError
from securefg.federation.codec import decode_tensors, encode_tensors
from securefg.federation.envelope import Form
from securefg.federation.party import SERVER, client_id
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.relay.blob_list import unpack_blobs
from securefg.protocol.relay.ckks_relay import CKKSRelay
from securefg.protocol.relay.constants import RelayStage

from .conftest import build_federation

RELAY = {"m": {"mechanism": "ckks_relay"}}


def _models(n: int) -> dict[str, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return {client_id(k): {"conv.w": torch.randn(30, 200, generator=g), "conv.b": torch.randn(30, generator=g)} for k in range(n)}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_each_client_receives_the_others_models_up_to_ckks_error() -> None:
    fed = build_federation(3, RELAY)
    models = _models(3)
    got = fed.exchange.relay("m", {c: encode_tensors(m) for c, m in models.items()})
    for r in fed.clients:
        received = [decode_tensors(b) for b in got[r]]
        others = [m for c, m in models.items() if c != r]
        assert len(received) == 2
        assert all(any(_close(x, o) for x in received) for o in others)


def test_forwarded_copies_are_rerandomized_yet_decrypt_to_the_same_values() -> None:
    fed = build_federation(3, RELAY)
    fed.exchange.relay("m", {c: encode_tensors(m) for c, m in _models(3).items()})
    uploads = [unpack_blobs(r.payload)[1] for r in fed.transcript if r.stage == RelayStage.UPLOAD]  # type: ignore[arg-type]
    forwarded = [b for r in fed.transcript if r.stage == RelayStage.FORWARD for b in unpack_blobs(r.payload)[1:]]  # type: ignore[arg-type]
    assert len(forwarded) == 6 and len(set(forwarded)) == 6  # every copy differs, even of one item
    assert not set(forwarded) & set(uploads)
    # no 64-byte window of any upload body appears in any forwarded copy
    windows = {u[i : i + 64] for u in uploads for i in range(100, len(u) - 64, 9973)}
    assert not any(w in f for w in windows for f in forwarded)


def test_server_sees_only_ciphertexts_and_a_public_context() -> None:
    fed = build_federation(3, RELAY)
    fed.exchange.relay("m", {c: encode_tensors(m) for c, m in _models(3).items()})
    assert {(r.stage, r.form) for r in fed.transcript.view(SERVER)} == {
        ("ckks/keys/public", Form.KEYS),
        (RelayStage.UPLOAD, Form.CIPHERTEXT),
    }
    held = list(fed.parties[SERVER].state["mech/ckks"]["keys"].values())
    assert held and all(isinstance(v, PublicContext) and v.is_public() for v in held)


def test_server_computes_pair_averages_from_a_mix_plan() -> None:
    # CeFGC+: output for client j is (theta_j + theta_j*) / 2 with j* its most similar peer.
    fed = build_federation(3, RELAY)
    models = _models(3)
    c0, c1, c2 = fed.clients
    plan = {c0: {c0: 0.5, c1: 0.5}, c1: {c1: 0.5, c0: 0.5}, c2: {c2: 0.5, c1: 0.5}}
    CKKSRelay.plan_mix(fed.parties[SERVER], "m", plan)
    got = fed.exchange.relay("m", {c: encode_tensors(m) for c, m in models.items()})
    want = {o: {k: sum(a * models[s][k] for s, a in row.items()) for k in models[c0]} for o, row in plan.items()}
    received = [decode_tensors(b) for b in got[c2]]  # c2 gets outputs of c0 and c1
    assert all(any(_close(x, want[o]) for x in received) for o in (c0, c1))
    assert "m" not in fed.parties[SERVER].state["mech/ckks_relay"]["mix"]  # the plan is used once


def test_non_tensor_items_are_refused_with_advice() -> None:
    fed = build_federation(2, RELAY)
    with pytest.raises(InvalidInputError, match="Use sealed_relay for opaque bytes"):
        fed.exchange.relay("m", {c: b"opaque bytes" for c in fed.clients})
