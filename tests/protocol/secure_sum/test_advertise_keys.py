"""Stage 1, AdvertiseKeys: client checks of the server's configuration, server key checks."""

from __future__ import annotations

import pytest

from securefg.errors import InvalidClaimError, TooFewSurvivorsError, UnexpectedMessageError
from securefg.protocol.secure_sum.client import ShareKeys
from securefg.protocol.secure_sum.constants import AbortReason, ClientDropReason, Stage
from securefg.protocol.secure_sum.context import AggregatorContext
from securefg.protocol.secure_sum.messages import PeerKeys, encode_keys
from securefg.protocol.secure_sum.route import Delivery
from securefg.protocol.secure_sum.server import AdvertiseKeys
from securefg.protocol.secure_sum.server import ShareKeys as ServerShareKeys

from .conftest import Harness


def test_advertise_keys_sends_two_fresh_32_byte_keys(harness: Harness) -> None:
    nxt = harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0"))
    assert isinstance(nxt, ShareKeys)
    (payload,) = harness.replies(Stage.ADVERTISE_KEYS).values()
    keys = harness.contexts["client/0"].own_keys
    assert keys is not None and payload == encode_keys(keys)
    assert len(keys.c_pk) == len(keys.s_pk) == 32 and keys.c_pk != keys.s_pk and keys.sign_pk == b""


def test_advertise_keys_aborts_if_server_lists_same_client_twice(harness: Harness) -> None:
    clients = (*harness.clients, "client/1")
    with pytest.raises(InvalidClaimError, match="lists 'client/1' twice") as err:
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", clients=clients))
    assert err.value.reason is AbortReason.DUPLICATE_ID


def test_advertise_keys_aborts_if_the_client_list_omits_this_client(harness: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="does not include this client"):
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", clients=tuple(harness.clients[1:])))


def test_advertise_keys_aborts_if_a_neighbour_is_unknown(harness: Harness) -> None:
    nbrs = ("client/1", "client/2", "client/3", "client/99")
    with pytest.raises(InvalidClaimError, match=r"unexpected ids \['client/99'\]"):
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", neighbours=nbrs))


def test_advertise_keys_aborts_if_the_client_is_its_own_neighbour(harness: Harness) -> None:
    nbrs = ("client/0", "client/1", "client/2", "client/3")
    with pytest.raises(InvalidClaimError, match="its own neighbour"):
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", neighbours=nbrs))


def test_advertise_keys_aborts_if_the_threshold_differs_from_the_stack(harness: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="threshold 1 .* does not match") as err:
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", threshold=1))
    assert err.value.reason is AbortReason.CONFIG_MISMATCH


def test_advertise_keys_aborts_if_the_vector_length_differs_from_the_input(harness: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="vector length 9"):
        harness.deliver("client/0", Stage.ADVERTISE_KEYS, harness.config("client/0", length=9))


def test_advertise_keys_rejects_a_message_of_a_later_stage(harness: Harness) -> None:
    with pytest.raises(UnexpectedMessageError, match="does not accept a 'secure_sum/unmask' message"):
        harness.deliver("client/0", Stage.UNMASK, harness.config("client/0"))


def _server(h: Harness) -> AggregatorContext:
    graph = {c: frozenset(set(h.clients) - {c}) for c in h.clients}
    return AggregatorContext(
        pid="server", info=h.info, clients=tuple(h.clients), graph=graph, degree=h.degree,
        threshold=h.threshold, length=h.m, quantizer=h.settings.quantizer(len(h.clients)),
    )


def _keys(i: int) -> PeerKeys:
    return PeerKeys(f"client/{i}", bytes([i]) * 32, bytes([100 + i]) * 32)


def test_server_drops_clients_that_reuse_a_key_and_proceeds() -> None:
    harness = Harness(threshold=2)
    ctx = _server(harness)
    stage = AdvertiseKeys(ctx, harness.clients)
    msgs = [Delivery(c, Stage.ADVERTISE_KEYS, encode_keys(_keys(i))) for i, c in enumerate(harness.clients)]
    stolen = _keys(4)
    msgs[4] = Delivery("client/4", Stage.ADVERTISE_KEYS, encode_keys(PeerKeys("client/4", _keys(3).c_pk, stolen.s_pk)))
    nxt = stage.handle(msgs)
    assert isinstance(nxt, ServerShareKeys)
    assert ctx.drops == {"client/3": ClientDropReason.DUPLICATE_KEY, "client/4": ClientDropReason.DUPLICATE_KEY}
    assert set(ctx.told_keys) == {"client/0", "client/1", "client/2"}


def test_server_drops_malformed_keys_and_aborts_below_threshold(harness: Harness) -> None:
    ctx = _server(harness)
    msgs = [Delivery(c, Stage.ADVERTISE_KEYS, b"garbage") for c in harness.clients[:3]]
    msgs += [Delivery(c, Stage.ADVERTISE_KEYS, encode_keys(_keys(i + 3))) for i, c in enumerate(harness.clients[3:])]
    with pytest.raises(TooFewSurvivorsError, match="fewer than the 3 required"):
        AdvertiseKeys(ctx, harness.clients).handle(msgs)
    assert ctx.drops["client/0"] is ClientDropReason.MALFORMED_MESSAGE


def test_server_rejects_a_message_from_a_party_outside_the_round(harness: Harness) -> None:
    with pytest.raises(UnexpectedMessageError, match="'client/9' is not a client of this round"):
        AdvertiseKeys(_server(harness), harness.clients).handle([Delivery("client/9", Stage.ADVERTISE_KEYS, b"")])


def test_server_peels_clients_left_with_fewer_than_t_live_neighbours() -> None:
    from securefg.protocol.secure_sum.server import peel

    graph = {"a": frozenset("bc"), "b": frozenset("ac"), "c": frozenset("abd"), "d": frozenset("c")}
    assert peel({"a", "b", "c", "d"}, graph, 2) == {"a", "b", "c"}
    assert peel({"a", "b", "c", "d"}, graph, 3) == set()
