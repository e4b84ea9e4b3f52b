"""One party's end of a networked transport: the same sealing and checks as in process."""

import pytest

from securefg.errors import AuthenticationError, CodecError, ProtocolError, ReplayError
from securefg.federation.channel import ChannelIdentity
from securefg.federation.envelope import Envelope
from securefg.federation.party_transport import PartyTransport
from securefg.federation.transport import InProcessTransport

SESSION = b"s" * 16


def _pair():
    a, b = ChannelIdentity("server"), ChannelIdentity("client/0")
    directory = {"server": a.public_bytes, "client/0": b.public_bytes}
    return (PartyTransport(a, session=SESSION, directory=directory),
            PartyTransport(b, session=SESSION, directory=directory))


def test_envelopes_cross_between_two_party_ends_and_are_recorded_by_the_sender():
    srv, cli = _pair()
    srv.send(Envelope("server", ("client/0",), 2, "t", b"hello", stage="x"))
    wires = srv.take_outbox("client/0")
    assert len(wires) == 1 and srv.take_outbox("client/0") == []
    cli.deliver(wires)
    (env,) = cli.receive("client/0", tag="t", round=2)
    assert (env.sender, env.payload, env.stage) == ("server", b"hello", "x")
    assert [(r.sender, r.receiver, r.payload_bytes) for r in srv.transcript] == [("server", "client/0", 5)]
    assert len(cli.transcript) == 0


def test_wire_sizes_equal_the_in_process_transport_for_the_same_envelope():
    srv, _ = _pair()
    ip = InProcessTransport(["server", "client/0"], session=SESSION)
    env = Envelope("server", ("client/0",), 0, "fedavg/model", b"x" * 1000)
    srv.send(env)
    ip.send(env)
    assert [r.wire_bytes for r in srv.transcript] == [r.wire_bytes for r in ip.transcript]


def test_a_party_cannot_send_as_another_or_read_another_inbox():
    srv, cli = _pair()
    with pytest.raises(ProtocolError, match="cannot send an envelope as"):
        cli.send(Envelope("server", ("client/0",), 0, "t", b""))
    with pytest.raises(ProtocolError, match="cannot read"):
        cli.receive("server")
    with pytest.raises(ProtocolError, match="addressed to"):
        srv.send(Envelope("server", ("client/0",), 0, "t", b"a"))
        srv.deliver(srv.take_outbox("client/0"))


def test_a_tampered_wire_is_rejected():
    srv, cli = _pair()
    srv.send(Envelope("server", ("client/0",), 0, "t", b"payload"))
    (wire,) = srv.take_outbox("client/0")
    cli.deliver([wire[:-1] + bytes([wire[-1] ^ 1])])
    with pytest.raises(AuthenticationError):
        cli.receive("client/0")


def test_a_directory_without_the_partys_own_key_is_refused():
    a = ChannelIdentity("server")
    with pytest.raises(AuthenticationError, match="own public key"):
        PartyTransport(a, session=SESSION, directory={"server": ChannelIdentity("server").public_bytes})


def test_a_replayed_wire_is_rejected():
    srv, cli = _pair()
    srv.send(Envelope("server", ("client/0",), 0, "t", b"one"))
    (wire,) = srv.take_outbox("client/0")
    cli.deliver([wire])
    assert [e.payload for e in cli.receive("client/0")] == [b"one"]
    cli.deliver([wire])
    with pytest.raises(ReplayError):
        cli.receive("client/0")


def test_a_malformed_wire_in_a_delivered_batch_costs_only_itself():
    srv, cli = _pair()
    for k in range(2):
        srv.send(Envelope("server", ("client/0",), 0, "t", f"m{k}".encode()))
    m0, m1 = srv.take_outbox("client/0")
    with pytest.raises(CodecError, match=r"wire 1 of the batch for 'client/0' is malformed"):
        cli.deliver([m0, b"\x00junk", m1])
    assert [e.payload for e in cli.receive("client/0")] == [b"m0", b"m1"]
    srv.send(Envelope("server", ("client/0",), 0, "t", b"m2"))  # the channel goes on in order
    cli.deliver(srv.take_outbox("client/0"))
    assert [e.payload for e in cli.receive("client/0")] == [b"m2"]


def test_a_tampered_wire_is_dropped_and_the_next_honest_one_opens():
    srv, cli = _pair()
    for k in range(2):
        srv.send(Envelope("server", ("client/0",), 0, "t", f"m{k}".encode()))
    m0, m1 = srv.take_outbox("client/0")
    cli.deliver([m0[:-1] + bytes([m0[-1] ^ 1]), m1])
    with pytest.raises(AuthenticationError, match="envelope 0 from 'server'"):
        cli.receive("client/0")
    assert [e.payload for e in cli.receive("client/0")] == [b"m1"]
