from dataclasses import replace

import pytest

from securefg.errors import AuthenticationError, CodecError, ReplayError
from securefg.federation.channel import WireHeader, length_prefixed, split_length_prefixed
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


# --- one bad wire costs one wire: the channel keeps its sequence state and the valid mail ------
def _wires(net, n, *, sender="client/0", tag="t"):
    """Send ``n`` honest envelopes and take their wires off the server's queue."""
    for k in range(n):
        net.send(Envelope(sender, ("server",), 0, tag, f"m{k}".encode()))
    wires = net.peek_wire("server")
    net._queues["server"].clear()
    return wires


def test_a_malformed_wire_is_dropped_alone_and_the_valid_mail_beside_it_still_opens(net):
    m0, m1 = _wires(net, 2)
    for wire in (m0, b"SFGE\x00garbage", m1):
        net.inject("server", wire)
    with pytest.raises(CodecError, match=r"wire 1 queued for 'server' is malformed .* dropped"):
        net.receive("server")
    assert [e.payload for e in net.receive("server")] == [b"m0", b"m1"]
    assert net.pending("server") == 0


def test_a_malformed_wire_does_not_lose_mail_left_queued_by_a_filter(net):
    net.send(Envelope("client/0", ("server",), 0, "other", b"kept"))
    net.inject("server", b"not a wire at all")
    net.send(Envelope("client/0", ("server",), 0, "t", b"next"))
    with pytest.raises(CodecError, match="malformed"):
        net.receive("server", tag="t")
    assert [(e.tag, e.payload) for e in net.receive("server")] == [("other", b"kept"), ("t", b"next")]


def test_a_tampered_envelope_is_named_and_the_next_one_from_its_sender_still_opens(net):
    m0, m1, m2 = _wires(net, 3)
    bad = bytearray(m1)
    bad[-1] ^= 1
    for wire in (m0, bytes(bad), m2):
        net.inject("server", wire)
    named = r"envelope 1 from 'client/0' \(round 0, tag 't'.*failed authentication"
    with pytest.raises(AuthenticationError, match=named):
        net.receive("server")
    assert [e.payload for e in net.receive("server")] == [b"m0", b"m2"]
    # the excused gap opens no replay hole: neither the honest m1 nor m2 again is accepted
    for old in (m1, m2):
        net.inject("server", old)
        with pytest.raises(ReplayError, match="replayed"):
            net.receive("server")
    net.send(Envelope("client/0", ("server",), 0, "t", b"m3"))
    assert [e.payload for e in net.receive("server")] == [b"m3"]


def test_a_replayed_envelope_beside_valid_mail_is_dropped_alone(net):
    (m0, m1) = _wires(net, 2)
    net.inject("server", m0)
    assert [e.payload for e in net.receive("server")] == [b"m0"]
    net.inject("server", m0)
    net.inject("server", m1)
    with pytest.raises(ReplayError, match=r"envelope 0 from 'client/0' .*replayed"):
        net.receive("server")
    assert [e.payload for e in net.receive("server")] == [b"m1"]


def test_a_forged_wire_does_not_advance_the_expected_sequence_number(net):
    (m0,) = _wires(net, 1)
    header, end = WireHeader.decode(m0)
    forged = replace(header, seq=0).encode() + bytes(len(m0) - end)  # right header, no valid tag
    net.inject("server", forged)
    net.inject("server", m0)
    with pytest.raises(AuthenticationError, match="envelope 0 from 'client/0'.*failed authentication"):
        net.receive("server")
    assert [e.payload for e in net.receive("server")] == [b"m0"]  # still sequence number 0


def test_a_gap_that_no_rejected_wire_explains_is_still_out_of_order(net):
    _m0, _m1, m2 = _wires(net, 3)
    bad = bytearray(_m0)
    bad[-1] ^= 1
    net.inject("server", bytes(bad))  # excuses sequence number 0 only
    net.inject("server", m2)
    with pytest.raises(AuthenticationError, match="failed authentication"):
        net.receive("server")
    with pytest.raises(ReplayError, match="out of order"):
        net.receive("server")


def test_fields_read_from_an_offset_end_at_an_index_into_the_whole_buffer() -> None:
    data = b"HEAD" + length_prefixed(b"ab", b"") + b"payload"
    fields, end = split_length_prefixed(data, 2, start=4)
    assert fields == [b"ab", b""] and data[end:] == b"payload"
    with pytest.raises(CodecError, match="truncated"):
        split_length_prefixed(data[:9], 2, start=4)
