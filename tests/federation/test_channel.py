from dataclasses import replace

import pytest

from securefg.errors import AuthenticationError, ReplayError
from securefg.federation.channel import WireHeader
from securefg.federation.envelope import Envelope
from securefg.federation.transport import InProcessTransport


@pytest.fixture
def net():
    return InProcessTransport(["server", "client/0", "client/1"])


def test_delivers_authentic_envelope(net):
    net.send(Envelope("client/0", ("server",), 3, "t", b"payload"))
    (env,) = net.receive("server")
    assert (env.sender, env.round, env.tag, env.payload) == ("client/0", 3, "t", b"payload")


def test_wire_bytes_do_not_contain_the_plaintext_payload(net):
    net.send(Envelope("client/0", ("server",), 0, "t", b"very secret weights"))
    (wire,) = net.peek_wire("server")
    assert b"very secret weights" not in wire


def test_tampered_body_is_rejected(net):
    net.send(Envelope("client/0", ("server",), 0, "t", b"abc"))
    (wire,) = net.peek_wire("server")
    net.receive("server")
    bad = bytearray(wire)
    bad[-1] ^= 1
    net2 = net
    net2.inject("server", bytes(bad))
    with pytest.raises((AuthenticationError,), match="failed authentication|replayed"):
        net2.receive("server")


def test_tampered_header_round_is_rejected():
    net = InProcessTransport(["server", "client/0"])
    net.send(Envelope("client/0", ("server",), 0, "t", b"abc"))
    (wire,) = net.peek_wire("server")
    net._queues["server"].clear()
    header, end = WireHeader.decode(wire)
    forged = replace(header, round=1).encode() + wire[end:]  # move the payload to round 1
    net.inject("server", forged)
    with pytest.raises(AuthenticationError, match="failed authentication"):
        net.receive("server")


def test_replayed_envelope_is_rejected(net):
    net.send(Envelope("client/0", ("server",), 0, "t", b"abc"))
    (wire,) = net.peek_wire("server")
    net.receive("server")
    net.inject("server", wire)
    with pytest.raises(ReplayError, match="replayed"):
        net.receive("server")


def test_reordered_envelopes_are_rejected(net):
    net.send(Envelope("client/0", ("server",), 0, "t", b"first"))
    net.send(Envelope("client/0", ("server",), 0, "t", b"second"))
    _first, second = net.peek_wire("server")
    net._queues["server"].clear()
    net.inject("server", second)
    with pytest.raises(ReplayError, match="out of order"):
        net.receive("server")


def test_envelope_for_another_party_is_rejected(net):
    net.send(Envelope("client/0", ("server",), 0, "t", b"abc"))
    (wire,) = net.peek_wire("server")
    net.inject("client/1", wire)
    with pytest.raises(AuthenticationError, match="delivered to 'client/1'"):
        net.receive("client/1")


def test_party_cannot_send_as_someone_else(net):
    endpoint = net._endpoints["client/1"]
    with pytest.raises(AuthenticationError, match="cannot send as"):
        endpoint.seal(Envelope("client/0", ("server",), 0, "t", b"x"), "server")


def test_envelope_carries_content_or_error_never_both():
    with pytest.raises(ValueError, match="content or an error"):
        Envelope("client/0", ("server",), 0, "t", b"x", error="boom")


def test_reply_swaps_sender_and_receiver():
    req = Envelope("server", ("client/0",), 2, "t", b"q")
    rep = req.reply(b"a", sender="client/0")
    assert (rep.sender, rep.receivers, rep.round, rep.tag) == ("client/0", ("server",), 2, "t")
    with pytest.raises(ValueError, match="did not receive"):
        req.reply(b"a", sender="client/1")
