"""``blind_sum``: every client gets the exact sum under dropouts; the server holds only masked values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from securefg.errors import CodecError, ConfigError, InvalidClaimError
from securefg.federation.codec import decode_tensor
from securefg.federation.envelope import Form
from securefg.protocol.secure_sum import BlindSum, SecureSum
from securefg.protocol.secure_sum.blinded_result import BlindedResult, unblind
from securefg.protocol.secure_sum.constants import Stage
from securefg.protocol.secure_sum.group_key import STAGE_DOWN, STAGE_UP, held_key
from tests.protocol.federation_fixture import build_federation

from .conftest import World

PARAMS = {"clip": 4.0, "resolution": 2.0**-20, "dropout_rate": 0.0, "adversarial_rate": 0.0}


def _server_records(world: World, tag: str) -> list:
    """What the server received or sent under ``tag``."""
    return [r for r in world.transport.transcript if r.tag == tag and "server" in (r.sender, r.receiver)]


def _server_guesses(world: World, tag: str, mech: SecureSum, n: int) -> list[np.ndarray]:
    """Every vector the server can decode from what it sent or received under ``tag``: a ring sum
    read as fixed point, or a tensor payload."""
    q = mech.settings.quantizer(n)
    out = []
    for r in _server_records(world, tag):
        if r.payload is None:
            continue
        try:
            out.append(q.dequantize(BlindedResult.decode(r.payload).ring_sum))
        except (CodecError, ValueError):
            pass
        try:
            out.append(decode_tensor(r.payload).double().numpy())
        except (CodecError, ValueError, RuntimeError):
            pass
    return out


def test_every_client_decodes_the_exact_sum_over_survivors_under_dropouts(world: World) -> None:
    mech = BlindSum(**PARAMS, degree=5, threshold=3)
    inputs = world.inputs(500)
    drops = {Stage.SHARE_KEYS.value: {"client/1"}, Stage.MASKED_INPUT.value: {"client/2"}}
    got = mech.run_shared_sum(world.call(mech, dropouts=drops), inputs)
    expected = sum(v for c, v in inputs.items() if c not in ("client/1", "client/2"))
    assert set(got) == set(inputs)  # dropped clients still receive (and can unblind) the result
    bound = mech.last_report.error_bound
    for out in got.values():
        assert out.contributors == ("client/0", "client/3", "client/4", "client/5")
        assert float((out.total - expected).abs().max()) <= bound


def test_the_server_view_holds_only_masked_values_while_a_secure_sum_control_reveals_the_sum() -> None:
    inputs = World(5).inputs(300, seed=3)
    expected = sum(inputs.values()).numpy()
    found = {}
    for mech in (BlindSum(**PARAMS), SecureSum(**PARAMS)):
        world = World(5)
        got = mech.run_shared_sum(world.call(mech, tag="g"), inputs)
        assert np.allclose(got["client/0"].total.numpy(), expected, atol=1e-4)
        guesses = _server_guesses(world, "g", mech, 5)
        found[mech.name] = any(np.allclose(g, expected, atol=1e-4) for g in guesses)
        if mech.name == "blind_sum":
            assert guesses, "the control must parse the blinded result the server sent"
            assert {r.form for r in _server_records(world, "g")} <= {
                Form.KEYS, Form.MASKED, Form.SEALED}
            assert "mech/blind_sum" not in world.parties["server"].state
    assert found == {"blind_sum": False, "secure_sum": True}


def test_the_group_key_is_sealed_through_the_server_once_per_session(world: World) -> None:
    mech = BlindSum(**PARAMS)
    for rnd in (0, 1):
        mech.run_shared_sum(world.call(mech, round=rnd), world.inputs(10, seed=rnd))
    setup = [r for r in world.transport.transcript if r.stage in (STAGE_UP, STAGE_DOWN)]
    assert {r.round for r in setup} == {0}
    assert {r.form for r in setup} == {Form.SEALED}
    call = world.call(mech)
    keys = {held_key(call, c) for c in world.clients}
    assert len(keys) == 1 and None not in keys
    assert held_key(call, "server") is None


def test_a_client_refuses_a_survivor_list_naming_an_unknown_or_repeated_client(world: World) -> None:
    mech = BlindSum(**PARAMS)
    mech.run_shared_sum(world.call(mech), world.inputs(4))
    key = held_key(world.call(mech), "client/0")
    bits = mech.settings.ring_bits(6)
    ring = np.zeros(4, dtype=np.uint32)
    for survivors in (("client/0", "client/9"), ("client/0", "client/0")):
        with pytest.raises(InvalidClaimError, match="unknown or repeated"):
            unblind(BlindedResult(6, bits, survivors, ring), key=key, settings=mech.settings,
                    session=world.transport.session, round=0, tag="t", clients=world.clients)


def test_exchange_shared_sum_names_tensors_and_refuses_central_noise() -> None:
    fed = build_federation(3, {"s": {"mechanism": "blind_sum", "params": PARAMS}})
    inputs = {c: {"a": torch.full((2, 3), float(i))} for i, c in enumerate(fed.clients)}
    got = fed.exchange.shared_sum("s", inputs)
    assert set(got) == set(fed.clients)
    assert torch.allclose(got["client/2"]["a"], torch.full((2, 3), 3.0), atol=1e-5)
    bad = build_federation(3, {"s": {"mechanism": "blind_sum", "transforms": [
        {"name": "dp_gaussian", "noise_multiplier": 1.0, "clip": 1.0}]}})
    with pytest.raises(ConfigError, match="needs a server-side step on the result"):
        bad.exchange.shared_sum("s", inputs)


def test_distributed_noise_on_a_shared_sum_reaches_every_client_equally_and_is_accounted() -> None:
    dp = {"name": "dp_gaussian", "mode": "distributed", "noise_multiplier": 2.0, "clip": 1.0, "secure_rng": False}
    fed = build_federation(4, {"s": {"mechanism": "blind_sum", "params": {**PARAMS, "clip": 64.0},
                                     "transforms": [dp], "unsafe": "seeded DP noise: deterministic test"}})
    inputs = {c: {"a": torch.zeros(2000)} for c in fed.clients}
    got = fed.exchange.shared_sum("s", inputs)
    first = got["client/0"]["a"]
    assert all(torch.equal(g["a"], first) for g in got.values())  # one noisy sum, the same for all
    assert 1.6 < float(first.std()) < 2.4  # four shares of std 2/sqrt(4): the sum carries sigma * clip = 2
    from securefg.protocol.dp.accountant import STATE_KEY
    assert fed.parties["server"].state[STATE_KEY].releases()


def test_the_ledger_lists_every_client_and_not_the_server_as_reading_the_blinded_result(world: World) -> None:
    from securefg.audit.ledger import exposure_ledger
    from securefg.protocol.mechanism import ExchangeKind
    from securefg.protocol.stack import ProtocolStack

    mech = BlindSum(**PARAMS)
    mech.run_shared_sum(world.call(mech, tag="g"), world.inputs(5))
    stack = ProtocolStack.from_dict({"name": "blind", "tags": {"g": {"mechanism": "blind_sum", "params": PARAMS}}})
    rows = exposure_ledger(world.transport.transcript, stack=stack, kinds={"g": ExchangeKind.SHARED_SUM})
    (row,) = [r for r in rows if r.tag == "g"]
    assert row.clear_readers == () and set(row.opened_by) == set(row.aggregate_only) == set(world.clients)
    assert "server" in row.protected["masked"]  # it holds the sum blinded under the clients' group key
