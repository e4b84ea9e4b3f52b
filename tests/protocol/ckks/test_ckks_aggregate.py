"""``aggregate`` under CKKS: equals the plaintext stack; the server holds only public material."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from securefg.errors import MechanismError
from securefg.federation.envelope import Form
from securefg.federation.party import KEY_AUTHORITY, SERVER, client_id
from securefg.protocol.ckks.constants import Stage
from securefg.protocol.ckks.presets import PRESETS
from securefg.protocol.ckks.public_context import PublicContext
from securefg.protocol.ckks.secret_context import SecretContext

from .conftest import build_federation, random_inputs, relative_error

NO_NOISE = {"mechanism": "ckks", "params": {"output_noise": "none"},
            "unsafe": "exact decryptions, to compare with the plaintext sum"}


def _every_value(state: object):  # type: ignore[no-untyped-def]
    if isinstance(state, dict):
        for v in state.values():
            yield from _every_value(v)
    else:
        yield state


def test_weighted_mean_equals_the_plaintext_stack() -> None:
    inputs = random_inputs(5)
    weights = {client_id(k): float(10 * k + 3) for k in range(5)}
    enc = build_federation(5, {"t/update": NO_NOISE}).exchange.aggregate("t/update", inputs, weights=weights)
    plain = build_federation(5, {"t/update": {"mechanism": "plaintext"}}).exchange.aggregate(
        "t/update", inputs, weights=weights
    )
    for name in ("w", "b"):
        assert enc[name].dtype == plain[name].dtype
        assert relative_error(enc[name], plain[name]) < 1e-6
    # and against an independent computation
    want = sum(weights[p] * inputs[p]["w"] for p in inputs) / sum(weights.values())
    assert relative_error(enc["w"], want) < 1e-6


def test_plain_sum_without_mean() -> None:
    inputs = random_inputs(3, size=10)
    got = build_federation(3, {"t": NO_NOISE}).exchange.aggregate("t", inputs, mean=False)
    assert relative_error(got["w"], sum(i["w"] for i in inputs.values())) < 1e-6


def test_flooding_noise_has_the_configured_standard_deviation() -> None:
    std = 1e-4
    fed = build_federation(2, {"t": {"mechanism": "ckks", "params": {"flood_std": std}}})
    zeros = {c: {"x": torch.zeros(40_000, dtype=torch.float64)} for c in fed.clients}
    got = fed.exchange.aggregate("t", zeros, mean=False)["x"]
    assert abs(float(got.mean())) < 5 * std / 200
    assert float(got.std()) == pytest.approx(std, rel=0.03)


def test_default_flooding_stays_within_the_tolerance() -> None:
    inputs = random_inputs(4)
    got = build_federation(4, {"t": {"mechanism": "ckks"}}).exchange.aggregate("t", inputs)
    want = sum(i["w"] for i in inputs.values()) / 4
    err = relative_error(got["w"], want)
    assert 1e-8 < err < 2e-6  # noise is really there, and small


def test_server_sees_only_ciphertexts_public_keys_and_the_released_sum() -> None:
    fed = build_federation(4, {"t": NO_NOISE})
    fed.exchange.aggregate("t", random_inputs(4, size=100))
    seen = Counter((r.stage, r.form) for r in fed.transcript.view(SERVER))
    assert seen == {
        (Stage.PUBLIC_CONTEXT, Form.KEYS): 1,
        (Stage.UPLOAD, Form.CIPHERTEXT): 4,
        (Stage.DECRYPT_RESULT, Form.AGGREGATE): 1,
    }
    (keys,) = [r for r in fed.transcript.view(SERVER) if r.form is Form.KEYS]
    assert keys.payload is not None
    assert PublicContext.from_bytes(keys.payload, preset=PRESETS["default"]).is_public()


def test_everything_the_server_holds_is_public() -> None:
    fed = build_federation(3, {"t": NO_NOISE, "s": {"mechanism": "ckks"}})
    fed.exchange.aggregate("t", random_inputs(3, size=10))
    fed.exchange.similarity("s", {c: torch.ones(4, dtype=torch.float64) for c in fed.clients})
    held = list(_every_value(fed.parties[SERVER].state))
    assert held, "the server should hold its public context"
    assert all(isinstance(v, PublicContext) and v.is_public() for v in held)
    # the key holder (client/0 by default) is the only client with a secret context
    assert any(isinstance(v, SecretContext) for v in _every_value(fed.parties[client_id(0)].state))
    assert not any(isinstance(v, SecretContext) for v in _every_value(fed.parties[client_id(1)].state))


def test_key_setup_runs_once_per_session() -> None:
    fed = build_federation(3, {"t": NO_NOISE})
    for rnd in range(3):
        fed.exchange.round = rnd
        fed.exchange.aggregate("t", random_inputs(3, seed=rnd, size=10))
    key_rounds = {r.round for r in fed.transcript if r.form is Form.KEYS}
    assert key_rounds == {0}
    assert fed.transcript.bytes_by_tag()["t"] > 3 * 2 * 300_000  # ciphertext bytes are counted


def test_a_keyholder_party_decrypts_and_clients_hold_public_keys_only() -> None:
    fed = build_federation(3, {"t": NO_NOISE}, extra=[KEY_AUTHORITY])
    inputs = random_inputs(3, size=10)
    got = fed.exchange.aggregate("t", inputs, mean=False)
    assert relative_error(got["w"], sum(i["w"] for i in inputs.values())) < 1e-6
    requests = [r for r in fed.transcript if r.stage == Stage.DECRYPT_REQUEST]
    assert [(r.sender, r.receiver, r.form) for r in requests] == [(SERVER, KEY_AUTHORITY, Form.CIPHERTEXT)]
    for c in fed.clients:
        held = list(_every_value(fed.parties[c].state))
        assert held and all(v.is_public() for v in held)


def test_offline_client_is_left_out_of_the_sum() -> None:
    fed = build_federation(4, {"t": NO_NOISE})
    fed.transport.offline.add(client_id(3))
    inputs = random_inputs(4, size=10)
    got = fed.exchange.aggregate("t", inputs, mean=False)
    assert fed.exchange.last_contributors == (client_id(0), client_id(1), client_id(2))
    assert relative_error(got["w"], sum(inputs[client_id(k)]["w"] for k in range(3))) < 1e-6


def test_offline_key_holder_aborts_with_advice() -> None:
    fed = build_federation(3, {"t": NO_NOISE})
    fed.transport.offline.add(client_id(0))
    with pytest.raises(MechanismError, match="key holder 'client/0' is offline.*'keyholder' party"):
        fed.exchange.aggregate("t", random_inputs(3, size=10))

