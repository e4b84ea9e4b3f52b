"""The whole protocol: exact sums under any dropout schedule, aborts exactly when due, peer sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from securefg.errors import (
    ConfigError,
    InvalidInputError,
    RingTooSmallError,
    TooFewSurvivorsError,
    UnexpectedMessageError,
)
from securefg.federation.envelope import Form
from securefg.protocol.secure_sum import SecureSum
from securefg.protocol.secure_sum.constants import NAME, ShareKind, Stage
from securefg.protocol.secure_sum.messages import AdvertiseRequest, decode_unmask_shares
from securefg.protocol.secure_sum.server import peel

from .conftest import World


def _graph(world: World, tag: str, round: int) -> dict[str, frozenset[str]]:
    """The neighbour sets, read from the AdvertiseKeys requests in the transcript."""
    out = {}
    for r in world.transport.transcript.records(tag=tag, round=round):
        if r.stage == Stage.ADVERTISE_KEYS.value and r.sender == "server":
            assert r.payload is not None
            out[r.receiver] = frozenset(AdvertiseRequest.decode(r.payload).neighbours)
    return out


def _oracle(clients, graph, t, offline, drop_at, signatures):  # type: ignore[no-untyped-def]
    """Survivors U3 under the protocol's rules, or None when the round must abort."""
    need = max(t, 2)

    def alive(s: set[str], stage: Stage) -> set[str]:
        return {c for c in s if drop_at.get(c) != stage}

    live = peel(alive(set(clients) - offline, Stage.ADVERTISE_KEYS), graph, t)
    if len(live) < need:
        return None
    u2 = alive(live, Stage.SHARE_KEYS)
    routed = {h: graph[h] & u2 for h in u2}
    asked = {h for h in u2 if len(routed[h]) >= t}
    if len(asked) < need:
        return None
    u3 = alive(asked, Stage.MASKED_INPUT)
    if len(u3) < need:
        return None
    if signatures:
        u4 = alive(u3, Stage.CONSISTENCY_CHECK)
        if len(u4) < t:
            return None
        asked = u4
    else:
        asked = u3
    u5 = alive(asked, Stage.UNMASK)
    owed = u3 | (set().union(*(routed[u] for u in u3)) - u3)
    if any(len({h for h in u5 if o in routed[h]}) < t for o in owed):
        return None
    return u3


RINGS = [{"bits": 32}, {"bits": 64}, {"resolution": 2.0**-10}, {"bits": 20, "resolution": 2.0**-12}]
"""Pinned 2^32 / 2^64, an auto-sized ring (17 bits at n = 8) and a pinned 20-bit one."""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(2, 8), signatures=st.booleans(), ring=st.sampled_from(RINGS))
def test_protected_sum_equals_plaintext_sum_and_aborts_exactly_when_due(data, n, signatures, ring) -> None:  # type: ignore[no-untyped-def]
    world = World(n)
    degree = data.draw(st.sampled_from([None, 2, 4, n - 1]))
    threshold = data.draw(st.one_of(st.none(), st.integers(1, n)))
    mech = SecureSum(degree=degree, threshold=threshold, signatures=signatures, clip=8.0, **ring)
    stages = list(Stage.ordered(signatures=signatures))
    drop_at = {c: s for c in world.clients if (s := data.draw(st.sampled_from([None, None, *stages]))) is not None}
    offline = set(data.draw(st.lists(st.sampled_from(world.clients), max_size=2)))
    world.transport.offline |= offline
    dropouts: dict[str, set[str]] = {}
    for c, s in drop_at.items():
        dropouts.setdefault(s.value, set()).add(c)
    inputs = world.inputs(13, seed=data.draw(st.integers(0, 1000)))
    before = {c: v.clone() for c, v in inputs.items()}
    call = world.call(mech, dropouts=dropouts)
    _, t = mech.settings.graph(n)
    try:
        out = mech.run_aggregate(call, inputs)
    except TooFewSurvivorsError:
        out = None
    graph = _graph(world, "t", 0)
    expected = _oracle(world.clients, graph, t, offline, drop_at, signatures) if graph else None
    if expected is None:
        assert out is None, "the round should have aborted"
    else:
        assert out is not None, "the round aborted although every secret was recoverable"
        assert set(out.contributors) == expected
        plain = sum(inputs[c] for c in expected)
        assert mech.last_report is not None
        assert float((out.total - plain).abs().max()) <= mech.last_report.error_bound
    assert all(torch.equal(inputs[c], before[c]) for c in inputs)  # inputs untouched
    _assert_never_both_share_kinds(world)
    assert all(world.transport.pending(p) == 0 for p in world.transport.parties)


