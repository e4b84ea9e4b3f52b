"""Relay items are tied to their senders: a server (or shuffler) swapping in an item it sealed
itself to the recipient's public key is refused, by slot when shuffled, by sender when not."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from securefg.errors import AuthenticationError, ProtocolError, SenderAuthenticationError
from securefg.federation.party import SERVER, SHUFFLER, client_id
from securefg.protocol.mechanism import ExchangeCall
from securefg.protocol.relay import mailbox, membership, sealed_relay, sealing_directory
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs
from securefg.protocol.relay.constants import item_binding
from securefg.protocol.relay.mailbox import Mailbox, pseudonym_key, pseudonym_of
from securefg.protocol.relay.padding import frame
from securefg.protocol.relay.sealed_box import SealingKey, seal
from securefg.protocol.relay.sealed_relay import SealedRelay

from .conftest import build_federation

RELAY = {"r": {"mechanism": "sealed_relay"}}
ONION = {"r": {"mechanism": "sealed_relay", "params": {"shuffler": True}}}
MAILBOX = {"m": {"mechanism": "mailbox"}}
VICTIM = client_id(1)


def _items(n: int) -> dict[str, bytes]:
    return {client_id(k): f"model of client {k}".encode() for k in range(n)}


class _SwappingServer(SealedRelay):
    """Replaces the item in slot 0 of ``client/1``'s bundle with one it sealed itself, to the
    recipient's public sealing key (which an attacker may well hold: it is public)."""

    def run_relay(self, call: ExchangeCall, items: Mapping[str, bytes], *, exclude_self: bool,
                  shuffle: bool) -> dict[str, list[bytes]]:
        self.call = call
        return super().run_relay(call, items, exclude_self=exclude_self, shuffle=shuffle)

    def _server_route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = super()._server_route(uploads, targets, shuffle=shuffle)
        public = sealing_directory.own_key(self.call, VICTIM).public_bytes
        bundles[VICTIM][0] = seal(public, frame(b"the server's own model", "pow2"),
                                  context=item_binding(self.call, VICTIM, b"item"))
        return bundles


class _MemberSwappingServer(_SwappingServer):
    """Puts an item that client/0 really sealed to client/1 in another sender's slot."""

    def _server_route(self, uploads, targets, *, shuffle):  # type: ignore[no-untyped-def]
        bundles = SealedRelay._server_route(self, uploads, targets, shuffle=shuffle)
        body = frame(b"client/0 again", "pow2")
        bundles[VICTIM][1] = sealed_relay.seal_item(self.call, client_id(0), VICTIM, body, shuffle=shuffle)
        return bundles


def _call(fed, round: int = 0, tag: str = "r") -> ExchangeCall:  # type: ignore[no-untyped-def]
    return ExchangeCall(transport=fed.transport, parties=fed.parties, round=round, tag=tag)


def test_a_server_that_swaps_in_an_item_it_sealed_itself_is_refused_by_slot() -> None:
    fed = build_federation(3, RELAY)
    with pytest.raises(SenderAuthenticationError,
                       match=r"client/1 refused the 'r' item in slot 0 .* not an item from a relay member") as info:
        _SwappingServer().run_relay(_call(fed), _items(3), exclude_self=True, shuffle=True)
    assert isinstance(info.value, AuthenticationError)
    assert (info.value.slot, info.value.sender) == (0, None)  # shuffled: nobody may know the sender


def test_unshuffled_a_swapped_item_is_refused_naming_its_sender() -> None:
    fed = build_federation(3, RELAY)
    with pytest.raises(SenderAuthenticationError, match=r"slot 0 .* not an item from client/0") as info:
        _SwappingServer().run_relay(_call(fed), _items(3), exclude_self=True, shuffle=False)
    assert (info.value.slot, info.value.sender) == (0, client_id(0))


def test_unshuffled_another_members_item_in_a_senders_slot_is_refused() -> None:
    fed = build_federation(3, RELAY)
    with pytest.raises(SenderAuthenticationError, match=r"slot 1 .* not an item from client/2"):
        _MemberSwappingServer().run_relay(_call(fed), _items(3), exclude_self=True, shuffle=False)


@pytest.mark.parametrize("shuffle", [True, False])
def test_honest_relays_still_deliver_every_item(shuffle: bool) -> None:
    fed = build_federation(4, RELAY)
    items = _items(4)
    got = fed.exchange.relay("r", items, shuffle=shuffle)
    for r in fed.clients:
        want = [v for s, v in sorted(items.items()) if s != r]
        assert (got[r] if not shuffle else sorted(got[r])) == (want if not shuffle else sorted(want))


