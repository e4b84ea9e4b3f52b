"""Fuzz the sealed wire format (securefg/federation/channel.py) and envelopes (envelope.py).

Strategies: envelopes with arbitrary routing text, rounds, stages, forms, payloads or error
reports, sealed by a real :class:`ChannelEndpoint`; arbitrary bytes; sealed wires mutated
(bit flips, length fields set to edge integers, truncation, insertion); headers re-encoded with a
field changed. Properties: a header parses or raises ``CodecError``; a wire opens or raises
``CodecError`` / ``AuthenticationError`` (``ReplayError`` included); any change to a sealed wire
is refused and leaves the channel able to open the genuine wire, exactly once.
"""

from __future__ import annotations

import struct
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from securefg.errors import AuthenticationError, CodecError, ReplayError
from securefg.federation.channel import (
    WIRE_MAGIC,
    ChannelEndpoint,
    ChannelIdentity,
    WireHeader,
    length_prefixed,
)
from securefg.federation.envelope import Envelope, Form

from .strategies import EDGE_INTS, FUZZ, mutated, parse_or_typed

SESSION = b"fuzz-session"
PARTIES = ("server", "client/0", "client/1")
_IDS = {pid: ChannelIdentity(pid) for pid in PARTIES}  # X25519 keys: drawn once, reused by every case
_DIRECTORY = {pid: ident.public_bytes for pid, ident in _IDS.items()}


def endpoints() -> dict[str, ChannelEndpoint]:
    """Fresh endpoints (sequence numbers at 0) over the module's fixed identities."""
    return {pid: ChannelEndpoint(ident, SESSION, dict(_DIRECTORY)) for pid, ident in _IDS.items()}


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    sender, receiver = draw(st.permutations(PARTIES))[:2]
    error = draw(st.none() | st.text(max_size=40))
    return Envelope(
        sender=sender,
        receivers=(receiver,),
        round=draw(st.integers(-(2**63), 2**63 - 1)),
        tag=draw(st.text(max_size=24)),
        payload=b"" if error is not None else draw(st.binary(max_size=200)),
        stage=draw(st.text(max_size=24)),
        form=draw(st.sampled_from(list(Form))),
        error=error,
    )


@st.composite
def headers(draw: st.DrawFn) -> WireHeader:
    return WireHeader(
        session=draw(st.binary(max_size=16)),
        sender=draw(st.text(max_size=12)),
        receiver=draw(st.text(max_size=12)),
        round=draw(st.integers(-(2**63), 2**63 - 1)),
        tag=draw(st.text(max_size=12)),
        stage=draw(st.text(max_size=12)),
        form=draw(st.sampled_from(list(Form))),
        seq=draw(st.integers(0, 2**64 - 1)),
        is_error=draw(st.booleans()),
    )


def _same(a: Envelope, b: Envelope) -> bool:
    return (a.sender, a.receivers, a.round, a.tag, a.payload, a.stage, a.form, a.error) == (
        b.sender, b.receivers, b.round, b.tag, b.payload, b.stage, b.form, b.error)


@FUZZ
@given(headers())
def test_any_header_round_trips(h):
    raw = h.encode()
    got, end = WireHeader.decode(raw + b"body")
    assert got == h and end == len(raw)


@FUZZ
@given(st.binary(max_size=200))
@example(WIRE_MAGIC)
@example(WIRE_MAGIC + struct.pack("<I", 2**32 - 1))  # a first field longer than the wire
@example(WIRE_MAGIC + length_prefixed(b"\x01", b"", b"\xff", b"", struct.pack("<q", 0), b"", b"", b"plaintext",
                                      struct.pack("<QB", 0, 0)))  # a sender that is not utf-8
@example(WIRE_MAGIC + length_prefixed(b"\x01", b"", b"", b"", struct.pack("<q", 0), b"", b"", b"nonsense",
                                      struct.pack("<QB", 0, 0)))  # an unknown form
def test_arbitrary_bytes_as_a_header_parse_or_raise_codec_error(data):
    got = parse_or_typed(WireHeader.decode, data, errors=CodecError)
    if got is not None:
        assert got[1] <= len(data)


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_as_a_wire_are_refused_with_a_typed_error(data):
    ends = endpoints()
    assert parse_or_typed(ends["server"].open, data, errors=(CodecError, AuthenticationError)) is None


@FUZZ
@given(envelopes())
def test_a_sealed_envelope_opens_to_itself_exactly_once(env):
    ends = endpoints()
    (receiver,) = env.receivers
    wire = ends[env.sender].seal(env, receiver)
    assert _same(ends[receiver].open(wire), env)
    got = parse_or_typed(ends[receiver].open, wire, errors=ReplayError)
    assert got is None, "a replayed wire opened a second time"


@FUZZ
@given(st.data())
def test_a_mutated_wire_is_refused_and_the_genuine_one_still_opens_once(data):
    env = data.draw(envelopes())
    ends = endpoints()
    (receiver,) = env.receivers
    wire = ends[env.sender].seal(env, receiver)
    bad = data.draw(mutated(wire))
    if bad != wire:
        assert parse_or_typed(ends[receiver].open, bad, errors=(CodecError, AuthenticationError)) is None, \
            "a changed wire opened"
    assert _same(ends[receiver].open(wire), env)
    assert parse_or_typed(ends[receiver].open, wire, errors=ReplayError) is None


@FUZZ
@given(st.data())
def test_a_header_field_changed_after_sealing_fails_authentication(data):
    env = data.draw(envelopes())
    ends = endpoints()
    (receiver,) = env.receivers
    wire = ends[env.sender].seal(env, receiver)
    header, end = WireHeader.decode(wire)
    field = data.draw(st.sampled_from(("round", "tag", "stage", "form", "seq", "is_error")))
    new = {
        "round": st.integers(-(2**63), 2**63 - 1),
        "tag": st.text(max_size=12),
        "stage": st.text(max_size=12),
        "form": st.sampled_from(list(Form)),
        "seq": st.sampled_from(EDGE_INTS),
        "is_error": st.booleans(),
    }[field]
    forged = replace(header, **{field: data.draw(new)})
    if forged == header:
        return
    got = parse_or_typed(ends[receiver].open, forged.encode() + wire[end:], errors=(AuthenticationError,))
    assert got is None, f"a wire whose {field} changed after sealing opened"
    assert _same(ends[receiver].open(wire), env)


@FUZZ
@given(envelopes(), st.integers(1, 5))
def test_wires_delivered_in_order_open_and_any_replay_is_refused(env, count):
    ends = endpoints()
    (receiver,) = env.receivers
    wires = [ends[env.sender].seal(replace(env, round=i), receiver) for i in range(count)]
    for i, w in enumerate(wires):
        assert ends[receiver].open(w).round == i
    for w in wires:
        assert parse_or_typed(ends[receiver].open, w, errors=ReplayError) is None