@pytest.mark.parametrize("ring", [{"resolution": 2.0**-8}, {"bits": 14, "resolution": 2.0**-8}])
def test_small_rings_sum_exactly_under_dropouts_at_every_stage(ring: dict[str, float]) -> None:
    """Inputs on the fixed-point grid: the masked sum over survivors equals the plaintext sum exactly."""
    world = World(7)
    mech = SecureSum(degree=6, threshold=3, clip=1.0, **ring)
    bits = mech.settings.ring_bits(7)
    assert bits == (14 if "bits" in ring else 12)  # auto: 7 * 2^8 <= 2^11 - 1
    rng = np.random.default_rng(3)
    inputs = {c: torch.from_numpy(rng.integers(-256, 257, size=1001) / 256.0) for c in world.clients}
    inputs["client/0"][:3] = torch.tensor([1.0, -1.0, 1.0])  # extremes at the clip
    dropouts = {Stage.SHARE_KEYS.value: {"client/1"}, Stage.MASKED_INPUT.value: {"client/2"},
                Stage.UNMASK.value: {"client/3"}}
    out = mech.run_aggregate(world.call(mech, dropouts=dropouts), inputs)
    assert set(out.contributors) == {"client/0", "client/3", "client/4", "client/5", "client/6"}
    assert torch.equal(out.total, sum(inputs[c] for c in out.contributors))
    assert mech.last_report is not None and mech.last_report.ring_bits == bits
    masked = [r for r in world.transport.transcript.view("server") if r.stage == Stage.MASKED_INPUT.value]
    assert {r.payload_bytes for r in masked} == {10 + -(-1001 * bits // 8)}  # header + packed body


def test_a_ring_too_small_for_the_client_count_is_refused_before_anything_is_sent() -> None:
    world = World(9)
    mech = SecureSum(bits=12, clip=1.0, resolution=2.0**-8)  # 8 summands fit 2^11 - 1, 9 do not
    with pytest.raises(RingTooSmallError, match="2\\^12 ring holds 9 summands"):
        mech.run_aggregate(world.call(mech), world.inputs(5, scale=0.1))
    assert len(world.transport.transcript) == 0


def _assert_never_both_share_kinds(world: World) -> None:
    kinds: dict[str, set[ShareKind]] = {}
    for r in world.transport.transcript.view("server"):
        if r.stage == Stage.UNMASK.value and r.payload is not None:
            for owner, kind, _ in decode_unmask_shares(r.payload):
                kinds.setdefault(owner, set()).add(kind)
    assert all(len(k) == 1 for k in kinds.values()), kinds


def test_abort_below_threshold_leaves_earlier_rounds_intact_and_the_next_round_works(world: World) -> None:
    mech = SecureSum(degree=5, threshold=4)
    inputs = world.inputs(10)
    first = mech.run_aggregate(world.call(mech, round=0), inputs)
    many = set(world.clients[:3])
    with pytest.raises(TooFewSurvivorsError, match="fewer than the 4 required"):
        mech.run_aggregate(world.call(mech, round=1, dropouts={Stage.MASKED_INPUT.value: many}), inputs)
    state = world.parties["server"].state[f"mech/{NAME}"]
    assert set(state["reports"]) == {("t", 0)} and state["calls"] == {}
    assert all(world.transport.pending(p) == 0 for p in world.transport.parties)
    again = mech.run_aggregate(world.call(mech, round=2), inputs)
    assert torch.allclose(first.total, again.total, atol=1e-9)


def test_offline_clients_are_left_out_of_the_sum(world: World) -> None:
    world.transport.offline.add("client/5")
    mech = SecureSum()
    inputs = world.inputs(7)
    out = mech.run_aggregate(world.call(mech), inputs)
    assert "client/5" not in out.contributors
    assert torch.allclose(out.total, sum(v for c, v in inputs.items() if c != "client/5"), atol=1e-8)


def test_peer_sum_gives_the_target_exactly_the_sum_of_its_peers(world: World) -> None:
    mech = SecureSum(degree=4, threshold=3)
    inputs = world.inputs(9, exclude="client/0")
    out = mech.run_peer_sum(world.call(mech, tag="p"), "client/0", inputs)
    assert out.contributors == tuple(sorted(inputs))
    assert torch.allclose(out.total, sum(inputs.values()), atol=1e-9)


def test_peer_sum_survives_dropouts_and_the_server_only_relays_sealed_bytes(world: World) -> None:
    mech = SecureSum(degree=5, threshold=2)
    inputs = world.inputs(9, exclude="client/0")
    call = world.call(mech, tag="p", dropouts={Stage.SHARE_KEYS.value: {"client/2"}, Stage.UNMASK.value: {"client/3"}})
    out = mech.run_peer_sum(call, "client/0", inputs)
    assert "client/2" not in out.contributors and "client/3" in out.contributors
    assert torch.allclose(out.total, sum(v for c, v in inputs.items() if c != "client/2"), atol=1e-9)
    transcript = world.transport.transcript
    server_forms = {r.form for r in transcript.view("server") if r.tag == "p"}
    assert server_forms == {Form.KEYS, Form.SEALED}
    assert not [r for r in transcript.records(tag="p") if r.direction == "peer"]
    target = [r for r in transcript.view("client/0") if r.tag == "p"]
    assert {r.form for r in target} == {Form.KEYS, Form.MASKED} and all(r.sender == "server" for r in target)
    q = mech.settings.quantizer(len(inputs))
    plain = {q.quantize(v.numpy()).tobytes() for v in inputs.values()}
    assert not any(p in (r.payload or b"") for r in target for p in plain)


def test_relay_sum_sends_the_target_one_masked_vector_and_stays_exact_under_dropouts(world: World) -> None:
    mech = SecureSum(degree=5, threshold=2, relay_sum=True, clip=4.0, resolution=2.0**-20)
    inputs = world.inputs(1000, exclude="client/0")
    dropouts = {Stage.MASKED_INPUT.value: {"client/2"}, Stage.UNMASK.value: {"client/3"}}
    out = mech.run_peer_sum(world.call(mech, tag="p", dropouts=dropouts), "client/0", inputs)
    assert out.contributors == ("client/1", "client/3", "client/4", "client/5")
    assert mech.last_report is not None
    err = float((out.total - sum(inputs[c] for c in out.contributors)).abs().max())
    assert err <= mech.last_report.error_bound
    transcript = world.transport.transcript
    down = [r for r in transcript.view("client/0") if r.stage == Stage.MASKED_INPUT.value]
    bits = mech.settings.ring_bits(5)
    assert len(down) == 1 and down[0].form is Form.MASKED and down[0].payload_bytes < 10 + 1000 * bits // 8 + 200
    up = [r for r in transcript.records(tag="p") if r.stage == Stage.MASKED_INPUT.value and r.receiver == "server"
          and r.sender != "client/0"]  # the target's own messages at this stage route shares down
    assert {r.sender for r in up} == {"client/1", "client/3", "client/4", "client/5"}
    assert {r.form for r in up} == {Form.MASKED}
    q = mech.settings.quantizer(5)
    plain = {q.quantize(v.numpy()).tobytes() for v in inputs.values()}
    assert not any(p in (r.payload or b"") for r in transcript.view("server") for p in plain)


def test_the_target_refuses_a_relay_sum_naming_clients_it_did_not_ask(world: World) -> None:
    from securefg.protocol.secure_sum import relay_sum

    def lying_forward(route, *, clients, bits, length):  # type: ignore[no-untyped-def]
        route.transport.receive(route.relay, tag=route.tag, round=route.round, stage=Stage.MASKED_INPUT.value)
        route.up_from_relay(Stage.MASKED_INPUT, relay_sum.encode_summed(["client/1", "client/1"], np.zeros(length, dtype=np.uint64), bits))

    mech = SecureSum(degree=5, threshold=2, relay_sum=True)
    original = relay_sum.forward_sum
    import securefg.protocol.secure_sum.mechanism as mechanism_module

    mechanism_module.forward_sum = lying_forward  # type: ignore[assignment]
    try:
        with pytest.raises(UnexpectedMessageError, match="names clients that were not asked, or twice"):
            mech.run_peer_sum(world.call(mech, tag="p"), "client/0", world.inputs(10, exclude="client/0"))
    finally:
        mechanism_module.forward_sum = original


def test_wrong_shape_inputs_are_refused_before_anything_is_sent(world: World) -> None:
    mech = SecureSum()
    inputs = world.inputs(5)
    inputs["client/1"] = torch.zeros(6, dtype=torch.float64)
    with pytest.raises(InvalidInputError, match=r"different lengths \[5, 6\]"):
        mech.run_aggregate(world.call(mech), inputs)
    with pytest.raises(InvalidInputError, match="must be a 1-D tensor"):
        mech.run_aggregate(world.call(mech), {"client/0": torch.zeros(2, 2), "client/1": torch.zeros(2, 2)})
    assert len(world.transport.transcript) == 0


def test_peer_sum_target_cannot_be_one_of_the_contributors(world: World) -> None:
    mech = SecureSum()
    with pytest.raises(InvalidInputError, match="must be a client outside the inputs"):
        mech.run_peer_sum(world.call(mech), "client/0", world.inputs(3))


def test_a_single_contributor_is_never_unmasked(world: World) -> None:
    mech = SecureSum(threshold=1)
    with pytest.raises(TooFewSurvivorsError, match="fewer than the 2 required"):
        mech.run_aggregate(world.call(mech), {"client/0": torch.ones(3, dtype=torch.float64)})


def test_unknown_and_invalid_parameters_are_listed_together() -> None:
    with pytest.raises(ConfigError, match=r"(?s)unknown parameter 'bitz'.*'clip' must be a positive number"):
        SecureSum(bitz=32, clip=-1.0)


def test_fedavg_stack_aggregates_like_plaintext_and_the_server_never_sees_an_update() -> None:
    from securefg.federation.exchange import Exchange
    from securefg.protocol.stack import ProtocolStack

    results = {}
    for stack_name in ("plaintext", "fedavg_secure_sum"):
        world = World(5)
        ex = Exchange(transport=world.transport, stack=ProtocolStack.load(stack_name), parties=world.parties)
        ex.round = 0
        rng = np.random.default_rng(3)
        updates = {c: {"w": torch.from_numpy(rng.normal(size=(4, 3))), "b": torch.from_numpy(rng.normal(size=3))} for c in world.clients}
        weights = {c: float(100 + 37 * i) for i, c in enumerate(world.clients)}
        results[stack_name] = ex.aggregate("fedavg/update", updates, weights=weights)
        if stack_name == "fedavg_secure_sum":
            forms = {r.form for r in world.transport.transcript.view("server") if r.tag == "fedavg/update"}
            assert forms == {Form.KEYS, Form.MASKED}
    for name in ("w", "b"):
        assert torch.allclose(results["plaintext"][name], results["fedavg_secure_sum"][name], atol=1e-9)


def test_fedavg_stack_binds_every_tag_explicitly() -> None:
    from securefg.protocol.stack import ProtocolStack

    stack = ProtocolStack.load("fedavg_secure_sum")
    patterns = {b.pattern: b.mechanism for b in stack.bindings}
    assert patterns == {"fedavg/model": "plaintext", "fedavg/update": "secure_sum", "fedavg/metrics": "secure_sum"}