@pytest.fixture
def forged_onion(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The server replaces client/0's first onion with one it built: sealed to the shuffler,
    holding an inner box it sealed to that onion's recipient."""
    real = sealed_relay.shuffler_route

    def route(call, uploads, targets):  # type: ignore[no-untyped-def]
        r = targets[client_id(0)][0]
        inner = seal(sealing_directory.own_key(call, r).public_bytes, frame(b"forged", "pow2"),
                     context=item_binding(call, r, b"item"))
        onion = seal(sealing_directory.own_key(call, SHUFFLER).public_bytes, pack_blobs([r.encode(), inner]),
                     context=item_binding(call, SHUFFLER, b"onion"))
        onions = unpack_blobs(uploads[client_id(0)])
        return real(call, {**uploads, client_id(0): pack_blobs([onion, *onions[1:]])}, targets)

    monkeypatch.setattr(sealed_relay, "shuffler_route", route)
    yield


@pytest.mark.usefixtures("forged_onion")
def test_through_the_shuffler_a_forged_onion_is_refused_by_its_recipient() -> None:
    fed = build_federation(3, ONION, extra=[SHUFFLER])
    with pytest.raises(SenderAuthenticationError, match="not an item from a relay member"):
        fed.exchange.relay("r", _items(3))


def test_a_recipient_never_sends_its_membership_secret_to_the_server() -> None:
    fed = build_federation(2, RELAY)
    with pytest.raises(ProtocolError, match=r"asked to send its relay membership secret to \['server'\]"):
        membership.publish(_call(fed), client_id(0), [client_id(1), SERVER])
    assert fed.transport.pending(SERVER) == 0 and fed.transport.pending(client_id(1)) == 0


# ---------------------------------------------------------------------------------- mailbox
def test_a_shuffler_that_swaps_in_an_input_it_sealed_to_the_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fed = build_federation(3, MAILBOX, extra=[SHUFFLER])
    real = mailbox.mix_uploads

    def mix(call, got, *, name="mailbox"):  # type: ignore[no-untyped-def]
        boxes = unpack_blobs(real(call, got, name=name))
        mine = SealingKey()  # a pseudonym of the shuffler's own
        boxes[0] = seal(sealing_directory.own_key(call, SERVER).public_bytes,
                        pack_blobs([mine.public_bytes, frame(b"shuffler's input", "pow2")]),
                        context=item_binding(call, SERVER, b"mailbox/collect"))
        return pack_blobs(boxes)

    monkeypatch.setattr(mailbox, "mix_uploads", mix)
    refused = r"server refused the 'm' item in slot 0 .* no client sealed it"
    with pytest.raises(SenderAuthenticationError, match=refused):
        Mailbox().run_collect(_call(fed, tag="m"), _items(3))


def test_a_reply_the_server_did_not_seal_is_refused_naming_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    fed = build_federation(3, MAILBOX, extra=[SHUFFLER])
    mech, call = Mailbox(), _call(fed, tag="m")
    nyms = mech.run_collect(call, _items(3))
    real = mailbox.route_replies

    def route(call, boxes, *, name="mailbox"):  # type: ignore[no-untyped-def]
        out = real(call, boxes, name=name)
        owner, _ = out[0]
        key = pseudonym_key(call, owner)  # the strongest shuffler: it even knows the pseudonym key
        nym = pseudonym_of(key.public_bytes)
        out[0] = (owner, seal(key.public_bytes, frame(b"forged weights", "pow2"),
                              context=item_binding(call, nym, b"mailbox/reply")))
        return out

    monkeypatch.setattr(mailbox, "route_replies", route)
    with pytest.raises(SenderAuthenticationError, match="reply of round 0: not sealed by server") as info:
        mech.run_reply(call, {nym: b"weights for " + nym.encode() for nym in nyms})
    assert info.value.sender == SERVER


def test_honest_mailbox_round_trip_still_works() -> None:
    fed = build_federation(3, MAILBOX, extra=[SHUFFLER])
    mech, call = Mailbox(), _call(fed, tag="m")
    items = _items(3)
    nyms = mech.run_collect(call, items)
    assert sorted(nyms.values()) == sorted(items.values())
    back = mech.run_reply(call, {nym: b"reply:" + payload for nym, payload in nyms.items()})
    assert back == {c: b"reply:" + v for c, v in items.items()}
