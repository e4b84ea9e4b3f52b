"""securefg.api's sealed relay: shuffled and unshuffled, through a shuffler, and a server that cheats."""

from __future__ import annotations

import pytest

from securefg.api import (
    ProtocolError,
    RelayConfig,
    RelayMember,
    RelayServer,
    RelayShuffler,
    SenderAuthenticationError,
)
from securefg.api._wire import frame, unframe
from securefg.protocol.relay.blob_list import pack_blobs, unpack_blobs

SESSION = bytes(range(16))
IDS = ["client/0", "client/1", "client/2", "client/3"]


def members(config: RelayConfig) -> dict[str, RelayMember]:
    out = {c: RelayMember(config, pid=c, session=SESSION) for c in IDS}
    for r in IDS:  # membership secrets, once per run (they may travel through the server)
        for s in IDS:
            if s != r:
                out[s].accept_membership(out[r].membership_for(sender=s, sender_public_key=out[s].public_key),
                                         recipient=r, recipient_public_key=out[r].public_key)
    return out


def uploads(m: dict[str, RelayMember], *, shuffle: bool, shuffler: bytes | None = None) -> dict[str, bytes]:
    keys = {c: p.public_key for c, p in m.items()}
    return {s: m[s].seal(f"item of {s}".encode(), round=2, tag="t",
                         recipients={r: k for r, k in keys.items() if r != s}, shuffle=shuffle,
                         shuffler_public_key=shuffler) for s in m}


TARGETS = {s: [r for r in IDS if r != s] for s in IDS}


@pytest.mark.parametrize("shuffle", [True, False])
def test_every_recipient_opens_exactly_the_others_items(shuffle: bool) -> None:
    m = members(RelayConfig())
    bundles = RelayServer(RelayConfig()).route(uploads(m, shuffle=shuffle), targets=TARGETS, shuffle=shuffle)
    for r in IDS:
        senders = {s: m[s].public_key for s in IDS if s != r}
        got = m[r].open(bundles[r], round=2, tag="t", senders=senders, shuffle=shuffle)
        assert sorted(got) == sorted(f"item of {s}".encode() for s in senders)
        if not shuffle:  # in sender order, each checked against its sender
            assert got == [f"item of {s}".encode() for s in sorted(senders)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_an_item_the_server_swaps_in_is_refused(shuffle: bool) -> None:
    m = members(RelayConfig())
    bundles = RelayServer(RelayConfig()).route(uploads(m, shuffle=shuffle), targets=TARGETS, shuffle=shuffle)
    outsider = RelayMember(RelayConfig(), pid="server", session=SESSION)  # holds client/0's public key, no secret
    forged = outsider.seal(b"forged", round=2, tag="t", recipients={"client/0": m["client/0"].public_key},
                           shuffle=False)
    boxes = unpack_blobs(unframe(bundles["client/0"], what="x")[1])
    boxes[0] = unpack_blobs(unframe(forged, what="x")[1])[1]
    senders = {s: m[s].public_key for s in IDS if s != "client/0"}
    with pytest.raises(SenderAuthenticationError, match="slot 0"):
        m["client/0"].open(frame("relay/forward", pack_blobs(boxes)), round=2, tag="t", senders=senders,
                           shuffle=shuffle)


def test_a_bundle_from_another_round_is_refused() -> None:
    m = members(RelayConfig())
    bundles = RelayServer(RelayConfig()).route(uploads(m, shuffle=True), targets=TARGETS)
    with pytest.raises(SenderAuthenticationError):
        m["client/1"].open(bundles["client/1"], round=3, tag="t",
                           senders={s: m[s].public_key for s in IDS if s != "client/1"})


def test_items_through_a_shuffler_reach_their_recipients() -> None:
    config = RelayConfig(shuffler=True)
    m = members(config)
    shuffler = RelayShuffler(session=SESSION)
    server = RelayServer(config)
    batch = server.to_shuffler(uploads(m, shuffle=True, shuffler=shuffler.public_key), targets=TARGETS)
    bundles = server.from_shuffler(shuffler.shuffle(batch, round=2, tag="t", targets=TARGETS), targets=TARGETS)
    got = m["client/2"].open(bundles["client/2"], round=2, tag="t",
                             senders={s: m[s].public_key for s in IDS if s != "client/2"})
    assert sorted(got) == [f"item of {s}".encode() for s in ("client/0", "client/1", "client/3")]
    with pytest.raises(Exception, match="to_shuffler"):
        server.route({}, targets=TARGETS)


def test_the_server_refuses_an_upload_addressed_to_others_than_its_targets() -> None:
    m = members(RelayConfig())
    ups = uploads(m, shuffle=True)
    with pytest.raises(ProtocolError, match="client/0 addressed its sealed items to"):
        RelayServer(RelayConfig()).route(ups, targets={**TARGETS, "client/0": ["client/1"]})


def test_a_config_from_a_stack_file(tmp_path) -> None:
    stack = tmp_path / "s.toml"
    stack.write_text('name = "s"\n[tags."r"]\nmechanism = "sealed_relay"\nparams = { padding = 64 }\n')
    assert RelayConfig.from_stack(stack, "r").padding == 64
