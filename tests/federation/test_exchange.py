import pytest
import torch

from securefg.errors import InvalidInputError, UnboundTagError
from securefg.federation.exchange import Exchange
from securefg.federation.party import SERVER, Party, client_id
from securefg.federation.transport import InProcessTransport
from securefg.protocol.stack import ProtocolStack


def _ex(n=3, stack="plaintext"):
    parties = {SERVER: Party(SERVER), **{client_id(k): Party(client_id(k)) for k in range(n)}}
    t = InProcessTransport(parties)
    ex = Exchange(transport=t, stack=ProtocolStack.load(stack) if isinstance(stack, str) else stack, parties=parties)
    ex.round = 0
    return ex


def test_weighted_mean_aggregate_matches_direct_computation():
    ex = _ex(4)
    g = torch.Generator().manual_seed(1)
    xs = {c: {"a": torch.randn(3, 2, generator=g), "b": torch.randn(4, generator=g)} for c in ex.clients}
    w = {c: float(i + 1) for i, c in enumerate(ex.clients)}
    out = ex.aggregate("u", xs, weights=w)
    for k in ("a", "b"):
        expected = sum(w[c] * xs[c][k].double() for c in ex.clients) / sum(w.values())
        assert torch.allclose(out[k].double(), expected, atol=1e-6)
        assert out[k].shape == xs["client/0"][k].shape


def test_received_broadcast_is_a_copy_not_a_reference():
    ex = _ex(2)
    w = torch.zeros(5)
    got = ex.broadcast("m", {"w": w})
    got["client/0"]["w"] += 1.0
    assert torch.equal(w, torch.zeros(5))
    assert got["client/0"]["w"].data_ptr() != got["client/1"]["w"].data_ptr()


def test_method_cannot_reach_another_partys_state_except_through_envelopes():
    ex = _ex(2)
    secret = torch.randn(4)
    ex.parties["client/0"].state["secret"] = secret
    # The only path from client/0 to the server is an exchange; what arrives is a decoded copy.
    got = ex.send("s", {"x": secret}, sender="client/0", receiver=SERVER)
    assert torch.equal(got["x"], secret) and got["x"].data_ptr() != secret.data_ptr()
    assert "secret" not in ex.parties[SERVER].state
    # and every byte that crossed is in the transcript
    assert [(r.sender, r.receiver, r.tag) for r in ex.transport.transcript] == [("client/0", SERVER, "s")]


def test_aggregate_rejects_nan_inputs():
    ex = _ex(2)
    xs = {c: {"a": torch.tensor([1.0, float("nan")])} for c in ex.clients}
    with pytest.raises(InvalidInputError, match="NaN or Inf"):
        ex.aggregate("u", xs)


def test_aggregate_rejects_mismatched_shapes():
    ex = _ex(2)
    xs = {"client/0": {"a": torch.ones(3)}, "client/1": {"a": torch.ones(4)}}
    with pytest.raises(InvalidInputError, match="differ from the others"):
        ex.aggregate("u", xs)


def test_unbound_tag_is_an_error_never_plaintext():
    stack = ProtocolStack.from_dict({"name": "only-model", "tags": {"fedavg/model": {"mechanism": "plaintext"}}})
    ex = _ex(2, stack)
    with pytest.raises(UnboundTagError, match="'fedavg/update' is not bound"):
        ex.aggregate("fedavg/update", {c: {"a": torch.ones(1)} for c in ex.clients})


def test_peer_sum_target_learns_sum_of_peers_only():
    ex = _ex(3)
    xs = {"client/1": {"a": torch.ones(2)}, "client/2": {"a": 2 * torch.ones(2)}}
    out = ex.peer_sum("p", "client/0", xs)
    assert torch.equal(out["a"], 3 * torch.ones(2))
    with pytest.raises(InvalidInputError, match="own peer sum"):
        ex.peer_sum("p", "client/1", xs)


def test_tag_kind_cannot_change():
    ex = _ex(2)
    ex.broadcast("t", {"a": torch.ones(1)})
    with pytest.raises(InvalidInputError, match="used as 'broadcast'"):
        ex.aggregate("t", {c: {"a": torch.ones(1)} for c in ex.clients})


def test_relay_excludes_self_and_delivers_everything_else():
    ex = _ex(3)
    out = ex.relay("r", {c: c.encode() for c in ex.clients})
    for c, items in out.items():
        assert sorted(items) == sorted(o.encode() for o in ex.clients if o != c)


def _wire_stack(dtype):
    return ProtocolStack.from_dict({"name": "w", "tags": {"*": {"mechanism": "plaintext", "wire_dtype": dtype}}})


@pytest.mark.parametrize(("dtype", "itemsize", "tol"), [("float32", 4, 1e-7), ("float16", 2, 1e-3), ("bfloat16", 2, 4e-3)])
def test_wire_dtype_shrinks_a_broadcast_and_the_receiver_gets_its_own_dtype_back(dtype, itemsize, tol):
    x = torch.linspace(-3, 3, 1000, dtype=torch.float64)
    ex = _ex(2, _wire_stack(dtype))
    got = ex.broadcast("m", {"x": x, "n": torch.tensor([7])})
    assert got["client/0"]["x"].dtype == torch.float64 and torch.equal(got["client/0"]["n"], torch.tensor([7]))
    assert float((got["client/0"]["x"] - x).abs().max()) <= tol * 3
    sizes = {r.payload_bytes for r in ex.transport.transcript}
    assert len(sizes) == 1 and 1000 * itemsize < sizes.pop() < 1000 * itemsize + 100


def test_wire_dtype_refuses_values_beyond_its_range_and_unknown_names():
    ex = _ex(2, _wire_stack("float16"))
    with pytest.raises(InvalidInputError, match="beyond the range of wire_dtype 'float16'"):
        ex.broadcast("m", {"x": torch.tensor([1e5])})
    with pytest.raises(Exception, match="'wire_dtype' must be one of"):
        _wire_stack("float8")


def test_a_plain_sum_sends_no_weight_entry_so_the_clip_need_only_cover_the_values():
    ex = _ex(2)
    xs = {c: {"a": torch.ones(5)} for c in ex.clients}
    assert torch.equal(ex.aggregate("s", xs, mean=False)["a"], torch.full((5,), 2.0))
    sizes = {r.payload_bytes for r in ex.transport.transcript}
    ex.aggregate("m", xs)  # a mean appends each client's weight: one value more
    assert {r.payload_bytes for r in ex.transport.transcript if r.tag == "m"} == {sizes.pop() + 8}
