"""Stage 5, Unmask: fcp r3 claim checks, one share kind per peer, server response checks."""

from __future__ import annotations

import pytest

from securefg.errors import InvalidClaimError, UnexpectedMessageError
from securefg.protocol.secure_sum.client import Done
from securefg.protocol.secure_sum.constants import AbortReason, ShareKind, Stage
from securefg.protocol.secure_sum.messages import UnmaskRequest, decode_unmask_shares

from .conftest import Harness

ALL = ("client/0", "client/1", "client/2", "client/3", "client/4")


@pytest.fixture
def ready(harness: Harness) -> Harness:
    harness.advertise()
    harness.route_shares(harness.share())
    return harness


def _ask(h: Harness, survivors: tuple[str, ...], dead: tuple[str, ...]):  # type: ignore[no-untyped-def]
    return h.deliver("client/0", Stage.UNMASK, UnmaskRequest(survivors, dead).encode())


def test_unmask_reveals_self_mask_shares_of_survivors_and_key_shares_of_the_dead(ready: Harness) -> None:
    assert isinstance(_ask(ready, ALL[:4], ("client/4",)), Done)
    (payload,) = ready.replies(Stage.UNMASK).values()
    rows = {(pid, kind) for pid, kind, _ in decode_unmask_shares(payload)}
    assert rows == {
        ("client/1", ShareKind.SELF_MASK), ("client/2", ShareKind.SELF_MASK),
        ("client/3", ShareKind.SELF_MASK), ("client/4", ShareKind.S_KEY),
    }


def test_unmask_aborts_if_server_lists_same_client_twice(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="lists 'client/1' twice") as err:
        _ask(ready, (*ALL, "client/1"), ())
    assert err.value.reason is AbortReason.DUPLICATE_ID


def test_unmask_aborts_if_server_lists_this_client_as_dead(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="lists this client as dead") as err:
        _ask(ready, ALL[1:], ("client/0",))
    assert err.value.reason is AbortReason.SELF_LISTED_AS_DEAD


def test_unmask_aborts_if_a_client_is_listed_both_dead_and_alive(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match=r"\['client/3'\] listed both dead and alive") as err:
        _ask(ready, ALL, ("client/3",))
    assert err.value.reason is AbortReason.DEAD_AND_ALIVE


def test_unmask_aborts_if_server_names_an_unknown_client(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match=r"unexpected ids \['client/8'\]"):
        _ask(ready, (*ALL, "client/8"), ())


def test_unmask_aborts_if_a_live_peer_is_left_unaccounted_for(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match=r"peers \['client/4'\] are neither dead nor alive"):
        _ask(ready, ALL[:4], ())


def test_unmask_aborts_if_a_peer_dead_before_sharing_is_listed_dead() -> None:
    h = Harness()
    h.advertise()
    bundles = h.share()
    bundles.pop("client/4")  # client/4 "dropped" before its shares reached anyone
    h.route_shares(bundles)
    with pytest.raises(InvalidClaimError, match=r"\['client/4'\] were never live peers") as err:
        _ask(h, ALL[:4], ("client/4",))
    assert err.value.reason is AbortReason.ALREADY_DEAD


def test_unmask_aborts_below_the_survivor_threshold(ready: Harness) -> None:
    with pytest.raises(InvalidClaimError, match="2 survivors, fewer than 3"):
        _ask(ready, ("client/0", "client/1"), ("client/2", "client/3", "client/4"))


def test_unmask_answers_only_once(ready: Harness) -> None:
    _ask(ready, ALL, ())
    with pytest.raises(UnexpectedMessageError, match="is at Done and does not accept"):
        _ask(ready, ALL[:4], ("client/4",))
